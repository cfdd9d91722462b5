"""The study's freeze (issue 62, ``lsa.freeze``): while the study is open, the pre-registration,
the analysis, the study's run modules and its settings are those of ``docs/study.lock``, and
every commit that made a kept run descends from the freeze."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from lsa import freeze, paths
from lsa.config import load_config
from lsa.pipeline import workflow_settings

LOCK = freeze.read()
pytestmark = pytest.mark.skipif(LOCK is None, reason="the study is not frozen yet")


def git(*cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *cmd], cwd=paths.ROOT, capture_output=True, text=True)


needs_history = pytest.mark.skipif(
    shutil.which("git") is None or git("cat-file", "-e", f"{(LOCK or {}).get('commit')}^{{commit}}"
                                       ).returncode != 0,
    reason="needs the repository's history (a clone, not an exported tree)")


def test_nothing_locked_changes_while_the_study_is_open():
    if LOCK["status"] != "open":
        pytest.skip("the study is closed")
    assert freeze.changed(load_config(profile="study"), LOCK) == [], (
        "a locked file or setting changed while the study is open: revert it, or restart the "
        "study as a deviation (docs/preregistration.md, section 9) with a new lock")


def test_the_lock_names_the_document_the_analysis_and_the_run_modules():
    locked = set(LOCK["files"])
    assert {freeze.PREREGISTRATION, *freeze.ANALYSIS} <= locked
    assert {"lsa/train.py", "lsa/misalign.py", "lsa/fused.py", "lsa/models.py",
            "lsa/evaluate/perplexity.py", "lsa/extend/attention.py"} <= locked
    assert "lsa/runs.py" not in locked  # orchestration: a changed setting changes a run's id


def test_a_changed_file_or_setting_is_named(tmp_path, monkeypatch):
    pipe = load_config(profile="study")
    lock = {**LOCK, "files": {**LOCK["files"], "lsa/study.py": "0" * 64}}
    assert "lsa/study.py" in freeze.changed(pipe, lock)
    assert any("config" in c for c in freeze.changed(pipe, {**LOCK, "config": "0" * 64}))
    # the interim look may raise the stages: that is not a change of the study
    raised = load_config(profile="study", overrides={"profiles": {"study": {"study": {
        "stages": 2}}}})
    assert freeze.config_digest(raised) == freeze.config_digest(pipe)


@needs_history
def test_the_document_is_the_frozen_one_and_every_kept_run_descends_from_the_freeze():
    commit = LOCK["commit"]
    assert git("merge-base", "--is-ancestor", commit, "HEAD").returncode == 0
    first = git("log", "--diff-filter=A", "--format=%H", "--", freeze.PREREGISTRATION)
    assert first.stdout.split()[-1] == commit, "the lock's commit is the document's first"
    # the plan stays as it was frozen, open or closed (a deviation is a new lock, section 9)
    frozen = git("show", f"{commit}:{freeze.PREREGISTRATION}").stdout
    assert frozen == (paths.ROOT / freeze.PREREGISTRATION).read_text()
    from lsa import files, published

    manifest = published.folder("study") / published.MANIFEST
    made = files.read_json(manifest)["run_commits"] if manifest.exists() else []
    ran = files.read_json(manifest).get("commit") if manifest.exists() else None
    if ran:  # the commit section 07's notebook ran at (lsa.publish.publish_study)
        made = [*made, {"commit": ran, "note": "section 07's notebook"}]
    for entry in made:
        run_commit = entry["commit"]
        assert not run_commit.endswith("-dirty"), f"a kept run was made from a dirty tree: {entry}"
        assert git("merge-base", "--is-ancestor", commit, run_commit).returncode == 0, entry


def test_another_preregistration_freezes_with_its_own_document_analysis_and_profile(tmp_path):
    """Issue 75: the freeze is not tied to the study's document and profile. A stand-in
    pre-registration in a temporary folder, with an analysis file and the run modules of
    ``finetune`` runs, is locked; editing the document, the analysis or a run module, or a
    setting of its profile, is named; a setting it leaves out is not."""
    import dataclasses

    for name in ["docs/design.md", "lsa/design_analysis.py",
                 *(f"lsa/{m}" for m in workflow_settings().modules_of("finetune"))]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(f"stand-in {name}\n")
    mine = freeze.Freeze(tmp_path / "docs" / "design.lock", "docs/design.md",
                         ("lsa/design_analysis.py",), ("finetune",), "mini",
                         ("seed", "finetune"), {"finetune": ("steps_note",)}, tmp_path)
    pipe = load_config(profile="mini")
    lock = freeze.write(pipe, "c" * 40, freeze=mine)
    assert (tmp_path / "docs" / "design.lock").exists() and not freeze.STUDY.lock == mine.lock
    assert freeze.read(mine.lock) == lock and freeze.changed(pipe, lock, mine) == []
    assert set(lock["files"]) == {"docs/design.md", "lsa/design_analysis.py",
                                  *(f"lsa/{m}" for m in workflow_settings().modules_of(
                                      "finetune"))}
    (tmp_path / "docs" / "design.md").write_text("edited after the freeze\n")
    (tmp_path / "lsa" / "train.py").write_text("a fix during the study\n")
    assert freeze.changed(pipe, lock, mine) == ["docs/design.md", "lsa/train.py"]
    seeded = dataclasses.replace(pipe, seed=pipe.seed + 1)
    assert freeze.changed(seeded, lock, mine)[-1] == \
        "config/config.yaml (the mini profile's settings)"
    # the study's own freeze reads as before
    assert freeze.locked_files() == freeze.locked_files(freeze.STUDY)
