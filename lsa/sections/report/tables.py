"""The report's tables (DataFrames in, DataFrames out): the provenance of each section's run.
The claims table and the verdicts per method: ``lsa.claims``."""

from __future__ import annotations

from typing import Any

import pandas as pd


def provenance(sections: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """One row per section with results (``run_info.json``): its commit, wall time, when it
    finished, torch and transformers versions and the platform."""
    rows = []
    for s, found in sections.items():
        info = found["run_info"]
        rows.append({"section": s, "git_commit": info.get("git_commit"),
                     "wall_time_s": info.get("wall_time_s"),
                     "finished_utc": info.get("finished_utc"),
                     "torch": info["packages"].get("torch"),
                     "transformers": info["packages"].get("transformers"),
                     "device": info["device"].get("platform")})
    return pd.DataFrame(rows)
