"""Runs as objects (lsa/runs.py): ids, folders, the finished marker, reading without torch."""

import json
import subprocess
import sys

import pytest
from support import ROOT

from lsa.config import ConfigError, from_mapping, load_config
from lsa.files import write_json
from lsa.markers import (
    FINISHED,
    IncompleteOutputs,
    is_finished,
    mark_finished,
    output_problems,
    read_log,
)
from lsa.runs import KINDS, ablation_specs, finetune_specs, runs_of


def test_ids_are_stable(monkeypatch):
    """Run ids name folders that already exist: the same configuration keeps its ids. They
    change only when what determines a run's numbers changes: the fine-tuning ids once when
    the grid's lists (methods, alphas, seeds, runs) left their identity (so that adding a seed
    or an ablation run renames no run), and every id once when the testbed's measures joined
    them (the base model's copy probes, ``data.recurrence``, the one metric seed and the copy
    probes of the protocol: CHANGELOG.md, 2026-11-30). The BABILong ids are those of the
    built-in bAbI generator (the bAbI files are part of a run's identity)."""
    monkeypatch.delenv("LSA_DATA_DIR", raising=False)
    smoke = runs_of(from_mapping({"profile": "smoke"}))
    assert smoke.base.id == "base-9cd7efb343"
    assert smoke.finetune["pi_a0.1_s0"].id == "pi_a0.1_s0-0eaecb55ed"
    assert smoke.babilong["babilong_pi_a0_s0"].id == "babilong_pi_a0_s0-2325d672a8"
    evaluate = runs_of(from_mapping({"profile": "smoke", "seed": 1,
                                     "defaults": {"babilong": {"design": "evaluate"}}}))
    assert evaluate.base.id == "base-735b8dfffa"
    assert evaluate.finetune["clex_a0_s0"].id == "clex_a0_s0-19a37b7e55"
    assert evaluate.babilong_eval["clex_a0_s0"].id == "babilong-eval_clex_a0_s0-cc37536a7f"
    more = runs_of(from_mapping({"profile": "smoke",
                                 "defaults": {"finetune": {"seeds": [0, 5]}}}))
    assert more.finetune["pi_a0.1_s0"].id == smoke.finetune["pi_a0.1_s0"].id


def test_a_babilong_run_made_from_the_babi_files_is_another_run(tmp_path, monkeypatch):
    """The bAbI source is part of a BABILong run's identity: a folder trained on the
    generator is never read as the files' run (or back); the generator's runs keep their ids."""
    monkeypatch.delenv("LSA_DATA_DIR", raising=False)
    name = "babilong_pi_a0_s0"
    generated = runs_of(from_mapping({"profile": "smoke"})).babilong[name]
    assert generated.id == "babilong_pi_a0_s0-2325d672a8" and "babi_files" not in \
        generated.identity
    tasks = tmp_path / "babi" / "tasks_1-20_v1-2" / "en-10k"
    tasks.mkdir(parents=True)
    (tasks / "qa1_single-supporting-fact_train.txt").write_text("1 a.\n2 b?\tc\t1\n")
    monkeypatch.setenv("LSA_DATA_DIR", str(tmp_path))
    files = runs_of(from_mapping({"profile": "smoke"})).babilong[name]
    assert files.id != generated.id
    assert files.identity["babi_files"] == {"qa1_train": "en-10k/qa1_single-supporting-fact"
                                                         "_train.txt"}
    evaluate = {"profile": "smoke", "defaults": {"babilong": {"design": "evaluate"}}}
    with_files = runs_of(from_mapping(evaluate)).babilong_eval["clex_a0_s0"]
    monkeypatch.delenv("LSA_DATA_DIR")
    assert runs_of(from_mapping(evaluate)).babilong_eval["clex_a0_s0"].id != with_files.id


