"""Section 5.3's tables: the runs' columns, the comparisons each item makes (its *pairs*), their
paired effects over seeds, the summaries and item 5's accounting. DataFrames in, DataFrames out.

Every comparison is paired by seed: runs of one seed draw each step's batch and ``l_extra``
from ``(seed, step)`` alone, so runs of the same l_extra setting train on the same sequences;
item 3's settings draw other ``l_extra`` values and therefore other windows (the same
generator, other draws: paired by seed, not by batch). The effect of a setting is the mean
over seeds of (run with the setting) - (its baseline run), with the 95 % Student t interval of
that mean (``lsa.stats.paired_interval``). The judged quantity is the per-token NLL at the
longest evaluation window (``longest_column``: 4x the training window in ``mini``), lower is
better; its perplexity is shown beside (an interval on raw perplexity breaks down when one
seed explodes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from lsa import stats
from lsa.config import AblationConfig
from lsa.runtable import DIVERGENCE_LABELS, window_columns

#: one comparison: (method, setting, baseline method, baseline setting)
Pair = tuple[str, str, str, str]

#: what each arm does to the paper's metric and its parts (controls: "lowers" / "raises")
METRIC_COLUMNS = ("misalignment", "jeffreys", "mean_entropy")
#: the copy probes' NLL at 1x and 2x l_train (``far_columns``)
FAR_COLUMNS = ("nll_copy_1x", "nll_copy_2x")


@dataclass(frozen=True, eq=False)  # holds a table: compared by identity
class ItemInputs:
    """What an item's claims read beside its effects: the settings, the judged ``column`` (the
    longest window's NLL), items 1-6's ``runs`` (item 2 pairs alpha 0.3 with 0.1 from them),
    the regularized runs' ``steps``, item 5's CE-only steps of equal counted work
    (``equal_steps``: ``tables.equal_compute_steps``, forward and backward tokens) and its
    paper budgets with the arms' measured time per step (``compute_paper``:
    ``paper_compute_table``; None where item 5 is not run)."""

    cfg: AblationConfig
    column: str
    runs: pd.DataFrame
    steps: int
    equal_steps: float
    compute_paper: pd.DataFrame | None = None


def longest_column(runs: pd.DataFrame, kind: str = "nll") -> str:
    """``nll_Mx`` (or ``ppl_Mx``) of the largest multiple M present."""
    return f"{kind}_{window_columns(runs)[-1][4:]}"


def with_entropy(runs: pd.DataFrame) -> pd.DataFrame:
    """``mean_entropy``: the final model's mean next-token entropy, (H(p) + H(q)) / 2 over the
    metric's positions."""
    return runs.assign(mean_entropy=runs["entropy"] / 2) if "entropy" in runs else runs


def far_columns(runs: pd.DataFrame) -> list[str]:
    """The copy probes' NLL at 1x and 2x ``l_train`` (``nll_copy_Mx``, ``lsa.runtable``): a
    span whose earlier occurrence lies in the far half of the window, so only the far context
    predicts it. At 1x that context is inside the training window: a regularizer that pulls
    the long window's predictions towards the short window's (which lacks it) may teach the
    model to ignore it, and this copy NLL rises."""
    return [c for c in FAR_COLUMNS if c in runs.columns]


def judged_columns(runs: pd.DataFrame) -> list[str]:
    """The judged column (the longest window's NLL) and its perplexity beside it."""
    return [longest_column(runs), longest_column(runs, "ppl")]


def metric_columns(runs: pd.DataFrame) -> list[str]:
    """``judged_columns``, then the paper's metric and its parts (``METRIC_COLUMNS``) and the
    copy probes (``far_columns``): items 1 and 4 report what each arm does to them."""
    return [*judged_columns(runs), *METRIC_COLUMNS, *far_columns(runs)]


