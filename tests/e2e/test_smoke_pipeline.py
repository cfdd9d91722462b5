"""`make test`'s end-to-end part: the whole pipeline in the smoke profile, then checks on what it
wrote. It writes the real results/smoke and figures/smoke (never another profile's outputs)."""

import os
import time
import typing

import pytest
from support import run, tool

from lsa import files, paths
from lsa.claims import Verdict
from lsa.pipeline import check_outputs, pipeline_config
from lsa.runs import runs_of


@pytest.fixture(scope="module")
def smoke_run(smoke_pipeline):
    os.environ.pop("LSA_OUTPUT_ROOT", None)
    return smoke_pipeline


def test_smoke_pipeline_outputs(smoke_run):
    # timing is reported, never asserted (a busy machine would fail it): see the README
    print(f"smoke pipeline from no outputs: {smoke_run:.0f} s")
    pipe = pipeline_config("smoke")
    assert check_outputs(pipe) == []


def test_each_pipeline_notebook_names_first_the_commits_that_made_its_runs(smoke_run):
    """Issue 74, item 5: a notebook the pipeline ran prints first its profile, its own commit
    (as its section's run_info.json records it) and the commits its runs' run_info.json
    record, counted: what its published copy shows a reader."""
    import nbformat

    from lsa.notebook import open_section
    from lsa.publish import run_commits

    pipe = pipeline_config("smoke")
    for key in pipe.sections:
        cells = nbformat.read(paths.executed_notebook("smoke", key), as_version=4).cells
        first = next(o["text"] for c in cells if c.cell_type == "code" for o in c.outputs
                     if o.get("name") == "stdout")
        own = files.read_json(paths.section_dir("smoke", key) / "run_info.json")["git_commit"]
        assert first.startswith(f"profile smoke (the pipeline's notebook, at commit {own[:7]}"), \
            (key, first)
        runs = [r for r in open_section(key, profile="smoke").runs() if r.finished]
        assert f"it reads {len(runs)} runs" in first, (key, first)
        for made in run_commits(runs):
            assert f"`{made['commit'][:7]}` ({made['runs']} run" in first, (key, first)


def test_smoke_metrics_content(smoke_run):
    metrics = files.read_json(paths.metrics_file("smoke", "01_synthetic_study"))
    ids = [c["id"] for c in metrics["claims"]]
    assert ids[:5] == ["S3.1", "S3.2", "S3.3", "S3.4", "S3.5"]
    assert all(c["verdict"] != "not run" for c in metrics["claims"])
    summary = {(r["task"], r["encoding"], r["transform"]): r for r in metrics["summary"]}
    # the property Figure 1 is about, already visible at smoke size: length prediction fails far
    # more outside the training range than inside it
    length = summary[("length", "nope", "identity")]
    assert length["out_of_range_mean"] > 100 * length["in_range_mean"]
    pipe = pipeline_config("smoke")
    for finetuned in runs_of(pipe).finetune.values():
        spec, metrics_ = finetuned.spec, finetuned.metrics()
        assert metrics_["alpha"] == spec.alpha and metrics_["method"] == spec.method
        assert len(finetuned.log()) == pipe.finetune.optim.steps
    report = files.read_json(paths.metrics_file("smoke", "06_replication_report"))
    needs = pipe.sections["06_replication_report"].needs
    assert report["sections_found"] == needs and report["sections_missing"] == []
    n_claims = sum(len(files.read_json(paths.metrics_file("smoke", s))["claims"]) for s in needs)
    counted = sum(report["verdicts"].values()) + sum(
        n for tally in report["counted_apart"].values() for n in tally.values())
    assert counted == n_claims  # every claim counted once: the paper's apart from the controls
    made = {c["verdict"] for s in needs
            for c in files.read_json(paths.metrics_file("smoke", s))["claims"]}
    assert made <= set(typing.get_args(Verdict))  # every verdict made is one the type lists
    # the premise gates are computed in every section that needs them and in the report
    per_method = [f"G3.{m}" for m in ("pi", "longqlora", "yarn", "eabf", "clex")]
    # and raw fine-tuning's own (G3.none, the premise of the claims about it alone)
    assert [g["gate"] for g in report["gates"]] == ["G1", "G2", *per_method, "G3.none", "G4"]
    for section in ("02_misalignment_correlation", "03_regularized_finetuning", "04_ablations",
                    "05_babilong"):
        m = files.read_json(paths.metrics_file("smoke", section))
        assert [g["gate"] for g in m["gates"]] == ["G1", "G2", *per_method, "G3.none", "G4"]
        if not m["premise_met"]:
            assert all(c["verdict"] in ("premise not met", "not run") for c in m["claims"])
    # Table 1's population file: one row per model, its unit, kind, what it was trained on
    import pandas as pd

    pop = pd.read_csv(paths.section_dir("smoke", "02_misalignment_correlation") / "population.csv")
    assert list(pop.columns[:5]) == ["model", "unit", "kind", "trained_on", "excluded"]
    assert set(pop["trained_on"]) <= {"none", "sce", "jeffreys", "entropy"}
    assert {"misalignment", "jeffreys", "entropy", "train_loss", "score_beyond_4x"} <= set(pop)
    assert pop["model"].is_unique
    # the paper's training loss beside ours: the logged CE of a run, a probe's CE at l_train
    probes = pop["kind"] != "fine-tuning run"
    assert (pop.loc[probes, "train_loss_logged"] == pop.loc[probes, "train_loss"]).all()
    assert pop.loc[~probes, "train_loss_logged"].notna().all()
    # LongBench-E: the job ran on the fixture for the named runs, notebook 03 shows its table
    longbench = runs_of(pipe).longbench
    assert list(longbench) == pipe.longbench.finetune_runs
    for evaluation in longbench.values():
        m = evaluation.metrics()
        assert set(m["per_dataset"]) == set(pipe.longbench.datasets)
        assert set(m["buckets"]) == {"0-4k", "4-8k", "8k+"} and "longbench_e" in m
    table = files.read_json(paths.metrics_file("smoke", "03_regularized_finetuning"))
    assert {(r["method"], r["alpha"]) for r in table["longbench"]} == {("pi", 0.0), ("pi", 0.1)}


