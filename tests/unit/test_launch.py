"""Resuming without help: stale Snakemake locks, cut checkpoints, cut writes, and the fault
points the end-to-end test (test_faults.py) kills the pipeline at."""

import json
import os
import subprocess
import sys
import time

from lsa import faults, launch
from lsa.files import remove_partial_writes, write_json
from lsa.train import recover_checkpoint


def test_a_fault_point_kills_only_when_its_pattern_matches(tmp_path):
    log = tmp_path / "fired.txt"
    code = ("from lsa import faults\nfaults.point('write:a/b.json')\nprint('alive')\n"
            "faults.point('train:pi_a0_s0-123:3')\nprint('not reached')")
    env = {faults.ENV: "checkpoint:*|train:pi_a0_s0-*:3", faults.LOG_ENV: str(log)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, **env})
    assert out.returncode == -9 and out.stdout.split() == ["alive"]
    assert log.read_text() == "train:pi_a0_s0-123:3\n"
    assert faults.matches("write:x/metrics.json", "a|write:*/metrics.json")
    assert not faults.matches("write:x/metrics.json", "")


def test_a_cut_atomic_write_leaves_only_a_temporary_file_that_a_restart_removes(tmp_path):
    code = (f"from lsa.files import write_json\nwrite_json({str(tmp_path / 'metrics.json')!r}, "
            "{'a': list(range(1000))})")
    env = {**os.environ, faults.ENV: "write:*/metrics.json"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True)
    assert out.returncode == -9
    assert not (tmp_path / "metrics.json").exists()
    (partial,) = tmp_path.glob(".metrics.json.*.tmp")
    assert 0 < partial.stat().st_size < len(json.dumps({"a": list(range(1000))}))
    write_json(tmp_path / "kept.json", {})
    assert remove_partial_writes(tmp_path) == [partial]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.json"]


def _ckpt(folder, step=None):
    folder.mkdir()
    (folder / "model.safetensors").write_text("w")
    if step is not None:
        write_json(folder / "step.json", {"step": step})


def test_a_checkpoint_cut_while_saved_leaves_the_previous_one_or_the_complete_new_one(tmp_path):
    ckpt = tmp_path / "checkpoint"
    # cut before step.json: the old checkpoint stays, the partial one goes
    _ckpt(ckpt, 4)
    _ckpt(tmp_path / "checkpoint.tmp")
    recover_checkpoint(ckpt)
    assert json.loads((ckpt / "step.json").read_text())["step"] == 4
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint"]
    # cut between the two renames: the complete new one becomes the checkpoint
    ckpt.rename(tmp_path / "checkpoint.old")
    _ckpt(tmp_path / "checkpoint.tmp", 8)
    recover_checkpoint(ckpt)
    assert json.loads((ckpt / "step.json").read_text())["step"] == 8
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint"]


def test_a_stale_lock_is_removed_only_when_no_snakemake_runs_here(tmp_path, monkeypatch):
    assert launch.unlock_if_stale(tmp_path) is None  # no lock: nothing to do
    locks = tmp_path / ".snakemake" / "locks"
    locks.mkdir(parents=True)
    (locks / "0.output.lock").write_text("results/x\n")
    called = tmp_path / "called"
    unlock = [sys.executable, "-c", f"open({str(called)!r}, 'w').write('x')"]
    monkeypatch.setattr(launch, "snakemake_alive", lambda root: True)
    assert "left alone" in launch.unlock_if_stale(tmp_path, unlock) and not called.exists()
    monkeypatch.setattr(launch, "snakemake_alive", lambda root: None)
    assert "cannot tell" in launch.unlock_if_stale(tmp_path, unlock) and not called.exists()
    monkeypatch.setattr(launch, "snakemake_alive", lambda root: False)
    assert "removed a stale Snakemake lock" in launch.unlock_if_stale(tmp_path, unlock)
    assert called.exists()


def test_a_live_snakemake_in_the_folder_is_seen(tmp_path):
    assert launch.snakemake_alive(tmp_path) is False
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)",
                                "snakemake"], cwd=tmp_path)
    try:
        # argv[:3] = python, -c, <code>: not Snakemake; one named snakemake is
        assert launch.snakemake_alive(tmp_path) is False
    finally:
        sleeper.kill()
    fake = tmp_path / "snakemake"
    fake.write_text("#!/bin/sh\nsleep 30\n")
    fake.chmod(0o755)
    proc = subprocess.Popen([str(fake)], cwd=tmp_path)
    try:
        for _ in range(100):  # until the child has exec'd the script
            if launch.snakemake_alive(tmp_path):
                break
            time.sleep(0.05)
        assert launch.snakemake_alive(tmp_path) is True
        assert launch.snakemake_alive(tmp_path / "..") is False
    finally:
        proc.kill()


def test_the_pipeline_unmarks_broken_runs_of_the_invocation_before_snakemake_plans(out_root,
                                                                                  tmp_path):
    """A finished run whose files no longer verify loses its marker in `python -m lsa
    pipeline` (the Snakefile writes nothing while parsed): the runs of the configuration the
    invocation plans with (--config values, --configfile files, mini's shared runs)."""
    from lsa.config import load_config
    from lsa.runs import FINISHED, runs_of

    def broken(pipe):
        run = runs_of(pipe).base
        run.folder.mkdir(parents=True)
        (run.folder / FINISHED).write_text("{}")
        (run.folder / "metrics.json").write_text('{"cut')
        return run

    seeded = broken(load_config(profile="smoke", overrides={"seed": 1}))
    assert launch.unmark_broken("smoke") == [] and seeded.finished  # another configuration's
    (note,) = launch.unmark_broken("smoke", ["seed=1"])
    assert seeded.id in note and "metrics.json unreadable" in note and not seeded.finished
    mine = tmp_path / "mine.yaml"
    mine.write_text("seed: 2\n")
    other = broken(load_config(profile="smoke", overrides={"seed": 2}))
    (note,) = launch.unmark_broken("smoke", extra=["--configfile", str(mine)])
    assert other.id in note and not other.finished
    shared = broken(load_config(profile="mini"))
    assert [shared.id in n for n in launch.unmark_broken("mini-full")] == [True]


