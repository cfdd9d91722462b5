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
