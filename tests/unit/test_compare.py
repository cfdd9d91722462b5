"""``lsa compare``: a reproduce's claims beside the published snapshot's, each status by hand,
and the command on the published ``mini`` read back as its own reproduce."""

from __future__ import annotations

import math
import shutil

import pandas as pd
from support import ROOT

from lsa import paths
from lsa.__main__ import main
from lsa.compare import compare, largest_move, summary_line


def frame(rows):
    columns = ["id", "claim", "ours", "verdict", "evidence", "estimate", "low", "high"]
    return pd.DataFrame([dict(zip(columns, row)) for row in rows], columns=columns, dtype=str)


PUBLISHED = frame([
    ("A", "c", "+0.10 [0.05, 0.15]", "agrees", "e", "0.1", "0.05", "0.15"),
    ("B", "c", "+0.10 [0.05, 0.15]", "agrees", "e", "0.1", "0.05", "0.15"),
    ("C", "c", "+0.10 [0.05, 0.15]", "agrees", "e", "0.1", "0.05", "0.15"),
    ("D", "c", "+0.10 [0.05, 0.15]", "agrees", "e", "0.1", "0.05", "0.15"),
    ("E", "c", "not run", "not run", "e", "", "", ""),
    ("F", "c", "x", "agrees", "e", "0.1", "0.05", "0.15"),
])
HERE = frame([
    ("A", "c", "+0.10 [0.05, 0.15]", "agrees", "e", "0.1", "0.05", "0.15"),
    ("B", "c", "+0.10 [0.05, 0.15]", "agrees", "e", "0.1", "0.0502", "0.15"),
    ("C", "c", "+0.20 [0.05, 0.35]", "agrees", "e", "0.2", "0.05", "0.35"),
    ("D", "c", "+0.10 [-0.05, 0.15]", "unclear", "e", "0.1", "-0.05", "0.15"),
    ("E", "c", "not run", "not run", "e", "", "", ""),
    ("G", "c", "y", "agrees", "e", "0.1", "0.05", "0.15"),
])


def test_each_status_by_hand():
    table = compare(HERE, PUBLISHED, default=0.001).set_index("id")
    assert table["status"].to_dict() == {
        "A": "identical", "B": "moved within tolerance", "C": "moved beyond tolerance",
        "D": "verdict moved", "E": "identical", "F": "only published", "G": "only here"}
    assert table.loc["B", "move"] == abs(0.0502 - 0.05)
    assert table.loc["C", "move"] == abs(0.35 - 0.15)
    # without a stated tolerance no move is within it; a claim's own tolerance comes first
    assert compare(HERE, PUBLISHED).set_index("id").loc["B", "status"] == \
        "moved beyond tolerance"
    own = compare(HERE, PUBLISHED, default=0.001, per_claim={"C": 0.25}).set_index("id")
    assert own.loc["C", "status"] == "moved within tolerance"
    line = summary_line("mini", compare(HERE, PUBLISHED), stated=False)
    assert line.startswith("compare mini: 7 claims against the published snapshot: 2 identical, "
                           "2 moved beyond tolerance, 1 verdict moved, 1 only here, "
                           "1 only published")
    assert "states no tolerance" in line


def test_a_number_one_side_lacks_is_an_infinite_move_and_the_last_bits_none():
    assert largest_move(pd.Series({"estimate": "0.1"}), pd.Series({"estimate": ""})) == math.inf
    assert largest_move(pd.Series({"estimate": ""}), pd.Series({"estimate": ""})) == 0.0
    # the last bits of the analysis' own arithmetic are no move of the runs
    assert largest_move(pd.Series({"low": "-0.483635047752358"}),
                        pd.Series({"low": "-0.4836350477523579"})) == 0.0


