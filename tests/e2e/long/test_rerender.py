"""``lsa publish --rerender`` (issue 74, items 3 and 5): a published snapshot's notebooks run
again on its run files, nothing trained, and the snapshot takes what they computed. Long tier:
it runs every notebook of ``mini`` (a few minutes on 2 cores; ``make test`` has no room)."""

import json
import shutil

import nbformat
import pandas as pd
from support import ROOT

from lsa import files, publish, published

TEXT = ["id", "claim", "ours", "verdict", "evidence"]


def test_a_copy_of_mini_rendered_again_keeps_its_claims_and_names_this_commit(tmp_path,
                                                                              monkeypatch):
    monkeypatch.delenv("LSA_DATA_DIR", raising=False)  # mini's BABILong runs: the generator's
    source = published.folder("mini")
    dest = tmp_path / "mini"
    shutil.copytree(source, dest)
    publish.rerender("mini", dest=dest)
    # the same code on the same runs: the same claims, word for word
    before = pd.read_csv(source / "claims.csv", keep_default_na=False, dtype=str)[TEXT]
    after = pd.read_csv(dest / "claims.csv", keep_default_na=False, dtype=str)[TEXT]
    pd.testing.assert_frame_equal(after, before)
    assert "- verdicts changed (0): none" in (dest / "RESULTS.md").read_text()
    # its files verify against its manifest; its runs are the ones it had
    snapshot = published.load("mini", dest)
    assert sorted(f for f in snapshot.manifest["files"] if f.startswith("runs/")) == sorted(
        f for f in json.loads((source / published.MANIFEST).read_text())["files"]
        if f.startswith("runs/"))
    # every notebook ran here, now: its commit is this checkout's, named on every page
    head = files.git_commit()
    stamp = json.loads((dest / "stamp.json").read_text())
    assert [g["commit"] for g in stamp["notebook_commits"]] == [head]
    assert stamp["commit"] == head and "rendered_again_utc" in stamp
    stamp_page = (dest / "STAMP.md").read_text()
    assert publish.provenance(stamp) in stamp_page and "rendered again" in stamp_page
    # each executed notebook opens with the snapshot and the commits that made its runs
    made = ", ".join(f"`{r['commit'][:7]}`" for r in stamp["run_commits"])
    for path in sorted((dest / "notebooks").glob("*.ipynb")):
        cells = nbformat.read(path, as_version=4).cells
        first = next(o["text"] for c in cells if c.cell_type == "code" for o in c.outputs
                     if o.get("name") == "stdout")
        assert f"runs made by {made}" in first and "rendered again" in first, (path.name, first)
    # the committed snapshot itself is untouched
    assert (source / "claims.csv").read_bytes() == (ROOT / "docs" / "results" / "mini" /
                                                    "claims.csv").read_bytes()
