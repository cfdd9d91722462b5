"""The study's kept blocks (lsa.kept) and its plan (lsa.runs): a kept base is read from the
repository, never planned as a job; a kept file that fails its checksum stops the analysis
with one line naming it; the paper's profiles plan no study run."""

import json

import pytest

from lsa import files, kept, publish, published, runs
from lsa.config import load_config
from lsa.markers import FINISHED, LOG
from lsa.runs import runs_of
from lsa.runtable import read_study


@pytest.fixture
def kept_root(tmp_path, monkeypatch, out_root):
    """docs/results/<profile>/ in a temporary folder."""
    monkeypatch.setattr(runs, "snapshot_folder", lambda profile: tmp_path / "kept" / profile)
    return tmp_path / "kept" / "study-smoke"


def fake_finished(run, nll=3.0, wall=None, end=None):
    """A finished run's files; ``wall`` and ``end`` (seconds, its job's wall time and end
    time after 12:00 UTC) write its ``run_info.json`` as a job does."""
    run.folder.mkdir(parents=True, exist_ok=True)
    if wall is not None:
        when = f"2026-12-06T12:{end // 60:02d}:{end % 60:02d}+00:00"
        (run.folder / "run_info.json").write_text(json.dumps({"wall_time_s": wall,
                                                              "finished_utc": when}))
    metrics = {"perplexity": {str(n): {"nll": nll, "ppl": 20.0} for n in (128, 256, 512)},
               "long_range": {"128": {"copy_nll": 2.0}}}
    (run.folder / "metrics.json").write_text(json.dumps(metrics))
    (run.folder / LOG).write_text(json.dumps({"step": 1, "loss": 1.0, "ce": 1.0}) + "\n")
    (run.folder / FINISHED).write_text(json.dumps({"steps": 1}))


def test_only_the_study_profiles_plan_study_runs_and_run_section_07(tmp_path, monkeypatch):
    # the plan before any block is kept (the repository's kept blocks: the next test)
    monkeypatch.setattr(runs, "snapshot_folder", lambda profile: tmp_path / profile)
    for profile in ("smoke", "mini", "mini-full"):
        pipe = load_config(profile=profile)
        assert "07_mechanism_study" not in pipe.sections
        assert "07_mechanism_study" not in pipe.report.sections
        assert runs_of(pipe).study == []
    pipe = load_config(profile="study")
    assert list(pipe.sections) == ["07_mechanism_study"]
    plan = runs_of(pipe)
    assert sorted(plan.bases) == [f"base_s{s}" for s in range(101, 117)]
    # per base: the base model, its probe (the protocol's numbers: the diverged-run rule's
    # perplexity and the moderators') and its 20 arms
    assert len(plan.study) == 16 * 20 and len(list(plan)) == 16 * 22
    probe = plan.probes["base_s101"]
    assert probe.needs == (plan.bases["base_s101"],)
    assert probe.identity["model"] == plan.bases["base_s101"].id
    names = {r["name"] for r in plan.study if r["base"] == 101}
    assert {"eabf_a1_s101_jeffreys_b101", "eabf_a1_s1101_jeffreys_b101",
            "eabf_a0_s1101_ceboth_b101", "eabf_a0_s101_ceboth_plain_b101",
            "eabf_a1_s101_jeffreys_plain_b101", "pi_a0.1_s101_entropy_b101"} <= names
    spec = plan.finetune["eabf_a0_s101_ceboth_plain_b101"].spec
    assert (spec.seed, spec.base_seed, spec.stream, spec.ce_on) == (101, 101, "plain", "both")
    # mini's settings: the study's fine-tuning runs are mini's testbed
    assert plan.finetune["eabf_a0_s101_b101"].identity["l_train"] == 256


def test_a_kept_base_is_read_not_planned_and_a_changed_file_stops_the_analysis(kept_root):
    pipe = load_config(profile="study-smoke")
    plan = runs_of(pipe)
    block = kept.base_runs(plan)["base_s101"]
    # the base model (2 threads) from 12:00:00 to 12:10:00; the probe and arms (1 thread)
    # 30 s each, the last ending at 12:20:00: the base took 20 min and held 20 + 21 x 0.5 min
    fake_finished(block[0], wall=600, end=600)
    for i, run in enumerate(block[1:]):
        fake_finished(run, wall=30, end=1200 - 30 * i)
    lines = kept.keep(pipe, plan)
    assert lines == ["base_s101: G1 fail, G2 fail, 21 runs, every run finite"]
    manifest = files.read_json(kept_root / published.MANIFEST)
    assert manifest["bases"]["base_s101"]["runs"] == [r.id for r in block]
    noon = 1796558400.0  # 2026-12-06T12:00:00Z
    assert manifest["bases"]["base_s101"]["time"] == {
        "start": noon, "end": noon + 1200, "span_s": 1200.0, "core_s": 600 * 2 + 21 * 30}
    assert not any(name.endswith(".safetensors") for name in manifest["files"])
    # the page beside the manifest: the stage's progress, the failure and its replacement, the
    # gates and finiteness it printed, no outcome; the index of published results links it
    text = (kept_root / kept.PAGE).read_text()
    assert "**Stage 1: 0 of 2 bases kept** (seeds none); to make: 102, 103." in text
    assert "Failed G1 or G2: 101; replacements planned: 103 (1 of at most 4" in text
    assert "| base_s101 | 101 | fail | fail | yes | 21 | `unknown` | 20.0 | 30.5 |" in text
    assert "Time: 1 of the 1 kept bases have a record" in text and "they took 20.0 min" in text
    assert "nll" not in text.lower() and "estimate" not in text
    index = publish.results_index(kept_root.parent)
    assert "## `study-smoke`: the confirmatory study's kept blocks" in index
    assert "(study-smoke/README.md)" in index
    for run in block:  # the results folder is gone (a fresh clone): the kept one is read
        for path in run.folder.iterdir():
            path.unlink()
    again = runs_of(pipe)
    assert again.kept == {r.id for r in block}
    made = {r.id for r in again}  # what the workflow makes a job for
    assert not made & again.kept and len(made) == 2 * 22  # bases 102, 103: probes, arms
    # G1 failed: base 101 is replaced by 103 (the replacement seed); its runs are planned
    assert sorted(again.bases) == ["base_s101", "base_s102", "base_s103"]
    for run in (again.bases["base_s101"], again.finetune["eabf_a1_s101_jeffreys_b101"]):
        assert run.finished and run.folder.is_relative_to(kept_root)
    assert kept.keep(pipe, again)[0].startswith("no complete base")
    packed = files.packed(kept_root / "runs" / block[1].id / "metrics.json")
    packed.write_bytes(packed.read_bytes()[:-3])
    with pytest.raises(published.SnapshotDamaged) as err:
        read_study(pipe, again)
    assert "\n" not in str(err.value) and block[1].id in str(err.value)
    assert "changed against" in str(err.value)


