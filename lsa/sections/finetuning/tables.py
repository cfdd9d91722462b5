"""Sections 5.1-5.2, Tables 2-3, as tables (DataFrames in, DataFrames out): the regularizer's
paired effect per method, the paper's effect in nats, the power table, the paper's rows beside
ours and LongBench-E. Their verdicts: ``claims``.

Seed noise: the regularizer's effect on a quantity is the mean over seeds of the paired
difference (alpha run minus CE run, same seed, same data order), with the 95 % Student t
interval of that mean (``lsa.stats.paired_interval``), read by ``lsa.stats.resolve_verdict``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from lsa.claims import PAPER, paper
from lsa.stats import (
    BasePairs,
    groups_for_power,
    paired_by_base,
    sd_upper_bound,
    seeds_for_halfwidth,
    seeds_for_power,
    variance_components,
)

# the paper's Tables 2-3 rows for the methods that have them: (table key, paper's alpha)
PAPER_ROWS = {"clex": "table2/clex_redpajama", "longqlora": "table3/longqlora",
              "eabf": "table3/eabf"}


def _plain(runs: pd.DataFrame, alpha: float) -> pd.DataFrame:
    """The grid's plain settings only (``CE`` and ``SCE alpha``), not the ablations' runs."""
    return runs[runs["setting"].isin(["CE", f"SCE {alpha:g}"])] if "setting" in runs else runs


def paired_effect(runs: pd.DataFrame, column: str, alpha: float) -> pd.DataFrame:
    """Per method: mean over seeds of (value at ``alpha`` - value at alpha 0), its noise (std
    of the paired differences), its 95 % t interval (``lsa.stats.paired_interval``: ``low``,
    ``high``; NaN with one seed) and the number of seeds. Only the grid's plain settings
    (``CE`` and ``SCE alpha``) are compared."""

    rows = []
    for method, sub in _plain(runs, alpha).groupby("method"):
        p = paired_by_base(sub[np.isclose(sub["alpha"], alpha)].set_index("seed")[column],
                           sub[sub["alpha"] == 0].set_index("seed")[column])
        if len(p.diff) == 0:
            continue
        mean, low, high, n = p.interval()
        rows.append({"method": method, "column": column, "alpha": alpha,
                     "baseline": float(p.baseline.mean()), "regularized": float(p.changed.mean()),
                     "delta": mean,
                     "noise": float(p.diff.to_numpy().std(ddof=1)) if n > 1 else math.nan,
                     "low": low, "high": high,
                     "wins": int((p.diff < 0).sum()), "seeds": n})
    return pd.DataFrame(rows)


def _base_pairs(runs: pd.DataFrame, column: str, alpha: float, method: str
                ) -> BasePairs | None:
    """``method``'s CE and plain CE + ``alpha`` SCE runs paired by (base model, seed)
    (``lsa.stats.paired_by_base``); None without runs on two or more base models."""
    if runs.empty or column not in runs:
        return None
    sub = _plain(runs[runs["method"] == method], alpha)
    keys = ["base_seed", "seed"]
    found = paired_by_base(sub[np.isclose(sub["alpha"], alpha)].set_index(keys)[column],
                           sub[sub["alpha"] == 0].set_index(keys)[column])
    return found if found.bases >= 2 else None


def base_effect(runs: pd.DataFrame, column: str, alpha: float, method: str
                ) -> dict[str, Any] | None:
    """The base model as a random factor (``finetune.bases``): ``method``'s paired difference
    (value at ``alpha`` - value at alpha 0, same base, same seed) on each base model, its mean
    over the base means with the t interval over them (``lsa.stats.nested_t_interval``:
    seeds nested in bases, each base weighing alike, bases - 1 degrees of freedom), the two
    standard deviations (``lsa.stats.variance_components``: between bases beyond the seeds'
    noise, and between seeds within a base), the components themselves (``parts``) and the
    per-base means. None without two bases."""
    p = _base_pairs(runs, column, alpha, method)
    if p is None:
        return None
    mean, low, high = p.nested
    parts = variance_components(p.diff.to_numpy(), p.diff.index.get_level_values("base_seed"))
    return {"method": method, "column": column, "delta": mean, "low": low, "high": high,
            "bases": p.bases, "seeds": p.seeds, "pairs": int(p.diff.size),
            "wins": int((p.diff < 0).sum()),
            "baseline": float(p.baseline.mean()), "regularized": float(p.changed.mean()),
            "sd_bases": parts.between, "sd_seeds": parts.within, "parts": parts,
            "per_base": {int(b): float(v) for b, v in p.per_base.items()}}


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


#: seeds per base model the base plan (``base_power_table``) is computed at
PLAN_SEEDS_PER_BASE = (2, 3, 5)


def base_power_table(runs: pd.DataFrame, alpha: float = 0.1,
                     columns: tuple[str, ...] = ("nll_1x", "nll_2x", "nll_4x")) -> pd.DataFrame:
    """The plan of the base factor (``finetune.bases``, issue 45): per method of the paper's
    Tables 2-3 and column with runs on two or more base models (``base_seed``; CE and the plain
    CE + alpha SCE only, as ``base_effect`` pairs them), the paired differences' two variance
    components (``lsa.stats.variance_components``: between bases beyond the seeds' noise,
    between seeds within a base) with their 80 % upper confidence bounds, and the bases a t
    test over base means needs for 80 % power at ``PLAN_SEEDS_PER_BASE`` seeds per base
    (``lsa.stats.groups_for_power``), against the paper's effect (``bases_for_paper_*``) and
    against the effect measured here (``bases_for_ours_*``: how many bases would confirm the
    direction these runs show), both at the components' upper bounds."""
    rows = []
    for column in columns:
        if runs.empty or column not in runs:
            continue
        for method in sorted(set(runs["method"]) & set(PAPER_ROWS)):
            found = base_effect(runs, column, alpha, method)
            if found is None:
                continue
            parts = found["parts"]
            between_up = parts.between_upper()
            within_up = sd_upper_bound(parts.within, parts.df_within)
            effect, source = paper_effect_nats(method)
            row = {"method": method, "column": column, "bases": parts.groups,
                   "seeds_per_base": parts.per_group, "effect_here": found["delta"],
                   "paper_effect": effect, "effect_from": source,
                   "sd_bases": parts.between, "sd_bases_upper_80": between_up,
                   "sd_seeds": parts.within, "sd_seeds_upper_80": within_up}
            for k in PLAN_SEEDS_PER_BASE:
                row[f"bases_for_paper_{k}_seeds"] = groups_for_power(effect, between_up,
                                                                     within_up, k)
                row[f"bases_for_ours_{k}_seeds"] = groups_for_power(found["delta"], between_up,
                                                                    within_up, k)
            rows.append(row)
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