def test_a_run_set_is_every_run_of_the_configuration_once(out_root):
    pipe = load_config(profile="smoke")
    runs = runs_of(pipe)
    # a value its caller keeps: planned anew each call, never cached on the configuration
    assert runs_of(pipe) is not runs and "_runs" not in pipe.__dict__
    assert [r.id for r in runs_of(pipe)] == [r.id for r in runs]
    every = list(runs)
    assert every[0] is runs.base
    assert {r.kind for r in every} == {"base", "finetune", "babilong", "probe", "longbench",
                                       "synthetic"}
    assert len({r.id for r in every}) == len(every)
    assert runs.grid == [s.name for s in finetune_specs(pipe.finetune)]
    assert runs.ablation == [s.name for s in ablation_specs(pipe.ablation)]
    assert list(runs.finetune) == list(dict.fromkeys(runs.gate_runs + runs.ablation + runs.grid))
    assert "none_a0_s0" in runs.gate_runs and "pi_a0_s0" in runs.gate_runs  # the gates' runs
    # an ablation run the grid has is the grid's run: one folder
    assert "pi_a0.1_s0" in runs.grid and "pi_a0.1_s0" in runs.ablation
    assert [r.id for r in runs.used_by(["ablation", "finetune"])].count(
        runs.finetune["pi_a0.1_s0"].id) == 1
    pi = runs.get("finetune", "pi_a0.1_s0")
    assert pi.needs == (runs.base,) and pi.spec.alpha == 0.1 and pi.spec.method == "pi"
    assert pi.identity["base"] == runs.base.id
    assert pi.identity["run"] == {k: v for k, v in pi.spec.to_dict().items()
                                  if k not in ("base_seed", "processes", "stream")}  # defaults
    assert pi.folder == out_root / "results" / "smoke" / "runs" / pi.id
    assert pi.command == ["finetune", "--run", "pi_a0.1_s0"] and runs.base.command == ["pretrain"]
    assert pi.job == "finetune_pi_a0.1_s0" and runs.base.job == "base_model"
    assert runs.used_by(["babilong"]) == list(runs.babilong.values())
    with pytest.raises(ConfigError, match="finetune.runs: no run named 'pi_a9_s0'"):
        runs.get("finetune", "pi_a9_s0")
    with pytest.raises(ConfigError, match="run kind 'train'"):
        runs.get("train", "x")
    assert set(KINDS) == {"base", "finetune", "babilong", "babilong-eval", "probe", "longbench",
                          "synthetic"}


def test_further_base_models_carry_the_core_comparisons(out_root):
    """ablation.base_seeds: a base model per further pretraining seed, the core comparisons
    fine-tuned from each; every other run keeps its id."""
    import torch
    from safetensors.torch import load_file

    from lsa import jobs
    from lsa.models import build_for_run

    plain = runs_of(from_mapping({"profile": "smoke"}))
    pipe = from_mapping({"profile": "smoke", "defaults": {"ablation": {"base_seeds": [1]}}})
    rs = runs_of(pipe)
    b1 = rs.bases["base_s1"]
    assert list(rs.bases) == ["base", "base_s1"] and rs.base.id == plain.base.id
    assert b1.identity["seed"] == 1 and b1.id != rs.base.id
    assert b1.command == ["pretrain", "--run", "base_s1"] and b1.job == "base_model_base_s1"
    assert rs.get("base", "base_s1") is b1 and list(rs)[:2] == [rs.base, b1]
    core = {n for n in rs.ablation if n.endswith("_b1")}
    assert core == {f"pi_a0_s{s}_b1" for s in (0, 1)} | {f"pi_a0_s{s}_ceboth_b1" for s in (0, 1)} \
        | {f"pi_a0.1_s{s}_b1" for s in (0, 1)} | {f"pi_a1_s{s}_jeffreys_b1" for s in (0, 1)}
    run = rs.finetune["pi_a0_s0_b1"]
    assert run.needs == (b1,) and run.base is b1 and run.identity["base"] == b1.id
    assert run.identity["run"]["base_seed"] == 1
    for name, other in plain.finetune.items():  # the runs from the pipeline's base: same ids
        assert rs.finetune[name].id == other.id
    with pytest.raises(ConfigError, match="pipeline's own base model"):
        runs_of(from_mapping({"profile": "smoke", "defaults": {"ablation": {"base_seeds": [0]}}}))
    with pytest.raises(ConfigError, match="run 'x' sets base_seed"):
        runs_of(from_mapping({"profile": "smoke", "defaults": {"finetune": {"runs": [
            {"name": "x", "base_seed": 7}]}}}))
    # trained: another initialization, and the core runs start from it
    jobs.pretrain(pipe, rs.base, progress=False)
    jobs.pretrain(pipe, b1, progress=False)
    w0, w1 = (load_file(next((b.folder / "model").glob("*.safetensors")))
              for b in (rs.base, b1))
    key = next(k for k in w0 if "embed_tokens" in k)
    assert not torch.equal(w0[key], w1[key])
    model, _ = build_for_run(pipe, run.spec, pipe.finetune.l_train_of(run.spec), base=run.base)
    assert torch.equal(model.state_dict()[key], w1[key])
    jobs.finetune(pipe, run, progress=False)
    assert run.finished and run.metrics()["run"] == "pi_a0_s0_b1"
    # each base model's G1 number, as lsa.gates computes it, beside the cross-base table
    from lsa.runtable import read_base_gains

    gains = read_base_gains(pipe, rs)  # Section 5.3's run table ``base_gains``
    assert list(gains["base"]) == ["base", "base_s1"]
    assert ((gains["low"] <= gains["value"]) & (gains["value"] <= gains["high"])).all(), gains