def summary(runs: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """Mean, standard deviation and count over seeds per (method, setting)."""
    agg = runs.groupby(["method", "setting"], sort=False)[columns].agg(["mean", "std", "count"])
    agg.columns = [f"{c}_{s}" for c, s in agg.columns]
    return agg.reset_index()


def effects(runs: pd.DataFrame, pairs: list[Pair], columns: list[str]) -> pd.DataFrame:
    """Per (method, setting, baseline method, baseline setting) in ``pairs`` and column: the
    paired difference (same base model, same seed) beside both means. On one base model: its
    mean over seeds with the 95 % t interval over seeds. Where both settings ran on two or
    more base models (``base_seed``; ``ablation.base_seeds``): the mean of the base models'
    means with the t interval over them (``stats.nested_t_interval``: seeds nested in bases),
    the base model a random factor. ``delta``, ``low``, ``high``; ``bases``; ``seeds`` (per base
    model, the fewest); ``n``: the interval's units (bases, or seeds on one base)."""
    rows = []
    keys = ["base_seed", "seed"] if "base_seed" in runs else ["seed"]
    for method, setting, base_method, base_setting in pairs:
        changed = runs[(runs["method"] == method) & (runs["setting"] == setting)].set_index(keys)
        base = runs[(runs["method"] == base_method)
                    & (runs["setting"] == base_setting)].set_index(keys)
        for col in columns:
            p = stats.paired_by_base(changed[col], base[col])
            mean, low, high, n = p.interval()
            rows.append({"method": method, "setting": setting,
                         "baseline": f"{base_method} {base_setting}", "column": col,
                         "baseline_mean": float(p.baseline.mean()),  # NaN without pairs
                         "changed_mean": float(p.changed.mean()),
                         "delta": mean, "low": low, "high": high,
                         "bases": p.bases, "seeds": p.seeds, "n": n})
    return pd.DataFrame(rows)


def effect_row(eff: pd.DataFrame, method: str, setting: str, baseline: str, column: str):
    """The row of ``eff`` (``effects``) of one comparison and column, or None."""
    sel = eff[(eff["method"] == method) & (eff["setting"] == setting)
              & (eff["baseline"] == baseline) & (eff["column"] == column)]
    return None if sel.empty else sel.iloc[0]


# ---------------------------------------------------------------------------------------------
# the items' comparisons


def arms(cfg: AblationConfig) -> list[tuple[str, float]]:
    """Item 1's regularizers: (divergence, alpha) of SCE, Jeffreys and entropy."""
    return [(d, a) for d, alphas in (("sce", cfg.sce_alphas), ("jeffreys", cfg.jeffreys_alphas),
                                     ("entropy", cfg.entropy_alphas)) for a in alphas]


def divergence_pairs(cfg: AblationConfig) -> list[Pair]:
    """Every arm against CE-only and, where the exposure or compute item runs it, against the
    same-cost control (CE on both windows: the same two windows forward and backward)."""
    m = cfg.method
    fair = "exposure" in cfg.items
    return [(m, f"{DIVERGENCE_LABELS[d]} {a:g}", m, base) for d, a in arms(cfg)
            for base in ((["CE (both windows)"] if fair else []) + ["CE"])]


def sweep_pairs(cfg: AblationConfig) -> list[Pair]:
    """Every swept alpha against the method's same-cost control (CE on both windows, which
    the sweep runs for each of its methods) and against CE-only."""
    return [(method, f"SCE {a:g}", method, base) for method in cfg.sweep_methods
            for a in cfg.sweep_alphas if a > 0 for base in ("CE (both windows)", "CE")]


def l_extra_arms(cfg: AblationConfig) -> list[tuple[str, float]]:
    """Item 3's regularizers, fixed in ``config/`` before the run: SCE at ``l_extra_alphas``
    and Jeffreys at ``l_extra_jeffreys_alphas``."""
    return ([("sce", a) for a in cfg.l_extra_alphas]
            + [("jeffreys", a) for a in cfg.l_extra_jeffreys_alphas])


def l_extra_pairs(cfg: AblationConfig) -> list[Pair]:
    m = cfg.method
    return [(m, f"{DIVERGENCE_LABELS[d]} {a:g}, l_extra {x}", m, f"{DIVERGENCE_LABELS[d]} {a:g}")
            for d, a in l_extra_arms(cfg) for x in cfg.l_extra_settings if x != 1]


def exposure_pairs(cfg: AblationConfig) -> list[Pair]:
    m, a = cfg.method, cfg.alpha
    return [(m, "CE (both windows)", m, "CE"), (m, f"SCE {a:g}", m, "CE (both windows)"),
            (m, f"SCE {a:g}", m, "CE")]


def far_context_methods(cfg: AblationConfig) -> list[str]:
    """The methods whose far-context question is answered against the same-cost control: the
    ablation method, then ``control_methods``."""
    return list(dict.fromkeys([cfg.method, *cfg.control_methods]))


def far_context_pairs(cfg: AblationConfig) -> list[Pair]:
    """Per method of ``far_context_methods``: CE + alpha SCE against the same-cost control (CE
    on both windows), then against CE-only."""
    a = cfg.alpha
    return [(m, f"SCE {a:g}", m, base) for m in far_context_methods(cfg)
            for base in ("CE (both windows)", "CE")]


def compute_arms(cfg: AblationConfig) -> list[tuple[str, float]]:
    """The two-window arms (divergence, alpha) item 5 meets with CE-only at more steps: SCE at
    ``alpha``, Jeffreys at ``robust_jeffreys_alpha``, then every arm of item 1 where it is run."""
    found = [("sce", cfg.alpha), ("jeffreys", cfg.robust_jeffreys_alpha)]
    if "divergence" in cfg.items:
        found += arms(cfg)
    return list(dict.fromkeys(found))


def compute_pairs(cfg: AblationConfig) -> list[Pair]:
    """The paper's equal compute first (CE + alpha SCE at its fraction of CE's steps against
    CE-only at each budget: ``AblationConfig.paper_compute_steps``), then every arm of
    ``compute_arms`` against CE-only with more steps (``compute_steps``: the review's reading),
    and SCE against CE-only."""
    m, a = cfg.method, cfg.alpha
    return [(m, f"SCE {a:g}, {reg} steps", m, f"CE, {n} steps")
            for n, reg in cfg.paper_compute_steps()] + \
        [(m, f"{DIVERGENCE_LABELS[d]} {alpha:g}", m, f"CE, {n} steps")
         for d, alpha in compute_arms(cfg) for n in cfg.compute_steps] + \
        [(m, f"SCE {a:g}", m, "CE")]


def step_time_ratio(runs: pd.DataFrame, method: str, setting: str, baseline: str
                    ) -> tuple[float, float, float, int]:
    """The measured time per training step of ``setting`` over ``baseline``'s (both runs of
    ``method``): each run's training wall time over its steps (``train_wall_s``, from its
    ``train_summary.json``, and ``steps``), the ratio paired by base model and seed: its mean,
    lowest, highest and the pairs (NaN and 0 without one). A measurement of the machine the
    runs ran on, beside the claims, never in a run's identity; a run resumed from a
    checkpoint times its last segment only."""
    if "train_wall_s" not in runs or runs.empty:
        return math.nan, math.nan, math.nan, 0
    keys = ["base_seed", "seed"] if "base_seed" in runs else ["seed"]
    own = runs[runs["method"] == method]
    per_step = (own["train_wall_s"].astype(float) / own["steps"].astype(float)).rename("s")
    timed = own[keys + ["setting"]].join(per_step)

    def arm(label: str) -> pd.Series:
        return timed[timed["setting"] == label].set_index(keys)["s"]

    ratio = (arm(setting) / arm(baseline)).dropna()
    if ratio.empty:
        return math.nan, math.nan, math.nan, 0
    return float(ratio.mean()), float(ratio.min()), float(ratio.max()), len(ratio)


def paper_compute_table(runs: pd.DataFrame, cfg: AblationConfig) -> pd.DataFrame:
    """The paper's equal compute, one row per budget: CE-only steps, the regularized run's
    (``paper_compute_steps``) and the fraction they come from, and the two arms' measured time
    per step (``step_time_ratio``, over every base model's runs)."""
    rows = []
    for (n, reg), fraction in zip(cfg.paper_compute_steps(), cfg.paper_compute_fractions):
        mean, low, high, pairs = step_time_ratio(runs, cfg.method, f"SCE {cfg.alpha:g}, {reg} "
                                                 "steps", f"CE, {n} steps")
        rows.append({"ce_steps": n, "regularized_steps": reg, "fraction": fraction,
                     "time_ratio": mean, "time_ratio_low": low, "time_ratio_high": high,
                     "pairs": pairs})
    return pd.DataFrame(rows)


def equal_compute_steps(steps: int, l_train: int) -> dict[str, float]:
    """CE-only steps that cost what ``steps`` regularized steps cost, by what is counted (never
    by a timing, which depends on the machine and its load): equal sequences (the same
    steps), equal distinct tokens (``l_train + E[l_extra]`` per sequence, setting 1), and
    equal forward and backward tokens (a regularized step runs windows A and B, ``l_train``
    tokens each, forward and backward: twice a CE step on window A)."""
    mean_extra = (1 + l_train // 2) / 2
    return {"equal sequences": float(steps),
            "equal distinct tokens": steps * (l_train + mean_extra) / l_train,
            "equal forward and backward tokens": 2.0 * steps}


def parts_pairs(cfg: AblationConfig) -> list[Pair]:
    m, a = cfg.method, f"SCE {cfg.alpha:g}"
    return [("none", a, "none", "CE (both windows)"), ("none", a, "none", "CE"),
            (m, "CE", "none", a), (m, a, m, "CE")]


# ---------------------------------------------------------------------------------------------
# the core comparisons on every base model


def core_pairs(cfg: AblationConfig) -> list[tuple[str, str]]:
    """The core comparisons run on every base model (``base_seeds``): (changed, baseline)
    settings of ``cfg.method``, the same-cost control first."""
    sce, jeff = f"SCE {cfg.alpha:g}", f"Jeffreys {cfg.robust_jeffreys_alpha:g}"
    both = "CE (both windows)"
    return [(sce, both), (jeff, both), (sce, "CE"), (jeff, "CE"), (both, "CE")]


def base_effects(runs: pd.DataFrame, cfg: AblationConfig, columns: list[str]) -> pd.DataFrame:
    """The core comparisons over every base model: per (changed, baseline, column), the
    paired differences by (base model, seed), the mean of the base models' means, each base
    model's mean, and the t interval over those means (``stats.nested_t_interval``: seeds
    nested in base models, bases - 1 degrees of freedom), so the variance between
    independently pretrained base models is inside the interval; a percentile bootstrap over
    two or three base models would be far narrower than 95 %. NaN with one base model."""
    m = runs[runs["method"] == cfg.method]
    rows = []
    for changed, baseline in core_pairs(cfg):
        a = m[m["setting"] == changed].set_index(["base_seed", "seed"])
        b = m[m["setting"] == baseline].set_index(["base_seed", "seed"])
        for col in columns:
            p = stats.paired_by_base(a[col], b[col])
            mean, low, high = p.nested
            rows.append({"setting": changed, "baseline": baseline, "column": col,
                         "delta": mean, "low": low, "high": high,
                         "bases": p.bases, "pairs": len(p.diff),
                         "per_base": ", ".join(f"base {k}: {v:+.3g}"
                                               for k, v in p.per_base.items())})
    return pd.DataFrame(rows)
