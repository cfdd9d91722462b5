"""Sections 5.1-5.2, Tables 2-3, as tables (DataFrames in, DataFrames out): the regularizer's
paired effect per method, the paper's effect in nats, the power table, the paper's rows beside
ours and LongBench-E. Their verdicts: ``claims``.

Seed noise: the regularizer's effect on a quantity is the mean over seeds of the paired
difference (alpha run minus CE run, same seed, same data order), with the 95 % Student t
interval of that mean (``lsa.stats.paired_interval``), read by ``lsa.stats.resolve_verdict``.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from lsa.claims import PAPER, paper
from lsa.stats import paired_interval, sd_upper_bound, seeds_for_halfwidth, seeds_for_power

# the paper's Tables 2-3 rows for the methods that have them: (table key, paper's alpha)
PAPER_ROWS = {"clex": "table2/clex_redpajama", "longqlora": "table3/longqlora",
              "eabf": "table3/eabf"}


def paired_effect(runs: pd.DataFrame, column: str, alpha: float) -> pd.DataFrame:
    """Per method: mean over seeds of (value at ``alpha`` - value at alpha 0), its noise (std
    of the paired differences), its 95 % t interval (``lsa.stats.paired_interval``: ``low``,
    ``high``; NaN with one seed) and the number of seeds. Only the grid's plain settings
    (``CE`` and ``SCE alpha``) are compared."""

    rows = []
    plain = runs[runs["setting"].isin(["CE", f"SCE {alpha:g}"])] if "setting" in runs else runs
    for method, sub in plain.groupby("method"):
        base = sub[sub["alpha"] == 0].set_index("seed")[column]
        reg = sub[np.isclose(sub["alpha"], alpha)].set_index("seed")[column]
        seeds = base.index.intersection(reg.index)
        if len(seeds) == 0:
            continue
        diff = (reg[seeds] - base[seeds]).to_numpy(dtype=float)
        ci = paired_interval(reg[seeds].to_numpy(dtype=float), base[seeds].to_numpy(dtype=float))
        rows.append({"method": method, "column": column, "alpha": alpha,
                     "baseline": float(base[seeds].mean()), "regularized": float(reg[seeds].mean()),
                     "delta": float(diff.mean()),
                     "noise": float(diff.std(ddof=1)) if len(diff) > 1 else math.nan,
                     "low": ci.low, "high": ci.high,
                     "wins": int((diff < 0).sum()), "seeds": len(seeds)})
    return pd.DataFrame(rows)


def paper_effect_nats(method: str) -> tuple[float, str]:
    """The paper's effect of CE + 0.1 SCE on perplexity for ``method`` in nats,
    ``log(PPL_reg / PPL_CE)``, and where it comes from; methods without a row in the paper's
    tables (pi, yarn) are held against CLEX's (issue 31)."""
    key = PAPER_ROWS.get(method, PAPER_ROWS["clex"])
    ce, reg = paper(f"{key}/ce/ppl").value, paper(f"{key}/a0.1/ppl").value
    source = key.split("/")[1] + ("" if method in PAPER_ROWS else ", CLEX's value")
    return math.log(reg / ce), source


def power_table(runs: pd.DataFrame, alpha: float = 0.1,
                columns: tuple[str, ...] = ("nll_long", "nll_1x", "nll_2x", "nll_4x")
                ) -> pd.DataFrame:
    """The power computation of the seeds (config/config.yaml, ``finetune.seeds`` and
    ``method_seeds``): per method and column, the seed-to-seed standard deviation of the
    paired differences (CE + alpha SCE - CE, nats), the paper's effect for the method
    (``paper_effect_nats``), the half-width the measured seeds resolve, the seeds whose
    95 % t interval reaches the paper's effect (``lsa.stats.seeds_for_halfwidth``: the rule
    the configured seeds were chosen by) and, planned for power, the seeds a paired t-test
    needs to detect the paper's effect with 80 % power at the standard deviation's 80 % upper
    confidence bound (``sd_upper_80``, ``seeds_for_80_power``: ``lsa.stats.seeds_for_power``)."""
    runs = runs.assign(nll_long=np.log(runs["ppl_long"]))
    rows = []
    for column in columns:
        if column not in runs:
            continue
        for row in paired_effect(runs, column, alpha).itertuples():
            effect, source = paper_effect_nats(row.method)
            enough = (seeds_for_halfwidth(row.noise, abs(effect))
                      if math.isfinite(row.noise) else None)
            upper = sd_upper_bound(row.noise, row.seeds - 1)
            rows.append({"method": row.method, "column": column, "seeds": row.seeds,
                         "sd": row.noise, "half_width": (row.high - row.low) / 2,
                         "paper_effect": effect, "effect_from": source,
                         "seeds_needed": enough, "sd_upper_80": upper,
                         "seeds_for_80_power": seeds_for_power(upper, effect)})
    return pd.DataFrame(rows)


def paper_table(runs: pd.DataFrame, alpha: float = 0.1) -> pd.DataFrame:
    """Our perplexity change beside the paper's (and LongBench-E, which needs the GPU profiles)."""
    effect = paired_effect(runs, "ppl_long", alpha) if not runs.empty else pd.DataFrame()
    rows = []
    for method in sorted(set(runs["method"]) if not runs.empty else []):
        key = PAPER_ROWS.get(method)
        ours = effect[effect["method"] == method]
        row = {"method": method,
               "ours: PPL CE": ours["baseline"].iloc[0] if len(ours) else math.nan,
               f"ours: PPL +{alpha:g}": ours["regularized"].iloc[0] if len(ours) else math.nan}
        if key:
            row.update({"paper: PPL CE": paper(f"{key}/ce/ppl").value,
                        f"paper: PPL +{alpha:g}": paper(f"{key}/a0.1/ppl").value,
                        "paper: LongBench-E CE": paper(f"{key}/ce/longbench").value,
                        f"paper: LongBench-E +{alpha:g}": paper(f"{key}/a0.1/longbench").value,
                        "grade": paper(f"{key}/a0.1/ppl").grade})
        rows.append(row)
    return pd.DataFrame(rows)


def longbench_table(rows: pd.DataFrame, alpha: float = 0.1) -> pd.DataFrame:
    """Tables 2-3's layout: per method and loss, the mean over seeds of each length bucket's
    score and of LongBench-E, with the paper's LongBench-E beside where it has the method."""
    if rows.empty:
        return rows
    cols = [c for c in ("0-4k", "4-8k", "8k+", "LongBench-E") if c in rows]
    table = rows.groupby(["method", "alpha", "loss"])[cols].mean()
    table["seeds"] = rows.groupby(["method", "alpha", "loss"]).size()
    table = table.reset_index()

    def reference(row) -> float:
        key = PAPER_ROWS.get(row["method"])
        which = "ce" if row["alpha"] == 0 else f"a{row['alpha']:g}"
        return (paper(f"{key}/{which}/longbench").value
                if key and f"{key}/{which}/longbench" in PAPER else math.nan)

    table["paper: LongBench-E"] = table.apply(reference, axis=1)
    return table
