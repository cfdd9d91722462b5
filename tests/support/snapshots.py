"""What the tests of published snapshots share: JSON equality with NaN as None, and the rows
the analysis has moved since the snapshots were published."""

from __future__ import annotations

import math


def same_json(a, b) -> bool:
    """Equal as JSON writes them (NaN and None alike)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_json(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b))
    missing = [v is None or (isinstance(v, float) and math.isnan(v)) for v in (a, b)]
    return all(missing) or (not any(missing) and a == b)


#: what the analysis has changed since the snapshots were published, each with its reason: the
#: re-analysis gives these rows and gates otherwise, every other one as published (emptied by
#: the next republish, which the run-code batch of 2026-12-06 calls for anyway)
#: issue 61 item 6: BABILong's one interval rule is named in the evidence (it said "two-level
#: bootstrap"; with these snapshots' 2 seeds per cell the interval was already the t's)
BABILONG_RULE = {f"S5.4.len{m}x" for m in (1, 2, 4)} | {f"S5.4.depth{d}" for d in (0, 25, 50, 75)}
