"""A reproduce's claims beside the published snapshot's, claim by claim (``python -m lsa
compare``; ``make reproduce`` ends with it).

Training on another CPU family (other kernels: AVX2 against AVX512) draws other runs from the
same configuration: the first steps agree to the bit, then the rounding differences grow. So a
reader's ``make reproduce`` may give numbers other than the published ones, and this says how
far, for each claim:

- ``identical``: the verdict, the text and the numbers (``NUMBERS_COMPARED``) as published;
- ``moved within tolerance``: the verdict as published, a number moved by at most the
  tolerance the snapshot states for the claim (``stamp.json``'s ``tolerance``: a ``default``
  and per-claim values, measured between two kernel configurations); without a stated
  tolerance no move is within it;
- ``moved beyond tolerance``: the verdict as published, a number moved further;
- ``verdict moved``: another verdict;
- ``only here`` / ``only published``: a claim one side lacks (a configuration changed since).

The analysis itself gives the same bytes on any CPU (``lsa.stats``; tests/e2e/
test_published_snapshots.py), so every move comes from the runs.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from lsa import files, paths, published

#: the numbers of a claim whose moves are measured (its estimate and interval)
NUMBERS_COMPARED = ("estimate", "low", "high")
#: the claim's words compared as text
TEXT_COMPARED = ("claim", "ours", "verdict", "evidence")
STATUSES = ("identical", "moved within tolerance", "moved beyond tolerance", "verdict moved",
            "only here", "only published")


def read_claims(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, keep_default_na=False, dtype=str)


def reproduced_claims(profile: str, sections: list[str]) -> pd.DataFrame:
    """The claims a pipeline run of ``profile`` saved: the report's table (every section's),
    else each section's in order (a profile without the report, such as the study's)."""
    from lsa.publish import REPORT

    report = paths.section_dir(profile, REPORT) / "claims.csv"
    if report.exists():
        return read_claims(report)
    found = [paths.section_dir(profile, key) / "claims.csv" for key in sections]
    found = [path for path in found if path.exists()]
    if not found:
        raise FileNotFoundError(f"{report}: no "
                                f"claims of profile {profile}; make them: make reproduce "
                                f"PROFILE={profile}")
    return pd.concat([read_claims(path) for path in found], ignore_index=True)


def _number(value: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


#: two numbers this close (relative) are one number: the published snapshots' were computed
#: with BLAS's sums before the analysis summed in a fixed order (lsa.stats.dot), which moved
#: some in their last bits; a run that moved moves them by far more
SAME_NUMBER = 1e-12


def largest_move(ours: pd.Series, theirs: pd.Series) -> float:
    """The largest absolute change of the claim's estimate and interval ends (0 when every
    one is equal, to ``SAME_NUMBER``, or missing on both sides; inf when one side lacks a
    number the other has)."""
    moves = [0.0]
    for column in NUMBERS_COMPARED:
        a, b = _number(ours.get(column, "")), _number(theirs.get(column, ""))
        if math.isnan(a) and math.isnan(b):
            continue
        if math.isnan(a) or math.isnan(b):
            moves.append(math.inf)
        elif not math.isclose(a, b, rel_tol=SAME_NUMBER, abs_tol=0.0):
            moves.append(abs(a - b))
    return max(moves)


def tolerance_of(stamp: dict[str, Any]) -> tuple[float | None, dict[str, float]]:
    """``(default, per claim)`` of a snapshot's stated tolerance (``stamp.json``), or
    ``(None, {})`` where it states none."""
    stated = stamp.get("tolerance") or {}
    return stated.get("default"), dict(stated.get("claims") or {})


def compare(ours: pd.DataFrame, theirs: pd.DataFrame, default: float | None = None,
            per_claim: dict[str, float] | None = None) -> pd.DataFrame:
    """One row per claim of either table: its id, the published and the reproduced verdict,
    the largest move of its numbers, the tolerance it was held to and its status
    (``STATUSES``), in the published order, then the claims only the reproduce has."""
    per_claim = per_claim or {}
    mine = ours.set_index("id")
    rows = []
    for _, there in theirs.iterrows():
        key = there["id"]
        tolerance = per_claim.get(key, default)
        if key not in mine.index:
            rows.append({"id": key, "published": there["verdict"], "here": "",
                         "move": math.nan, "tolerance": tolerance, "status": "only published"})
            continue
        here = mine.loc[key]
        move = largest_move(here, there)
        if here["verdict"] != there["verdict"]:
            status = "verdict moved"
        elif move == 0 and all(here.get(c, "") == there.get(c, "")
                               for c in TEXT_COMPARED):
            status = "identical"
        elif tolerance is not None and move <= tolerance:
            status = "moved within tolerance"
        else:
            status = "moved beyond tolerance"
        rows.append({"id": key, "published": there["verdict"], "here": here["verdict"],
                     "move": move, "tolerance": tolerance, "status": status})
    for key in mine.index.difference(theirs["id"], sort=False):
        rows.append({"id": key, "published": "", "here": mine.loc[key, "verdict"],
                     "move": math.nan, "tolerance": None, "status": "only here"})
    return pd.DataFrame(rows, columns=["id", "published", "here", "move", "tolerance",
                                       "status"])


def summary_line(profile: str, table: pd.DataFrame, stated: bool) -> str:
    """``compare mini: 175 claims against the published snapshot: 170 identical, ...`` (the
    line the README quotes)."""
    counts = table["status"].value_counts()
    parts = [f"{int(counts[s])} {s}" for s in STATUSES if counts.get(s)]
    note = "" if stated else " (the snapshot states no tolerance: every move counts as beyond)"
    return (f"compare {profile}: {len(table)} claims against the published snapshot: "
            + ", ".join(parts) + note)


def compare_profile(profile: str, sections: list[str]) -> tuple[pd.DataFrame, str] | None:
    """The comparison of ``profile``'s reproduce with its published snapshot and its summary
    line, or None where the profile is not published."""
    snapshot = published.folder(profile)
    if not (snapshot / "claims.csv").exists():
        return None
    stamp = files.read_json(snapshot / "stamp.json") if (snapshot / "stamp.json").exists() \
        else {}
    default, per_claim = tolerance_of(stamp)
    table = compare(reproduced_claims(profile, sections), read_claims(snapshot / "claims.csv"),
                    default, per_claim)
    return table, summary_line(profile, table, default is not None or bool(per_claim))
