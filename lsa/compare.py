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

The tolerance is measured: ``python -m lsa compare --profile P --record`` keeps the comparison of
a reproduce made under one kernel configuration with a snapshot made under another
(``kernels_file``: ``docs/bench/kernels-P.csv``, and its page beside it), and the next
``make publish`` of P states it in ``stamp.json`` (``tolerance_from``: each claim's measured
move) and marks on its results page the verdicts a move that large could change
(``machine_sensitive``).
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
    report = paths.section_dir(profile, published.REPORT) / "claims.csv"
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


def kernels_file(profile: str) -> Path:
    """Where the measurement of ``profile``'s claims between two kernel configurations is kept
    (``--record``; read by ``make publish``)."""
    return paths.ROOT / "docs" / "bench" / f"kernels-{profile}.csv"


def tolerance_from(table: pd.DataFrame, source: str) -> dict[str, Any]:
    """The tolerance a snapshot states (``stamp.json``'s ``tolerance``) from one measured
    comparison between kernel configurations (``table``, as ``compare`` makes it): each
    compared claim's largest move (0 where it was identical), no default (a claim the
    measurement lacks is held to none), the verdicts that moved, and where it was measured.
    One pair of runs: another machine's draw can move a claim further."""
    moves = {str(row.id): float(row.move) for row in table.itertuples()
             if math.isfinite(_number(row.move))}
    return {"default": None, "claims": moves, "measured": source,
            "verdicts_moved": sorted(str(i) for i in table.loc[
                table["status"] == "verdict moved", "id"])}


def machine_sensitive(claims: pd.DataFrame, tolerance: dict[str, Any]) -> pd.DataFrame:
    """The claims whose verdict another machine's runs could change, by the stated tolerance:
    those whose verdict moved in its measurement, and those with an interval end nearer a
    verdict's boundary (0 or the paper's effect: ``edge`` half-widths away) than the claim's
    measured move. Columns: id, verdict, move, distance (to the boundary), why."""
    per_claim = tolerance.get("claims") or {}
    moved = set(tolerance.get("verdicts_moved") or [])
    rows = []
    for _, row in claims.iterrows():
        key = str(row["id"])
        move = per_claim.get(key)
        distance = _number(row.get("edge", "")) * _number(row.get("half_width", ""))
        if key in moved:
            why = "its verdict moved between the two kernel configurations"
        elif move and math.isfinite(distance) and distance <= move:
            why = "an interval end lies nearer a boundary than the claim moved"
        else:
            continue
        rows.append({"id": key, "verdict": row["verdict"], "move": move,
                     "distance": distance, "why": why})
    return pd.DataFrame(rows, columns=["id", "verdict", "move", "distance", "why"])


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


def kernels_of_snapshot(stamp: dict[str, Any]) -> str:
    """The kernels a snapshot's runs ran on, as its ``stamp.json`` records them (a snapshot
    published before runs recorded their pin: the machine's capability, unpinned)."""
    recorded = stamp.get("run_kernels")
    if recorded:
        return ", ".join(f"{r['kernels']}: {r['runs']} runs" for r in recorded)
    return f"{(stamp.get('machine') or {}).get('cpu_capability', '?')} (native)"


def record(profile: str, table: pd.DataFrame, here: str) -> Path:
    """Keep ``table`` (this reproduce against the published snapshot) as the measurement of
    ``profile``'s claims between two kernel configurations (``kernels_file``) with its page,
    which names both configurations (``here``: this reproduce's runs' kernels)."""
    snapshot = published.folder(profile)
    stamp = files.read_json(snapshot / "stamp.json")
    path = kernels_file(profile)
    path.parent.mkdir(parents=True, exist_ok=True)
    files.atomic_write_text(path, table.to_csv(index=False))
    counts = table["status"].value_counts()
    moved = table[table["status"] != "identical"]
    lines = [f"# `{profile}`'s claims between two kernel configurations", "",
             f"Written by `python -m lsa compare --profile {profile} --record` "
             f"({files.git_commit()}): a `make reproduce` whose runs ran on {here}, against the "
             f"snapshot then published (runs made by "
             + ", ".join(f"`{r['commit'][:7]}`" for r in stamp.get("run_commits") or [])
             + f"), whose runs ran on {kernels_of_snapshot(stamp)}. The table beside this page "
             f"([`{path.name}`]({path.name})) is what `make publish PROFILE={profile}` states "
             "as the snapshot's tolerance, claim by claim (`lsa.compare.tolerance_from`): "
             "one pair of runs, so another machine's may move a claim further.", "",
             ", ".join(f"{int(counts[s_])} {s_}" for s_ in STATUSES if counts.get(s_))
             + f" of {len(table)} claims.", ""]
    if len(moved):
        lines += [moved.to_markdown(index=False, floatfmt=".3g"), ""]
    files.atomic_write_text(path.with_suffix(".md"), "\n".join(lines))
    return path
