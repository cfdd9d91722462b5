"""Published snapshots re-analysed: a smoke snapshot reaches the pipeline's claims, and the
published ``mini``, ``mini-full`` and the study's kept blocks reach their own claims and gates,
on this machine's kernels and on the lowest ones (the snapshot's files and loading:
tests/unit/test_published.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pandas as pd
import pytest
from support import ROOT
from support.snapshots import REANALYSE_SCRIPT, reanalyse, same_json

from lsa import kernels, paths, published
from lsa.notebook import open_section
from lsa.sections import drive, save


def test_a_smoke_snapshot_reanalyses_to_the_pipelines_claims(smoke_pipeline, tmp_path,
                                                              monkeypatch, capsys):
    """Export the smoke pipeline's outputs as a snapshot, then run the sections alone where no
    run was made (another output root): each reads the snapshot and reaches the claims and
    gates the pipeline saved; a changed file is refused."""
    from lsa import notebook
    from lsa.config import load_config
    from lsa.runs import runs_of

    pipe = load_config(paths.results_dir("smoke") / "config.yaml", profile="smoke")
    saved = {key: json.loads(paths.metrics_file("smoke", key).read_text())
             for key in pipe.sections}
    snapshot = tmp_path / "snapshot"
    manifest = published.export(pipe, runs_of(pipe), snapshot,
                                {"commit": "abc1234", "reproduce": {"finished_utc": "today"}})
    assert manifest["bytes"] == sum(f["bytes"] for f in manifest["files"].values())
    assert not list(snapshot.rglob("*.safetensors"))     # never weights
    monkeypatch.setattr(published, "folder", lambda profile: snapshot)
    monkeypatch.setattr(notebook, "QUICK_PROFILES", frozenset())   # smoke would train
    monkeypatch.setenv("LSA_OUTPUT_ROOT", str(tmp_path / "empty"))
    for key in pipe.sections:
        setup = open_section(key, profile="smoke")
        assert setup.snapshot is not None, key
        # the notebooks' commits, from their sections' own run_info.json (issue 74, item 5)
        assert (f"published results of `smoke`, notebooks at "
                f"{published.notebooks_ran_at(manifest)}") in capsys.readouterr().out
        result = drive(setup)
        assert same_json(result.claims, saved[key]["claims"]), key
        assert same_json(result.metrics.get("gates"), saved[key].get("gates")), key
        assert save(setup, result) is None                # nothing saved from a snapshot
    assert not (tmp_path / "empty" / "results" / "smoke").exists()
    victim = next(snapshot.glob("runs/*/metrics.json.gz"))
    victim.write_bytes(victim.read_bytes()[:-4] + b"\0\0\0\0")
    with pytest.raises(published.SnapshotDamaged, match="changed"):
        open_section("03_regularized_finetuning", profile="smoke")


MOVED_SINCE_PUBLISH = {
    "mini": {"rows": set(), "gates": set()},      # republished 2026-12-07 at 84eb727
    "mini-full": {"rows": set(), "gates": set()},  # republished 2026-12-07 (84eb727, 904e95c)
}


#: the claims' columns a re-analysis must give as published, where a snapshot has them (the
#: numbers behind them too: ``estimate``, ``low``, ``high``, ``p`` are compared between kernels)
TEXT_COLUMNS = ("id", "section", "origin", "claim", "paper", "ours", "verdict", "evidence",
                "family", "bases")


@pytest.mark.parametrize("profile", ["mini", "mini-full", "study"])
def test_the_published_snapshot_reanalyses_to_its_claims_on_any_machine(profile, tmp_path,
                                                                        monkeypatch):
    """A published snapshot with run files (``mini``; ``mini-full``, 3 base models; the study's
    kept blocks) re-analysed from its files alone (no run made here), twice at once: in this
    process on this machine's kernels, and in a new process under the lowest kernels each
    library accepts (``lsa.kernels.LOWEST``: NumPy at its x86-64-v2 baseline, OpenBLAS's
    oldest core, ATen's default kernels, glibc's libm without FMA; what an older CPU runs).
    The second process really runs them (their own reports); both give the same claims,
    numbers included, gates and section metrics, to the last bit; and those are every claim of
    the snapshot's claims.csv and every gate of its gates.json."""
    snapshot = ROOT / "docs" / "results" / profile
    if not (snapshot / published.MANIFEST).exists():
        pytest.skip(f"{profile} is published without run files")
    if profile == "study" and not (snapshot / "claims.csv").exists():
        pytest.skip("the study has not judged")
    # both were published from the built-in bAbI generator (their STAMPs): with
    # $LSA_DATA_DIR's bAbI files (as in CI) the BABILong runs are another configuration
    monkeypatch.delenv("LSA_DATA_DIR", raising=False)
    monkeypatch.setenv("LSA_OUTPUT_ROOT", str(tmp_path / "here"))
    env = {**os.environ, **kernels.LOWEST, "LSA_OUTPUT_ROOT": str(tmp_path / "there"),
           "PYTHONPATH": str(ROOT / "tests")}
    lowest = tmp_path / "lowest.json"
    elsewhere = subprocess.Popen([sys.executable, "-c", REANALYSE_SCRIPT, profile, str(lowest)],
                                 cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
    try:
        here = reanalyse(profile)
    finally:
        _, err = elsewhere.communicate(timeout=3600)
    assert elsewhere.returncode == 0, err[-4000:]
    there = json.loads(lowest.read_text())

    mine, theirs = kernels.report(), there["kernels"]
    assert theirs["numpy_targets"] == [] and theirs["aten"] == "DEFAULT", theirs
    if mine["numpy_targets"]:  # a CPU above NumPy's baseline: the kernels really changed
        assert mine["openblas"] != theirs["openblas"], (mine, theirs)
    assert same_json(here, there["result"])

    claims = pd.read_csv(snapshot / "claims.csv", keep_default_na=False, dtype=str)
    if profile != "study":
        gates = json.loads((snapshot / "gates.json").read_text())
        moved = MOVED_SINCE_PUBLISH[profile]
        for key, found in here["gates"].items():
            assert same_json([g for g in found if g["gate"] not in moved["gates"]], gates), key
    else:
        moved = {"rows": set()}
    ours = pd.DataFrame(here["claims"]).astype(str).replace({"nan": "", "None": ""})
    theirs = claims[claims["id"].isin(set(ours["id"]))]
    assert len(ours) == len(theirs) > 0 and list(ours["id"]) == list(theirs["id"])
    same = ~ours["id"].isin(moved["rows"]).to_numpy()
    for column in (c for c in TEXT_COLUMNS if c in theirs):
        assert list(ours[column][same]) == list(theirs[column][same]), column
    # each listed row did move (a stale entry is an error, not a tolerance)
    for row in moved["rows"]:
        mine_row, published_row = (frame[frame["id"] == row].iloc[0] for frame in (ours, theirs))
        assert any(mine_row[c] != published_row[c] for c in ("origin", "claim", "verdict",
                                                             "evidence")), row