def test_a_run_is_finished_by_its_marker_written_last(out_root):
    run = runs_of(load_config(profile="smoke")).finetune["pi_a0_s0"]
    assert not run.finished and run.log() == [] and run.config() is None
    (run.folder / "checkpoint").mkdir(parents=True)
    (run.folder / "metrics.jsonl").write_text('{"step": 1, "ce": 2.0}\n\n{"step": 2, "ce": 1.5}\n')
    write_json(run.folder / "metrics.json", {"run": run.name})
    write_json(run.folder / "run_info.json", {"seed": 0})
    assert not run.finished
    mark_finished(run.folder, {"steps": 2})
    assert run.finished and run.summary() == {"steps": 2} and (run.folder / FINISHED).exists()
    assert not (run.folder / "checkpoint").exists()  # no longer needed
    assert [r["step"] for r in run.log()] == [1, 2] == [r["step"] for r in read_log(run.folder)]
    assert run.metrics() == {"run": run.name} and run.problems() == []


def _whole_run(folder):
    """A run folder whose files verify: metrics, provenance, a two-step log, one tensor file."""
    import torch
    from safetensors.torch import save_file

    write_json(folder / "metrics.json", {"ppl": 10.0})
    write_json(folder / "run_info.json", {"seed": 0})
    (folder / "metrics.jsonl").write_text('{"step": 1}\n{"step": 2}\n')
    (folder / "model").mkdir()
    save_file({"w": torch.arange(64, dtype=torch.float32)}, folder / "model" / "m.safetensors")
    assert output_problems(folder, finished=False) == []


@pytest.mark.parametrize("damage, problem", [
    (lambda f: (f / "metrics.json").write_text('{"ppl": 1'), "metrics.json unreadable"),
    (lambda f: (f / "metrics.json").write_text("[1, 2]"), "metrics.json: not a JSON object"),
    (lambda f: (f / "run_info.json").unlink(), "run_info.json missing"),
    (lambda f: (f / "metrics.jsonl").write_text('{"step": 1}\n{"st'),
     "metrics.jsonl, line 2: not JSON"),
    (lambda f: (f / "model" / "m.safetensors").write_bytes(
        (f / "model" / "m.safetensors").read_bytes()[:-10]), "m.safetensors: "),
    (lambda f: (f / "model" / "m.safetensors").write_bytes(b"\x08\x00"), "cut inside its header"),
])
def test_a_run_whose_files_do_not_verify_is_never_marked_finished(tmp_path, damage, problem):
    _whole_run(tmp_path)
    damage(tmp_path)
    with pytest.raises(IncompleteOutputs, match="not marked finished") as err:
        mark_finished(tmp_path, {"steps": 2})
    assert problem in str(err.value)
    assert not is_finished(tmp_path)