def test_the_command_on_the_published_claims_read_as_a_reproduce(tmp_path, monkeypatch,
                                                                 capsys):
    """The published ``mini``'s claims copied where a reproduce writes them: every claim
    identical; one verdict changed there: one verdict moved, listed by id."""
    monkeypatch.setenv("LSA_OUTPUT_ROOT", str(tmp_path))
    report = paths.section_dir("mini", "06_replication_report")
    report.mkdir(parents=True)
    published = ROOT / "docs" / "results" / "mini" / "claims.csv"
    shutil.copy2(published, report / "claims.csv")
    assert main(["compare", "--profile", "mini"]) == 0
    out = capsys.readouterr().out.strip()
    count = len(pd.read_csv(published))
    assert out.splitlines()[-1].startswith(f"compare mini: {count} claims against the published "
                                           f"snapshot: {count} identical")
    claims = pd.read_csv(report / "claims.csv", keep_default_na=False, dtype=str)
    first = claims["id"].iloc[0]
    claims.loc[0, "verdict"] = "unclear" if claims.loc[0, "verdict"] != "unclear" else "agrees"
    claims.to_csv(report / "claims.csv", index=False)
    assert main(["compare", "--profile", "mini"]) == 0
    out = capsys.readouterr().out
    assert f"| {first} " in out and "1 verdict moved" in out.splitlines()[-1]
    assert main(["compare", "--profile", "smoke"]) == 0
    assert "not published" in capsys.readouterr().out


def test_the_tolerance_is_each_claims_measured_move_and_marks_what_it_could_change():
    """Issue 73, items 2-3: a comparison between two kernel configurations becomes the stated
    tolerance (each claim's move, no default); a claim is machine-sensitive where its verdict
    moved in that measurement or an interval end lies nearer a boundary (edge x half-width)
    than the claim moved."""
    from lsa.compare import machine_sensitive, tolerance_from

    measured = compare(HERE, PUBLISHED)
    stated = tolerance_from(measured, "docs/bench/kernels-x.md")
    assert stated["default"] is None and stated["verdicts_moved"] == ["D"]
    assert stated["claims"] == {"A": 0.0, "B": abs(0.0502 - 0.05), "C": abs(0.35 - 0.15),
                                "D": abs(-0.05 - 0.05), "E": 0.0}  # F, G: no number compared
    held = compare(HERE, PUBLISHED, stated["default"], stated["claims"]).set_index("id")
    assert held.loc["B", "status"] == held.loc["C", "status"] == "moved within tolerance"
    assert held.loc["A", "status"] == "identical"
    claims = pd.DataFrame({"id": ["A", "B", "C", "D"], "verdict": ["agrees"] * 4,
                           "edge": ["0.5", "0.003", "2", "3"],
                           "half_width": ["0.05", "0.05", "0.15", "0.05"]})
    # A moved 0: never; B's end 0.00015 from its boundary, moved 0.0002: sensitive; C 0.3
    # away, moved 0.2: not; D's verdict moved
    sensitive = machine_sensitive(claims, stated).set_index("id")
    assert list(sensitive.index) == ["B", "D"]
    assert sensitive.loc["B", "distance"] == 0.003 * 0.05
    assert "verdict moved" in sensitive.loc["D", "why"]


def test_record_keeps_the_measurement_that_publish_states(tmp_path, monkeypatch):
    from lsa import compare as compare_module
    from lsa.compare import tolerance_from

    monkeypatch.setattr(compare_module, "kernels_file", lambda profile: tmp_path / "k-mini.csv")
    snapshot = tmp_path / "published"  # made before runs recorded their kernels
    snapshot.mkdir()
    (snapshot / "stamp.json").write_text('{"machine": {"cpu_capability": "AVX512"}, '
                                         '"run_commits": [{"commit": "abcdef0123", "runs": 9}]}')
    monkeypatch.setattr(compare_module.published, "folder", lambda profile: snapshot)
    path = compare_module.record("mini", compare(HERE, PUBLISHED), "AVX2 (pinned): 9 runs")
    back = compare_module.read_claims(path)
    assert list(back["id"]) == list(compare(HERE, PUBLISHED)["id"])
    page = path.with_suffix(".md").read_text()
    assert "AVX2 (pinned): 9 runs" in page and "AVX512 (native)" in page and "`abcdef0`" in page
    assert "2 identical, 2 moved beyond tolerance, 1 verdict moved" in page
    assert tolerance_from(back, "x") == tolerance_from(compare(HERE, PUBLISHED), "x")
