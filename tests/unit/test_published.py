"""Published results a notebook can read (``lsa.published``): a snapshot holds what the
sections and gates read, a changed file is refused, and nothing is saved from it (snapshots
re-analysed to their claims: tests/e2e/test_published_snapshots.py)."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
from support import ROOT

from lsa import published
from lsa.notebook import open_section


def test_packed_files_read_back_byte_for_byte(tmp_path):
    from lsa import files

    path = tmp_path / "runs" / "x" / "metrics.json"
    data = json.dumps({"a": [1, 2.5]}).encode()
    first = files.write_packed(path, data)
    assert first.name == "metrics.json.gz" and not path.exists()
    assert files.exists(path) and files.read_text(path) == data.decode()
    again = files.write_packed(tmp_path / "y" / "metrics.json", data)
    assert again.read_bytes() == first.read_bytes()      # no name or time in the header


def test_runs_are_added_to_a_snapshot_with_their_commit(tmp_path):
    """``add_runs``: a finished run's files join a snapshot, listed with their checksums, the
    commit that made it among the snapshot's ``run_commits`` (manifest and stamp); the
    snapshot still loads; a run listed already, or not finished, is refused."""
    import types

    from lsa.files import write_json
    from lsa.markers import FINISHED

    root = tmp_path / "snap"
    root.mkdir()
    first = [{"commit": "a" * 40, "note": "the snapshot's own"}]
    write_json(root / published.MANIFEST, {"profile": "mini", "commit": "c" * 40,
                                           "run_commits": first, "bytes": 0, "files": {}})
    write_json(root / "stamp.json", {"profile": "mini", "commit": "c" * 40,
                                     "run_commits": first})
    folder = tmp_path / "results" / "synthetic-0123456789"
    folder.mkdir(parents=True)
    write_json(folder / "metrics.json", {"per_length": [{"mse": 0.5}]})
    run = types.SimpleNamespace(id=folder.name, folder=folder, finished=False,
                                describe=lambda: "synthetic run synthetic")
    with pytest.raises(ValueError, match="not finished"):
        published.add_runs(root, [run], {"commit": "b" * 40})
    write_json(folder / FINISHED, {"steps": 1})
    run.finished = True
    manifest = published.add_runs(root, [run], {"commit": "b" * 40, "note": "added"})
    assert sorted(manifest["files"]) == [f"runs/{run.id}/metrics.json.gz",
                                         f"runs/{run.id}/{FINISHED}"]
    assert manifest["bytes"] == sum(f["bytes"] for f in manifest["files"].values()) > 0
    made = [*first, {"commit": "b" * 40, "note": "added", "runs": 1}]
    assert manifest["run_commits"] == made
    assert json.loads((root / "stamp.json").read_text())["run_commits"] == made
    assert published.load("mini", root).manifest == manifest   # checksums verified
    with pytest.raises(ValueError, match="in the snapshot already"):
        published.add_runs(root, [run], {"commit": "b" * 40})


PUBLISHED = ROOT / "docs" / "results" / "mini"


@pytest.mark.skipif(not (PUBLISHED / published.MANIFEST).exists(),
                    reason="mini is published without run files")
def test_a_snapshot_from_other_inputs_is_not_read_and_says_which_runs(tmp_path, monkeypatch,
                                                                      capsys):
    """mini was published from the built-in bAbI generator: with bAbI files in $LSA_DATA_DIR
    the BABILong runs have other ids, so section 5 does not read the snapshot and names the
    runs it lacks; a section that reads no BABILong run still reads it."""
    from lsa.data.babi import TASK_FILES

    folder = tmp_path / "data" / "babi" / "tasks_1-20_v1-2" / "en-10k"
    folder.mkdir(parents=True)
    for name in TASK_FILES.values():
        for split in ("train", "test"):
            (folder / f"{name}_{split}.txt").write_text("")
    monkeypatch.setenv("LSA_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("LSA_OUTPUT_ROOT", str(tmp_path / "out"))
    assert open_section("05_babilong", profile="mini").snapshot is None
    said = capsys.readouterr().out
    assert "it lacks runs of this configuration (babilong_pi_a0_s0-" in said
    assert "$LSA_DATA_DIR's bAbI" in said
    assert open_section("03_regularized_finetuning", profile="mini").snapshot is not None


@pytest.mark.parametrize("profile", ["mini", "mini-full"])
def test_every_published_verdict_is_recomputed_from_its_own_columns(profile):
    """A reader needs only claims.csv: each verdict judged on an interval follows from its
    ``low``, ``high``, ``direction`` and ``paper_effect`` by ``resolve_verdict``, at the
    ``confidence`` it states, with ``half_width`` its interval's, then the one verdict rule from
    its ``p_holm`` in its family (``family_verdict``); where a premise failed, the evidence
    keeps that verdict."""
    from lsa.claims import ALPHA, CONFIDENCE, FAMILIES, family_verdict, held_note
    from lsa.stats import resolve_verdict

    claims = pd.read_csv(ROOT / "docs" / "results" / profile / "claims.csv")
    judged = claims[claims["direction"].notna()]
    assert len(judged) > 10
    for row in judged.itertuples():
        verdict = resolve_verdict(row.low, row.high, int(row.direction), row.paper_effect)
        if row.origin in FAMILIES and row.p_holm >= ALPHA:  # a NaN Holm p: outside, as it is
            verdict = family_verdict(verdict, row.low, row.high, row.direction,
                                     row.paper_effect)
        assert row.confidence == CONFIDENCE and math.isclose(
            row.half_width, (row.high - row.low) / 2), row.id
        if row.verdict == "premise not met":
            assert held_note(verdict) in row.evidence, row.id
        else:
            assert verdict == row.verdict, row.id


@pytest.mark.skipif(not (PUBLISHED / published.MANIFEST).exists(),
                    reason="mini is published without run files")
def test_a_try_it_that_reanalyses_reads_the_snapshot_with_the_sections_settings_changed(
        tmp_path, monkeypatch):
    """Notebook 02's Try it trains nothing: ``try_it(reanalyse=True, ...)`` opens the section
    again on the runs the notebook read (here the published mini, nothing made in the output
    root) with only its own settings changed; another part of the configuration, which would
    change the runs, is refused by name."""
    from lsa import sections
    from lsa.strict import ConfigError

    monkeypatch.setenv("LSA_OUTPUT_ROOT", str(tmp_path))
    monkeypatch.delenv("LSA_DATA_DIR", raising=False)
    setup = open_section("02_misalignment_correlation", profile="mini")
    assert setup.snapshot is not None and len(setup.settings.rope_factors) > 1
    opened = []
    monkeypatch.setattr(sections, "drive", lambda trial: opened.append(trial) or trial)
    trial = sections.try_it(setup, reanalyse=True, population={"rope_factors": [2]})
    assert opened == [trial] and trial.snapshot is not None and trial.profile == "mini"
    assert list(trial.settings.rope_factors) == [2] and not trial.missing_inputs()
    assert {r.id for r in trial.runs()} < {r.id for r in setup.runs()}  # copies beyond x2 gone
    with pytest.raises(ConfigError, match="changes population only"):
        sections.try_it(setup, reanalyse=True, finetune={"alphas": [0.0]})
    assert not any(tmp_path.iterdir())                     # nothing trained or saved


def test_every_commit_named_for_a_published_notebook_is_its_own_run_info():
    """Issue 74, item 5: each notebook's commit, as stamp.json, MANIFEST.json, STAMP.md,
    RESULTS.md, the index and the reader's line name it, is the one its section's own
    run_info.json recorded (notebooks of one snapshot can run at several commits)."""
    from lsa.publish import provenance

    index = (ROOT / "docs" / "results" / "README.md").read_text()
    for root in sorted(p.parent for p in (ROOT / "docs" / "results").glob("*/stamp.json")):
        own = {info.parent.name: json.loads(info.read_text())["git_commit"]
               for info in (root / "sections").glob("*/run_info.json")}
        assert own, root
        stamp = json.loads((root / "stamp.json").read_text())
        manifest = json.loads((root / published.MANIFEST).read_text())
        for record in (stamp, manifest):
            named = {key: group["commit"] for group in record.get("notebook_commits") or []
                     for key in group["notebooks"]}
            assert {key: named.get(key, record["commit"]) for key in own} == own, root.name
        line = provenance(stamp)
        assert published.notebooks_ran_at(stamp) in line
        for page in ("STAMP.md", "RESULTS.md"):
            assert line in (root / page).read_text(), (root.name, page)
        if "bases" not in manifest:  # the study's index entry links its own pages
            assert line.capitalize() in index, root.name
        assert published.notebooks_ran_at(stamp) in published.load(root.name, root).describe()
