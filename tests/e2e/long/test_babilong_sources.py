"""BABILong verdicts must not flip with the bAbI source. The smoke BABILong runs on the real
bAbI files (``$LSA_DATA_DIR/babi``, when the machine has them) are the smoke pipeline's own
(``smoke_pipeline`` reads the same ``$LSA_DATA_DIR``); they are trained again on the built-in
generator (what a fresh clone has), and their claims compared: a claim that
"agrees" with one source and "disagrees" with the other is a finding about the data, not about
the regularizer, and fails the test (``verdict_flips``, here)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from support import ROOT

from lsa import paths, runtable
from lsa.config import load_config
from lsa.runs import runs_of
from lsa.sections.babilong.claims import babilong_claims


def _train_on_the_generator(out_root, monkeypatch) -> tuple[list[dict], dict]:
    """Train the smoke BABILong runs on the built-in generator (no ``$LSA_DATA_DIR``) into
    ``out_root`` and read their claims; the source is part of the runs' identity, so this
    process reads without ``$LSA_DATA_DIR`` too."""
    monkeypatch.setenv("LSA_OUTPUT_ROOT", str(out_root))
    monkeypatch.delenv("LSA_DATA_DIR", raising=False)
    pipe = load_config(profile="smoke")
    for command in [["pretrain"]] + [r.command for r in runs_of(pipe).babilong.values()]:
        out = subprocess.run([sys.executable, "-m", "lsa", *command, "--profile", "smoke",
                              "--no-progress"], env=dict(os.environ), cwd=ROOT,
                             capture_output=True, text=True)
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return _claims(pipe)


def _claims(pipe) -> tuple[list[dict], dict]:
    """The BABILong claims of ``pipe``'s runs and the bAbI source each run read."""
    plan = runs_of(pipe)
    acc, depth = runtable.read_babilong(plan)
    return babilong_claims(acc, depth, pipe.view.alpha), runtable.read_babilong_sources(plan)


def verdict_flips(first: list[dict], second: list[dict]) -> list[str]:
    """The claims (by id) whose verdict is "agrees" in one list and "disagrees" in the other:
    what a change of data source (or of anything that should not matter) must not do."""
    opposite = {("agrees", "disagrees"), ("disagrees", "agrees")}
    other = {c["id"]: c["verdict"] for c in second}
    return [f"{c['id']}: {c['verdict']} -> {other[c['id']]}" for c in first
            if (c["verdict"], other.get(c["id"])) in opposite]


def test_babilong_verdicts_do_not_flip_with_the_babi_source(tmp_path, monkeypatch, request):
    files = paths.data_dir()
    if files is None or not (files / "babi").is_dir():
        pytest.skip("no bAbI files in $LSA_DATA_DIR/babi: only the generator to compare")
    request.getfixturevalue("smoke_pipeline")  # made here only when the test runs
    monkeypatch.delenv("LSA_OUTPUT_ROOT", raising=False)  # the pipeline's results/smoke
    real, real_source = _claims(load_config(profile="smoke"))
    generated, gen_source = _train_on_the_generator(tmp_path / "generator", monkeypatch)
    assert set(gen_source["babi_source"].values()) == {"built-in generator"}
    assert all(s.startswith("bAbI files") for s in real_source["babi_source"].values())
    assert {c["id"] for c in generated} == {c["id"] for c in real}
    assert verdict_flips(generated, real) == []


def test_verdict_flips_finds_opposite_verdicts_only():
    a = [{"id": "x", "verdict": "agrees"}, {"id": "y", "verdict": "inconclusive"},
         {"id": "z", "verdict": "disagrees"}]
    b = [{"id": "x", "verdict": "disagrees"}, {"id": "y", "verdict": "agrees"},
         {"id": "z", "verdict": "disagrees"}]
    assert verdict_flips(a, b) == ["x: agrees -> disagrees"]