def test_no_claim_waits_on_a_gate_that_is_not_computed(smoke_run):
    """Every gate a section's claim rests on (its declared gates, G3 read as its method's) is
    among the gates the section computed (issue 61: A6.1 waited on a G3.none never made)."""
    from lsa.gates import Gate, needed_gates

    pipe = pipeline_config("smoke")
    for key, spec in pipe.sections.items():
        metrics = files.read_json(paths.metrics_file("smoke", key))
        computed = {g["gate"] for g in metrics.get("gates") or []}
        for claim in metrics.get("claims", []):
            needed = needed_gates([Gate(**g) for g in metrics.get("gates") or []],
                                  spec.gates, claim.get("method") or None)
            assert set(needed) <= computed, (key, claim["id"], sorted(set(needed) - computed))


def test_rerun_does_nothing_and_a_notebook_edit_reruns_it_and_the_report(smoke_run):
    start = time.time()
    out = run([tool("snakemake"), "--cores", "all", "--config", "profile=smoke"])
    assert out.returncode == 0
    # what the rerun did, not how long it took: no job ran
    assert "Nothing to be done" in out.stdout + out.stderr
    assert "rule " not in out.stdout + out.stderr, "a rerun with nothing changed ran a job"
    print(f"no-change rerun: {time.time() - start:.1f} s")
    notebook = paths.NOTEBOOKS / "01_synthetic_study.ipynb"
    before, text = notebook.stat(), notebook.read_text()
    try:
        notebook.write_text(text + " ")  # an edit (Snakemake also compares checksums)
        out = run([tool("snakemake"), "-n", "--config", "profile=smoke"])
        jobs = {line.split()[0] for line in out.stdout.splitlines()
                if line.startswith("section_")}
        assert jobs == {"section_01_synthetic_study", "section_06_replication_report"}, out.stdout
    finally:
        notebook.write_text(text)
        os.utime(notebook, ns=(before.st_atime_ns, before.st_mtime_ns))


def test_snakemake_report_shows_the_pipelines_figures_claims_and_notebooks(smoke_run, tmp_path):
    """`make report`: Snakemake's own HTML report, with the figures the notebooks saved, the
    claims table and every executed notebook."""
    html = tmp_path / "report.html"
    out = run([tool("snakemake"), "--config", "profile=smoke", "--report", str(html)])
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    text = html.read_text()
    for png in sorted(paths.figures_dir("smoke").glob("*.png")):
        assert png.name in text, f"{png.name} missing from the report"
    assert "claims.csv" in text
    for notebook in sorted((paths.results_dir("smoke") / "notebooks").glob("*.ipynb")):
        assert f"{notebook.stem}.html" in text, f"{notebook.stem} missing from the report"