def test_the_pipeline_unmarks_a_finished_run_whose_files_broke_after_the_job(out_root):
    """The marker alone is not "finished": a metrics file cut after the job ended makes
    Snakemake (lsa.pipeline.unmark_broken_runs, called by the Snakefile) make the run again."""
    from lsa.pipeline import check_runs, unmark_broken_runs

    pipe = load_config(profile="smoke")
    run = runs_of(pipe).finetune["pi_a0_s0"]
    run.folder.mkdir(parents=True)
    _whole_run(run.folder)
    mark_finished(run.folder, {"steps": 2})
    assert unmark_broken_runs(runs_of(pipe)) == [] and run.finished
    text = (run.folder / "metrics.json").read_text()
    (run.folder / "metrics.json").write_text(text[:len(text) // 2])
    assert any("metrics.json unreadable" in p for p in check_runs(pipe))
    (broken, problems), = unmark_broken_runs(runs_of(pipe))
    assert broken.id == run.id and "metrics.json unreadable" in problems[0]
    assert not run.finished


def test_a_published_or_kept_run_is_verified_by_its_manifest_never_unmarked(tmp_path):
    """A snapshot's run (gzipped files, no weights, its marker as the job wrote it) is checked
    against its snapshot's manifest by what reads it (lsa.published, lsa.kept): no job or
    pipeline takes its marker away, whatever its record lists."""
    import dataclasses

    run = dataclasses.replace(runs_of(load_config(profile="smoke")).base, root=tmp_path)
    run.folder.mkdir()
    (run.folder / "metrics.json.gz").write_bytes(b"")
    write_json(run.folder / FINISHED, {"steps": 1, "files": {"model/model.safetensors": "0"}})
    assert output_problems(run.folder) != [] and run.problems() == []
    assert run.unmark_if_broken() == [] and run.finished


def test_a_job_fails_when_its_id_is_not_the_one_the_pipeline_expects(capsys):
    from lsa.__main__ import main

    code = main(["finetune", "--profile", "smoke", "--run", "pi_a0_s0", "--expect-id",
                 "pi_a0_s0-0000000000"])
    err = capsys.readouterr().err
    assert code == 3  # a configuration error
    assert "the pipeline expects run folder pi_a0_s0-0000000000" in err
    assert "config/config.yaml (profile smoke, seed 0) gives pi_a0_s0-" in err
    assert "rerun snakemake" in err


READ_RESULTS = """
import sys
from lsa import pipeline
from lsa import runtable
from lsa.config import load_config
from lsa.files import write_json
from lsa.markers import mark_finished
from lsa.runs import runs_of

for profile in ("smoke", "gpu-small"):
    pipe = load_config(profile=profile)
    for run in runs_of(pipe):  # finished folders with the fields the readers use
        spec = run.spec
        write_json(run.folder / "metrics.json", {
            "l_train": pipe.finetune.l_train,
            "perplexity": {str(pipe.finetune.l_train): {"ppl": 5.0, "nll": 1.6, "tokens": 9}},
            "misalignment": {"mean": 1.0, "stderr": 0.1}, "accuracy": [], "depth": [],
            "babi_source": {}, "train_samples": {}, "finetune_run": "x", "buckets": {},
            "longbench_e": 0.0,
            **({"method": spec.method, "alpha": spec.alpha, "seed": spec.seed} if spec else {})})
        (run.folder / "metrics.jsonl").write_text('{"step": 1, "ce": 2.0}\\n')
        write_json(run.folder / "run_info.json", {"seed": 0})
        mark_finished(run.folder, {"steps": 1})
    # every reader but Section 3's (its run's table reads back in tests/unit/test_synthetic.py)
    runtable.read_tables(pipe, runs_of(pipe), [t for t in runtable.READERS if t != "synthetic"])
    pipeline.check_runs(pipe)
print(sorted(m for m in sys.modules if m == "torch" or m.startswith("torch.")))
"""


def test_reading_results_imports_no_torch(out_root):
    out = subprocess.run([sys.executable, "-c", READ_RESULTS], capture_output=True, text=True,
                         cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_run_identities_need_no_torch():
    code = ("import sys; from lsa.config import load_config; from lsa.runs import runs_of; "
            "[r.folder for p in ('smoke', 'mini', 'gpu-small', 'paper') "
            "for r in runs_of(load_config(profile=p))]; "
            "import lsa.runs, lsa.runtable, lsa.pipeline, lsa.notebook; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_the_config_json_of_a_run_is_its_identity(out_root):
    run = runs_of(load_config(profile="smoke")).babilong["babilong_pi_a0.1_s0"]
    assert "alphas" not in run.identity and run.identity["run"]["ce_on"] == "b"
    write_json(run.folder / "config.json", run.identity)
    assert run.config() == json.loads(json.dumps(run.identity))


def test_cli_lists_every_run(capsys):
    from lsa.__main__ import main

    assert main(["config", "--profile", "smoke", "--runs"]) == 0
    lines = capsys.readouterr().out.splitlines()
    pipe = load_config(profile="smoke")
    assert len(lines) == len(list(runs_of(pipe)))
    assert lines[0].split()[:3] == ["base", "base", runs_of(pipe).base.id]


def test_the_base_factor_runs_sections_5_2s_paper_comparisons_on_every_base():
    """finetune.bases: CE and CE + view.alpha for its methods at its fine-tuning seeds on each
    further base (shared with the ablation's core runs of the same name), read by Section 5.2
    with their counterparts on the pipeline's base; every other run keeps its id, and a
    configuration without further bases is the one it was (no key in the identity)."""
    plain = runs_of(from_mapping({"profile": "smoke"}))
    factor = {"bases": {"seeds": [1, 2], "methods": ["eabf"], "finetune_seeds": [0]}}
    pipe = from_mapping({"profile": "smoke", "defaults": {"finetune": factor}})
    rs = runs_of(pipe)
    assert list(rs.bases) == ["base", "base_s1", "base_s2"]
    assert rs.base_factor == ["eabf_a0_s0", "eabf_a0.1_s0", "eabf_a0_s0_b1", "eabf_a0.1_s0_b1",
                              "eabf_a0_s0_b2", "eabf_a0.1_s0_b2"]
    assert rs.finetune["eabf_a0.1_s0_b2"].base is rs.bases["base_s2"]
    assert {r.name for r in rs.used_by(["finetune"])} >= set(rs.base_factor)
    assert not set(rs.base_factor[2:]) & set(rs.grid)   # the grid stays the pipeline base's
    for name, other in plain.finetune.items():
        assert rs.finetune[name].id == other.id
    assert "bases" not in from_mapping({"profile": "smoke"}).finetune.to_dict()
    shared = from_mapping({"profile": "smoke", "defaults": {
        "finetune": factor, "ablation": {"base_seeds": [1], "method": "eabf"}}})
    both = runs_of(shared)
    assert both.finetune["eabf_a0_s0_b1"].id == rs.finetune["eabf_a0_s0_b1"].id
    with pytest.raises(ConfigError, match="pipeline's own base model"):
        runs_of(from_mapping({"profile": "smoke", "defaults": {"finetune": {
            "bases": {"seeds": [0], "finetune_seeds": [0]}}}}))
    with pytest.raises(ConfigError, match="must share the seeds"):
        from_mapping({"profile": "smoke", "defaults": {"finetune": {
            "bases": {"seeds": [1], "finetune_seeds": [0, 7]}}}})
    with pytest.raises(ConfigError, match="must hold 0 and 0.1"):
        runs_of(from_mapping({"profile": "smoke", "defaults": {"finetune": {
            **factor, "alphas": [0.0, 0.3]}}}))
    with pytest.raises(ConfigError, match="bases"):   # no S5.pi claim to run on the bases
        from_mapping({"profile": "smoke", "defaults": {"finetune": {
            "bases": {"seeds": [1], "methods": ["pi"], "finetune_seeds": [0]}}}})


def test_further_bases_carry_section_5_3s_paper_items():
    """ablation.base_seeds with items compute and parts: beside the core comparisons, CE-only
    at each compute_steps and raw fine-tuning (CE, CE on both windows, CE + alpha SCE) on each
    further base, at every seed; without those items nothing more."""
    pipe = from_mapping({"profile": "smoke", "defaults": {"ablation": {
        "base_seeds": [1], "items": ["divergence", "compute", "parts"], "seeds": [0],
        "compute_steps": [13, 20]}}})
    rs = runs_of(pipe)
    more = {n for n in rs.ablation if n.endswith("_b1")}
    m = pipe.ablation.method
    assert {f"{m}_a0_s0_steps13_b1", f"{m}_a0_s0_steps20_b1", "none_a0_s0_b1",
            "none_a0_s0_ceboth_b1", "none_a0.1_s0_b1"} <= more
    core_only = from_mapping({"profile": "smoke", "defaults": {"ablation": {
        "base_seeds": [1], "items": ["divergence"], "seeds": [0]}}})
    assert not any("steps" in n or n.startswith("none") for n in runs_of(core_only).ablation
                   if n.endswith("_b1"))