def test_the_kept_blocks_of_the_repository_are_read_and_never_planned():
    """A fresh clone's plan of the study: every run of a base kept in ``docs/results/study/``
    is read from there (its marker is there), none is a job; a kept base that failed G1 or G2
    has its replacement planned, as ``lsa.config.base_plan`` says."""
    from lsa.config import base_plan

    pipe = load_config(profile="study")
    found = runs.read_kept("study")
    if found is None:
        pytest.skip("no study block is kept yet")
    plan = runs_of(pipe)
    made = {r.id for r in plan}  # what the workflow makes a job for
    assert found.runs <= plan.kept and not made & plan.kept
    for name, base in found.bases.items():
        assert [r.id for r in kept.base_runs(plan)[name]] == base["runs"]
        assert all(r.finished and r.folder.is_relative_to(found.root)
                   for r in kept.base_runs(plan)[name])
    seeds = base_plan(pipe.study, found.passed()).seeds
    assert sorted(plan.bases) == sorted(f"base_s{s}" for s in seeds)


def test_study_run_gives_snakemake_its_targets_as_targets():
    """``python -m lsa study run`` calls Snakemake on each base's run markers: Snakemake's own
    parser reads them as targets and the profile as the one config entry (``--config`` takes
    every value after it, so a target there would be read as a config entry)."""
    from snakemake.cli import get_argument_parser

    from lsa.__main__ import snakemake_targets

    targets = ["results/study/runs/base-1/train_summary.json", "results/study/x/done.json"]
    cmd = snakemake_targets("2", "study", targets)
    assert cmd[1:3] == ["-m", "snakemake"]
    args = get_argument_parser().parse_args(cmd[3:])
    assert args.targets == targets and args.config == ["profile=study"] and str(args.cores) == "2"


def test_the_time_a_study_took_counts_overlapping_bases_once():
    one, two = {"start": 0.0, "end": 100.0, "span_s": 100.0}, {"start": 50.0, "end": 130.0,
                                                                "span_s": 80.0}
    later, old = {"start": 200.0, "end": 210.0, "span_s": 10.0}, {"span_s": 7.0}
    assert kept.covered_s([one]) == 100
    assert kept.covered_s([two, one]) == 130  # overlapped: their union
    assert kept.covered_s([one, two, later, old]) == 130 + 10 + 7  # one after another: summed
    assert kept.covered_s([one, {"start": 10.0, "end": 20.0, "span_s": 10.0}]) == 100


def test_the_published_study_reanalyses_to_its_claims(tmp_path, monkeypatch):
    """Once the study has judged (``docs/results/study/claims.csv``), section 07 re-analysed
    from the kept blocks alone (no run made here) gives every published claim, word and number:
    what holds the study's numbers after its lock closes (``docs/study.lock``)."""
    import pandas as pd

    from lsa.notebook import open_section
    from lsa.sections import drive

    published_claims = published.folder("study") / "claims.csv"
    if not published_claims.exists():
        pytest.skip("the study has not judged")
    monkeypatch.setenv("LSA_OUTPUT_ROOT", str(tmp_path))
    result = drive(open_section("07_mechanism_study", profile="study"))
    assert list((tmp_path / "results").glob("study/runs/*")) == []  # nothing trained
    ours = pd.DataFrame(result.claims).astype(str).replace("nan", "")
    theirs = pd.read_csv(published_claims, keep_default_na=False, dtype=str)
    assert list(ours["id"]) == list(theirs["id"])
    for column in ("claim", "ours", "verdict", "evidence", "family", "bases"):
        assert list(ours[column]) == list(theirs[column]), column


def test_the_kept_page_says_whether_the_study_has_judged(monkeypatch):
    """The kept blocks' page: while open, that no outcome is read and how to make the next
    block; once section 07 has judged, a link to its outcome and no next block."""
    found = runs.read_kept("study")  # the page reads the manifest (study keep verified it)
    if found is None:
        pytest.skip("no study block is kept")
    pipe = load_config(profile="study")
    for section, judged in [(None, False), ({"judged": True}, True)]:
        monkeypatch.setattr(kept, "status", lambda profile="study", s=section: {
            "profile": profile, "section": s})
        text = kept.page(pipe, found)
        assert ("has **judged** its tests" in text) is judged
        assert ("The study is **open**" in text) is not judged
        assert ("No outcome is read here" in text) is not judged
        assert ("The next block:" in text) is not judged
        assert "| base_s101 | 101 |" in text
