"""The study's profile end to end, smoke-sized (issue 62): Snakemake runs `study-smoke` (two
tiny bases, every arm of the study on each, then section 07's notebook); its bases are kept as
`python -m lsa study keep` keeps them (into a temporary folder, never the repository's
`docs/results/`); with the results folder gone, as in a fresh clone, the plan holds no job and
section 07 reads the kept files without training and gives the pipeline's claims; then section 07
is published beside the kept blocks, and the headline's study part reads it."""

import json
import math
import shutil

from support import run, tool

from lsa import files, kept, paths, published, runs
from lsa.config import load_config
from lsa.publish import publish
from lsa.runs import runs_of, runs_root

PROFILE = "study-smoke"
SECTION = "07_mechanism_study"


def _plain(claims: list[dict]) -> list[dict]:
    """Claims as the section's metrics.json stores them (NaN as null)."""
    return [{k: None if isinstance(v, float) and math.isnan(v) else v for k, v in c.items()}
            for c in claims]


def test_the_study_smoke_profile_runs_section_07_then_reads_its_kept_bases(out_root, tmp_path,
                                                                           monkeypatch):
    from lsa.notebook import open_section
    from lsa.sections import drive

    monkeypatch.delenv("LSA_DATA_DIR", raising=False)  # the study reads no bAbI
    out = run([tool("snakemake"), "--cores", "2", "--config", f"profile={PROFILE}"])
    assert out.returncode == 0, out.stdout[-5000:] + out.stderr[-5000:]
    metrics = json.loads(paths.metrics_file(PROFILE, SECTION).read_text())
    assert metrics["judged"] and metrics["bases"] == [101, 102]
    claims = {c["id"]: c for c in metrics["claims"]}
    # H1, the secondary family (H2-H7), the family of three on the paper's comparison
    assert set(claims) == {"ST.H1", *(f"ST.H{i}" for i in range(2, 8)),
                           "ST.P.eabf", "ST.P.yarn", "ST.P.pi"}
    for c in claims.values():
        assert c["origin"] == "study" and c["bases"] == 2, c
        assert all(math.isfinite(c[k]) for k in ("estimate", "low", "high", "p")), c
    assert paths.executed_notebook(PROFILE, SECTION).exists()

    # keep both bases (the study-smoke gates have no threshold: both pass), then forget the
    # results folder: every run is read from the kept files, none is planned
    monkeypatch.setattr(runs, "snapshot_folder", lambda profile: tmp_path / "kept" / profile)
    pipe = load_config(profile=PROFILE)
    assert kept.keep(pipe, runs_of(pipe)) == [
        f"base_s{s}: G1 pass, G2 pass, 21 runs, every run finite" for s in (101, 102)]
    shutil.rmtree(runs_root(PROFILE))
    plan = runs_of(pipe)
    assert list(plan) == [] and len(plan.kept) == 2 * 22
    result = drive(open_section(SECTION, profile=PROFILE))
    assert _plain(result.claims) == metrics["claims"]

    # published beside the kept blocks, which stay: the section's metrics, claims, notebook,
    # each in the manifest; the time summed from the bases' own records; the headline's part
    root = publish(PROFILE)
    assert root == tmp_path / "kept" / PROFILE and kept.verify(PROFILE) is not None
    manifest = files.read_json(root / published.MANIFEST)
    assert set(manifest["bases"]) == {"base_s101", "base_s102"}
    assert f"sections/{SECTION}/metrics.json.gz" in manifest["files"]
    assert f"notebooks/{SECTION}.ipynb" in manifest["files"] and "claims.csv" in manifest["files"]
    stamp = files.read_json(root / "stamp.json")
    assert stamp["commit"] == manifest["commit"] and stamp["run_commits"]
    assert stamp["reproduce"]["bases"] == stamp["reproduce"]["bases_timed"] == 2
    assert 0 < stamp["reproduce"]["floor_s"] <= stamp["reproduce"]["wall_s"] * 1.01
    status = kept.status(PROFILE)
    assert status["section"]["claims"] == metrics["claims"]
    page = (root / "RESULTS.md").read_text()
    for c in metrics["claims"]:
        assert f"- {c['id']} (" in page and c["ours"] in page
    assert "(study-smoke/RESULTS.md)" in (root.parent / "README.md").read_text()
