"""Section 5.4, Tables 6-7, as tables (DataFrames in, DataFrames out): BABILong accuracy by
task x length and QA1 by fact depth with Wilson intervals, CE against CE + alpha * SCE paired
by test prompt, the sanity gate's rows and the design's columns. Their verdicts: ``claims``."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from lsa.data.babi import TASK_LABELS
from lsa.stats import (
    groups_for_power,
    nested_t_interval,
    paired_proportion_interval,
    variance_components,
    wilson_interval,
)

# Here the noise that matters is the test sample's: a cell holds a few hundred 0/1 answers, and
# the training seed's: a run trained once more can answer differently. Accuracies carry a
# Wilson interval; the regularizer's effect is the paired difference over the same test prompts
# (same seed, same index), its interval the Student t over the training seeds' mean differences,
# never narrower than the interval over the answers alone (``SEED_RULE``). A verdict is given
# only when that interval is clear of 0 (of the +-5-point band for "comparable"); the interval
# over answers alone (Agresti-Min) is reported beside it.


def babilong_design(rows: pd.DataFrame) -> str:
    """'evaluate' for rows of the evaluate design (tagged ``design``), else 'train'."""
    return ("evaluate" if "design" in rows and bool((rows["design"] == "evaluate").any())
            else "train")


def babilong_groups(rows: pd.DataFrame) -> list[str]:
    """The columns that tell the compared models apart besides the loss: the evaluate design
    may evaluate several fine-tuning methods and windows ("method", "l_train"); the train
    design has one method."""
    return ["method", "l_train"] if babilong_design(rows) == "evaluate" else []


def babilong_length(rows: pd.DataFrame) -> str:
    """The length axis: absolute tokens ("length") in the evaluate design, multiples of the
    training window ("multiple") in the train design."""
    return "length" if babilong_design(rows) == "evaluate" else "multiple"


def gate_rows(acc: pd.DataFrame) -> pd.DataFrame:
    """The CE-only answers of the sanity gate: at the training window (multiple 1) in the train
    design; in the evaluate design, per model, at the longest evaluated length within its
    training window (its shortest length when none is)."""
    ce = acc[acc["alpha"] == 0]
    if babilong_design(acc) == "train":
        return ce[ce["multiple"] == 1]
    keep = []
    for _, sub in ce.groupby(babilong_groups(acc)):
        lengths = sorted(set(sub["length"]))
        within = [n for n in lengths if n <= sub["l_train"].iloc[0]]
        keep.append(sub[sub["length"] == (within[-1] if within else lengths[0])])
    return pd.concat(keep) if keep else ce.iloc[:0]


def gate_by(acc: pd.DataFrame) -> list[str]:
    return [*babilong_groups(acc), "length", "task"] if babilong_groups(acc) else ["task"]


def babilong_tables(acc: pd.DataFrame, depth: pd.DataFrame, alpha: float, level: float = 0.95
                    ) -> dict[str, pd.DataFrame]:
    """Section 5.4's tables, by the name they are saved under: the sanity gate, accuracy by
    length (Table 6) overall and by task, the paired difference by length, QA1 accuracy by
    depth (Table 7) and its paired difference; split by model in the evaluate design."""
    groups, x = babilong_groups(acc), babilong_length(acc)
    gate = accuracy_table(gate_rows(acc), gate_by(acc), level)
    gate = gate.assign(chance_pct=[chance(t) for t in gate["task"]])
    tables = {"sanity_gate": gate,
              "table6_accuracy_by_length": accuracy_table(acc, [*groups, x], level),
              "accuracy_by_task_length": accuracy_table(acc, [*groups, "task", x], level),
              "table6_paired_difference": paired_accuracy(acc, [*groups, x], alpha, level)}
    if depth.empty:
        tables.update(table7_qa1_by_depth=pd.DataFrame(), table7_paired_difference=pd.DataFrame())
    else:
        tables.update(table7_qa1_by_depth=accuracy_table(depth, [*groups, "depth"], level),
                      table7_paired_difference=paired_accuracy(depth, [*groups, "depth"],
                                                               alpha, level))
    return tables


def accuracy_table(rows: pd.DataFrame, by: list[str], level: float = 0.95) -> pd.DataFrame:
    """Accuracy (%) per alpha and ``by`` cell over the answers of every seed, with its Wilson
    interval (``ci_low``, ``ci_high``), ``correct`` of ``n`` answers, and the spread of the
    per-seed accuracies (``seed_std``, ``seeds``)."""
    cells = ["alpha", "loss", *by]
    per_run = rows.groupby([*cells, "seed"])["correct"].mean().mul(100)
    spread = per_run.groupby(cells).agg(seed_std="std", seeds="count")
    table = rows.groupby(cells)["correct"].agg(correct="sum", n="count").join(spread)
    table = table.reset_index()
    table["accuracy"] = 100 * table["correct"] / table["n"]
    bounds = [wilson_interval(k, n, level) for k, n in zip(table["correct"], table["n"])]
    table["ci_low"] = [100 * low for low, _ in bounds]
    table["ci_high"] = [100 * high for _, high in bounds]
    return table[[*cells, "accuracy", "ci_low", "ci_high", "correct", "n", "seed_std", "seeds"]]


# what identifies one test prompt: the CE and the regularized run of a seed answer the same ones
# (and, where rows carry it, of a method: the evaluate design may evaluate several)
SAMPLE_KEYS = ["seed", "task", "length", "depth", "index"]


#: the one interval rule of a paired BABILong difference, whatever the number of seeds (a
#: percentile bootstrap over 2-5 seeds covers far less than its level, and a rule that switched
#: method with the seed count would make the interval's meaning depend on the data): the training
#: seed is the unit, as the base model is in the fine-tuning sections' t over base means
SEED_RULE = ("Student t over the training seeds' mean paired differences with seeds - 1 degrees "
             "of freedom, never narrower than the paired answers' own Agresti-Min interval")


def seed_t_interval(means, level: float = 0.95) -> tuple[float, float]:
    """The Student t interval of the mean of per-seed values (n - 1 degrees of freedom; NaN
    with fewer than two): ``lsa.stats.nested_t_interval`` with each seed its own group."""
    means = np.asarray(means, dtype=float)
    _, low, high = nested_t_interval(means, np.arange(means.size), level)
    return low, high


def paired_accuracy(rows: pd.DataFrame, by: list[str], alpha: float, level: float = 0.95
                    ) -> pd.DataFrame:
    """Per ``by`` cell, the accuracy (%) of the CE run (``ce``) and the alpha run (``reg``),
    and their difference ``delta`` (points): the runs of one seed answer the same test prompts
    (``SAMPLE_KEYS``), ``n`` pairs over every seed. The verdict's interval (``ci_low``,
    ``ci_high``) has the training seed as its unit (``SEED_RULE``): the t interval over the
    seed means (``seed_t_interval``) or, where wider, the answers' interval, so a difference one
    seed's training makes and another's does not is not read as an effect; one seed gives no
    interval (NaN). ``answers_low`` /
    ``answers_high``: the interval over test answers alone (``paired_proportion_interval``),
    for comparison; the spread of the per-seed differences is ``seed_std`` (``seeds`` seeds),
    and its two parts (``lsa.stats.variance_components``) ``sd_seeds`` (between seeds beyond
    the answers' noise, ``df_seeds``) and ``sd_answers`` (a paired answer's, within a seed),
    ``per_seed`` answers each, and ``sd_seeds_upper`` (its 80 % upper bound): what
    ``cell_needs`` plans from.
    Answers pair by method too when the rows carry one; two answers of one model to the same
    prompt are an error."""
    method = ["method"] if "method" in rows else []
    keys = list(dict.fromkeys([*method, *SAMPLE_KEYS, *by]))
    base = rows[rows["alpha"] == 0][[*keys, "correct"]]
    reg = rows[np.isclose(rows["alpha"], alpha)][[*keys, "correct"]]
    both = base.merge(reg, on=keys, suffixes=("_ce", "_reg"), validate="one_to_one")
    both["diff"] = 100 * (both["correct_reg"].astype(float) - both["correct_ce"].astype(float))
    out = []
    for cell, sub in both.groupby(by):
        diff = sub["diff"]
        a_low, a_high = paired_proportion_interval(int((diff > 0).sum()), int((diff < 0).sum()),
                                                   len(diff), level)
        per_seed = sub.groupby("seed")["diff"].mean()
        # SEED_RULE: t over the seed means, widened to the answers' own interval (two equal
        # seed means give t no width); one seed: no interval
        t_low, t_high = seed_t_interval(per_seed.to_numpy(), level)
        low, high = (min(t_low, 100 * a_low), max(t_high, 100 * a_high)) if len(per_seed) > 1 \
            else (math.nan, math.nan)
        parts = variance_components(diff.to_numpy(), sub["seed"].to_numpy())
        out.append({**dict(zip(by, cell if isinstance(cell, tuple) else (cell,))),
                    "ce": 100 * sub["correct_ce"].mean(), "reg": 100 * sub["correct_reg"].mean(),
                    "delta": diff.mean(), "ci_low": low, "ci_high": high,
                    "answers_low": 100 * a_low, "answers_high": 100 * a_high,
                    "n": len(diff), "seeds": len(per_seed), "seed_std": per_seed.std(ddof=1),
                    "sd_seeds": parts.between, "df_seeds": parts.df_between,
                    "sd_seeds_upper": parts.between_upper(),
                    "sd_answers": parts.within, "per_seed": parts.per_group})
    return pd.DataFrame(out)


#: the answers per seed ``cell_needs`` also plans at, as multiples of a cell's own
ANSWER_MULTIPLES = (1, 4)


def cell_needs(row: dict[str, Any], effect: float, power: float = 0.8, alpha: float = 0.05
               ) -> str:
    """How many training seeds a cell of ``paired_accuracy`` would need for ``power`` against
    the paper's ``effect`` (points), at its own answers per seed and at 4x as many: the t test
    over seed means (``lsa.stats.groups_for_power``) with the between-seed SD at its 80 %
    upper confidence bound (``Components.between_upper``; a point estimate from 1-2 seeds is
    no plan) and the answers' SD as measured. In words, for the cell's evidence."""
    between = row["sd_seeds_upper"]
    if not (math.isfinite(between) and math.isfinite(row["sd_answers"]) and effect):
        return "seeds needed: not computable (one seed)"
    per_seed = int(round(row["per_seed"]))
    found = []
    for multiple in ANSWER_MULTIPLES:
        n = groups_for_power(effect, between, row["sd_answers"], per_seed * multiple, power,
                             alpha)
        found.append(f"{n if n is not None else '> 1000'} seeds of {per_seed * multiple} "
                     "answers")
    seeds = (f"seed SD {row['sd_seeds']:.1f}, 80 % upper bound {between:.1f}" if between > 0
             else "the seeds' spread within the answers' noise even at its 80 % upper bound, so "
                  "answers alone: a lower bound")
    return (f"{100 * power:g} % power against {effect:+g} points needs "
            + " or ".join(found) + f" ({seeds}; answer SD {row['sd_answers']:.0f} points)")


def chance(task: str) -> float:

    return 100.0 / len(TASK_LABELS[task])
