"""Published snapshots re-analysed: a smoke snapshot reaches the pipeline's claims, and the
published ``mini`` and ``mini-full`` reach their own claims and gates (the snapshot's files and
loading: tests/unit/test_published.py)."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from support import ROOT
from support.snapshots import same_json

from lsa import paths, published
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
        assert "published results of `smoke`, commit abc1234" in capsys.readouterr().out
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


@pytest.mark.parametrize("profile", ["mini", "mini-full"])
def test_the_published_snapshot_reanalyses_to_its_claims_and_gates(profile, tmp_path,
                                                                   monkeypatch):
    """Sections 4-5 of a published snapshot with run files (``mini``; ``mini-full``, 3 base
    models) re-analysed from the snapshot alone (no run made here) give every claim of its
    claims.csv and every gate of its gates.json."""
    snapshot = ROOT / "docs" / "results" / profile
    if not (snapshot / published.MANIFEST).exists():
        pytest.skip(f"{profile} is published without run files")
    monkeypatch.setenv("LSA_OUTPUT_ROOT", str(tmp_path))
    # both were published from the built-in bAbI generator (their STAMPs): with
    # $LSA_DATA_DIR's bAbI files (as in CI) the BABILong runs are another configuration
    monkeypatch.delenv("LSA_DATA_DIR", raising=False)
    claims = pd.read_csv(snapshot / "claims.csv", keep_default_na=False, dtype=str)
    gates = json.loads((snapshot / "gates.json").read_text())
    assert published.load(profile) is not None            # every file as its manifest says
    moved = MOVED_SINCE_PUBLISH[profile]
    ours = []
    for key in ("02_misalignment_correlation", "03_regularized_finetuning", "04_ablations",
                "05_babilong"):
        setup = open_section(key, profile=profile)
        assert setup.snapshot is not None, key
        result = drive(setup)
        found = [g for g in result.metrics["gates"] if g["gate"] not in moved["gates"]]
        assert same_json(found, gates), key
        ours += result.claims
    ours = pd.DataFrame(ours).astype(str).replace("nan", "")
    theirs = claims[claims["id"].isin(set(ours["id"]))]
    assert len(ours) == len(theirs) > 0 and list(ours["id"]) == list(theirs["id"])
    same = ~ours["id"].isin(moved["rows"]).to_numpy()
    for column in ("id", "section", "origin", "claim", "paper", "ours", "verdict", "evidence"):
        assert list(ours[column][same]) == list(theirs[column][same]), column
    # each listed row did move (a stale entry is an error, not a tolerance)
    for row in moved["rows"]:
        mine, published_row = (frame[frame["id"] == row].iloc[0] for frame in (ours, theirs))
        assert any(mine[c] != published_row[c] for c in ("origin", "claim", "verdict",
                                                         "evidence")), row






