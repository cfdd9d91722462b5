"""Section 07's tables: DataFrames in, DataFrames out."""

from __future__ import annotations

from typing import Any

import pandas as pd

from lsa import study


def design_table(st: Any) -> pd.DataFrame:
    """Each look of the design: bases so far, z boundary, nominal p, H1's interval level."""
    d = study.design(st)
    return pd.DataFrame({"look": range(1, len(d.stages) + 1),
                         "bases": [sum(d.stages[:k + 1]) for k in range(len(d.stages))],
                         "z": d.z, "nominal_p": d.p, "h1_level": d.levels})


def base_table(bases: pd.DataFrame) -> pd.DataFrame:
    """The planned bases: stage, complete, G1 and G2 (gates only: no outcome)."""
    return bases[["base", "stage", "complete", "g1", "g2", "g1_gain"]].copy()


def tests_table(analysis: study.Analysis) -> pd.DataFrame:
    """One row per test: its estimate, interval, p, Holm p, verdict, bases and the sensitivity
    analyses, without the per-base values (the figure's data)."""
    return analysis.table().drop(columns=["values"])


def effects_long(analysis: study.Analysis) -> pd.DataFrame:
    """Each test's per-base effects, one row per (test, base): the main figure's data."""
    rows = [{"test": r.test.id, "base": str(b), "effect": v, "estimate": r.est.mean,
             "low": r.est.low, "high": r.est.high}
            for r in analysis.rows for b, v in r.est.values.items()]
    return pd.DataFrame(rows, columns=["test", "base", "effect", "estimate", "low", "high"])