# ---------------------------------------------------------------------------------------------
# one merge of the configuration: the pre-flight's, the broken-run check's and the Snakefile's

MERGES = [
    ({"a": {"b": 1, "c": [1, 2]}, "d": 0}, {"a": {"c": [3]}, "e": {"f": None}}),
    ({"a": 1}, {"a": {"b": {"c": 2}}}),          # a mapping over a scalar
    ({"a": {"b": 1}}, {"a": 5}),                 # a scalar over a mapping
    ({"a": {"b": {"c": 1, "d": 2}}}, {"a": {"b": {"d": 3}, "x": []}}),
    ({}, {"p": {"q": {"r": "s"}}}),
]


def test_the_merge_is_snakemakes_update_config():
    """Key by key into mappings, anything else replaced (lists too), as Snakemake merges its
    layers; and the --config values as Snakemake's parser reads them (where they hold no
    number inside a mapping, which Snakemake's own parser would turn into a string)."""
    import copy

    from snakemake.cli import parse_config
    from snakemake.utils import update_config

    for base, override in MERGES:
        theirs = copy.deepcopy(base)
        update_config(theirs, override)
        assert launch.update_config(copy.deepcopy(base), override) == theirs
    entries = ["profile=smoke", "seed=3", "ratio=0.5", "flag=True", "name=", "word=pi",
               "profiles={smoke: {finetune: {methods: [pi, yarn]}}}",
               "profiles={smoke: {pretrain: {data: {books_source: local}}}}"]
    assert launch.config_values(entries) == parse_config(entries)
    assert launch.config_values(["profiles={smoke: {finetune: {alphas: [0.0, 0.3]}}}"]) == \
        {"profiles": {"smoke": {"finetune": {"alphas": [0.0, 0.3]}}}}


def test_a_nested_override_extends_the_profile_instead_of_replacing_it(tmp_path):
    """The issue's case: --config profiles={smoke: {finetune: {alphas: [...]}}} changes the
    alphas of smoke and keeps every other setting (the replaced key lost them)."""
    from lsa.config import load_config

    (pipe,) = launch.pipeline_configs(
        "smoke", ["profiles={smoke: {finetune: {alphas: [0.0, 0.1, 0.3]}}}"])
    smoke = load_config(profile="smoke")
    assert pipe.finetune.alphas == [0.0, 0.1, 0.3]
    assert pipe.finetune.methods == smoke.finetune.methods
    assert pipe.pretrain == smoke.pretrain and pipe.babilong == smoke.babilong
    mine = tmp_path / "mine.yaml"
    mine.write_text("seed: 4\nprofiles:\n  smoke:\n    finetune: {l_train: 128}\n")
    (pipe,) = launch.pipeline_configs("smoke", ["seed=5"], ["--configfile", str(mine), "-n"])
    assert (pipe.seed, pipe.finetune.l_train) == (5, 128)  # --config over --configfile
    assert pipe.finetune.methods == smoke.finetune.methods


#: the configuration the Snakefile plans with, built as Snakemake's command line builds it
#: (its own parser for --config, its ConfigSettings), printed field by field
SNAKEFILE_CONFIG = """
import json, sys
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.cli import parse_config
from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings
entries, files = json.loads(sys.argv[1]), json.loads(sys.argv[2])
with SnakemakeApi(OutputSettings(quiet={"all"})) as api:
    wapi = api.workflow(resource_settings=ResourceSettings(),
                        config_settings=ConfigSettings(config=parse_config(entries),
                                                       configfiles=[Path(f) for f in files],
                                                       config_args=entries),
                        snakefile=Path("Snakefile"), workdir=Path("."))
    wapi.dag()
    print("PIPE=" + json.dumps(wapi._workflow.globals["PIPE"].to_dict()))
"""


def test_a_nested_override_resolves_alike_in_the_preflight_and_in_the_snakefile(out_root,
                                                                                 tmp_path):
    from lsa.strict import plain

    mine = tmp_path / "mine.yaml"
    mine.write_text("profiles:\n  smoke:\n    finetune: {l_train: 128, alphas: [0.0]}\n")
    entries = ["profile=smoke", "seed=2",
               "profiles={smoke: {finetune: {alphas: [0.0, 0.1, 0.3]}, view: {alpha: 0.3}}}"]
    out = subprocess.run([sys.executable, "-c", SNAKEFILE_CONFIG, json.dumps(entries),
                          json.dumps([str(mine)])], cwd=launch.paths.ROOT, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    (line,) = [x for x in out.stdout.splitlines() if x.startswith("PIPE=")]
    snakefile = json.loads(line.removeprefix("PIPE="))
    (pipe,) = launch.pipeline_configs("smoke", entries[1:], ["--configfile", str(mine)])
    preflight = json.loads(json.dumps(plain(pipe.to_dict())))
    assert preflight["finetune"]["alphas"] == [0.0, 0.1, 0.3]
    assert preflight["finetune"]["l_train"] == 128 and preflight["seed"] == 2
    for part in preflight:  # field by field
        assert snakefile[part] == preflight[part], part
    assert snakefile.keys() == preflight.keys()
