"""Section 5.3: the ablations (notebook ``04_ablations``), from the ablation runs' table
(``lsa.runtable.collect_runs(pipe, runs_of(pipe).ablation)``).

Every comparison is paired by seed: runs of one seed draw each step's batch and ``l_extra``
from ``(seed, step)`` alone, so runs of the same l_extra setting train on the same sequences;
item 3's settings draw other ``l_extra`` values and therefore other windows (the same
generator, other draws: paired by seed, not by batch). The effect of a setting is the mean
over seeds of (run with the setting) - (its baseline run), with the 95 % Student t interval of
that mean (``lsa.stats.paired_interval``). The judged quantity is the per-token NLL at the
longest evaluation window (``longest_column``: 4x the training window in ``mini``), lower is
better; its perplexity is shown beside (an interval on raw perplexity breaks down when one
seed explodes).

Two kinds of claims (``Claim.kind``): the **paper's** (agrees / disagrees / inconclusive,
against the direction the paper states) and the project's **controls** (helps / hurts /
unclear; for the metric and its parts: lowers / raises / unclear). ``Claims`` makes each
distinct comparison once, whichever item asks for it first; the same-cost control (CE on both
windows) comes first for every two-window arm.

Items (``AblationConfig.items``): ``divergence`` (is it the alignment or the sharpening?),
``alpha_sweep`` (Table 4), ``l_extra`` (Table 5), ``exposure`` (CE on both windows),
``compute`` (equal compute), ``parts`` (each part alone). An item a profile does not run gives
one claim whose verdict is "not run".
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from lsa import stats
from lsa.claims import Claim, fmt, paper
from lsa.config import AblationConfig
from lsa.runtable import DIVERGENCE_LABELS, window_columns
from lsa.stats import HELPS, MOVES, control_outcome, resolution_text, resolve_verdict

SECTION = "Sec. 5.3"
ITEMS = {
    "divergence": "1. Alignment or sharpening",
    "alpha_sweep": "2. The alpha sweep (Table 4)",
    "l_extra": "3. The l_extra range (Table 5)",
    "exposure": "4. The longer-exposure control",
    "compute": "5. Equal compute",
    "parts": "6. Each part alone",
}


def longest_column(runs: pd.DataFrame, kind: str = "nll") -> str:
    """``nll_Mx`` (or ``ppl_Mx``) of the largest multiple M present."""
    return f"{kind}_{window_columns(runs)[-1][4:]}"


def with_entropy(runs: pd.DataFrame) -> pd.DataFrame:
    """``mean_entropy``: the final model's mean next-token entropy, (H(p) + H(q)) / 2 over the
    metric's positions."""
    return runs.assign(mean_entropy=runs["entropy"] / 2) if "entropy" in runs else runs


def summary(runs: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """Mean, standard deviation and count over seeds per (method, setting)."""
    agg = runs.groupby(["method", "setting"], sort=False)[columns].agg(["mean", "std", "count"])
    agg.columns = [f"{c}_{s}" for c, s in agg.columns]
    return agg.reset_index()


def effects(runs: pd.DataFrame, pairs: list[tuple[str, str, str, str]], columns: list[str]
            ) -> pd.DataFrame:
    """Per (method, setting, baseline method, baseline setting) in ``pairs`` and column: the
    paired difference over seeds with its 95 % t interval (``delta``, ``low``, ``high``,
    ``seeds``), beside both means."""
    rows = []
    for method, setting, base_method, base_setting in pairs:
        changed = runs[(runs["method"] == method) & (runs["setting"] == setting)]
        base = runs[(runs["method"] == base_method) & (runs["setting"] == base_setting)]
        changed, base = changed.set_index("seed"), base.set_index("seed")
        seeds = changed.index.intersection(base.index)
        for col in columns:
            ci = stats.paired_interval(changed.loc[seeds, col].to_numpy(float),
                                       base.loc[seeds, col].to_numpy(float))
            rows.append({"method": method, "setting": setting,
                         "baseline": f"{base_method} {base_setting}", "column": col,
                         "baseline_mean": float(base.loc[seeds, col].mean()) if len(seeds)
                         else math.nan,
                         "changed_mean": float(changed.loc[seeds, col].mean()) if len(seeds)
                         else math.nan,
                         "delta": ci.mean, "low": ci.low, "high": ci.high, "seeds": ci.n})
    return pd.DataFrame(rows)


def _effect_text(row: Any, ppl: Any = None) -> str:
    interval = (f"[{row.low:+.3g}, {row.high:+.3g}]" if row.seeds > 1 and math.isfinite(row.low)
                else "(one seed: no interval)")
    kind = row.column.split("_")[0]
    unit = kind.upper() if kind in ("nll", "ppl") else row.column
    text = (f"{unit} {fmt(row.baseline_mean, 4)} -> {fmt(row.changed_mean, 4)}, paired diff "
            f"{row.delta:+.3g} {interval}, {row.seeds} seeds")
    if ppl is not None:
        text += f" (PPL {fmt(ppl.baseline_mean, 4)} -> {fmt(ppl.changed_mean, 4)})"
    return text


def _row(eff: pd.DataFrame, method: str, setting: str, baseline: str, column: str):
    sel = eff[(eff["method"] == method) & (eff["setting"] == setting)
              & (eff["baseline"] == baseline) & (eff["column"] == column)]
    return None if sel.empty else sel.iloc[0]


def _claim(cid: str, claim: str, paper_text: str, grade: str, eff: pd.DataFrame,
           method: str, setting: str, baseline: str, column: str, paper_sign: int,
           evidence: str = "", kind: str = "paper", words: tuple[str, str, str] = HELPS
           ) -> Claim:
    """One comparison as a claim: the paper's (``kind`` paper: its verdict from the interval
    against the paper's sign) or the project's control (its outcome ``words``). ``column`` is
    judged (an ``nll_Mx`` column: per-token NLL); its perplexity column is shown beside."""
    row = _row(eff, method, setting, baseline, column)
    if row is None or row.seeds == 0:
        return Claim(cid, SECTION, claim, paper_text, grade, "no finished runs",  # type: ignore
                     "not run", evidence, kind=kind, method=method)  # type: ignore[arg-type]
    ppl = (_row(eff, method, setting, baseline, "ppl_" + column[4:])
           if column.startswith("nll_") else None)
    verdict = (resolve_verdict(row.low, row.high, paper_sign, None, row.seeds)
               if kind == "paper" else control_outcome(row.low, row.high, row.seeds, words))
    if kind == "paper":
        evidence = f"{evidence}; {resolution_text(row.low, row.high, None)}".strip("; ")
    return Claim(cid, SECTION, claim, paper_text, grade, _effect_text(row, ppl),  # type: ignore
                 verdict, f"{column}; {evidence}".strip("; "), kind=kind,  # type: ignore
                 method=method)


class Claims:
    """An item's claims, one per distinct comparison: a comparison (changed run, baseline,
    column) another item already made is not made again (its id is recorded in ``seen``).
    ``section5``: the (method, alpha) of CE + alpha SCE against CE-only that Section 5 (notebook
    03, Tables 2-3) already claims as the paper's; here the same comparison is a control (a
    check with this section's seeds and the NLL), so the paper's claim is counted once."""

    def __init__(self, section5: set[tuple[str, float]] | None = None) -> None:
        self.claims: list[Claim] = []
        self.seen: dict[tuple[str, str, str, str], str] = {}
        self.section5 = {(m, round(a, 6)) for m, a in (section5 or set())}

    def in_section5(self, method: str, div: str, alpha: float) -> bool:
        return div == "sce" and (method, round(alpha, 6)) in self.section5

    def add(self, cid: str, claim: str, paper_text: str, grade: str, eff: pd.DataFrame,
            method: str, setting: str, baseline: str, column: str, paper_sign: int = -1,
            evidence: str = "", kind: str = "paper", words: tuple[str, str, str] = HELPS
            ) -> None:
        key = (method, setting, baseline, column)
        if key in self.seen:
            return
        self.seen[key] = cid
        self.claims.append(_claim(cid, claim, paper_text, grade, eff, method, setting,
                                  baseline, column, paper_sign, evidence, kind, words))


def not_run(item: str) -> dict[str, Any]:
    return Claim(f"A{list(ITEMS).index(item) + 1}.0", SECTION, ITEMS[item], "-", "?",
                 "not run in this profile (mini-full runs every item)", "not run").to_dict()


def sce_paper(alpha: float) -> tuple[str, str, int] | None:
    """The paper's direction for CE + alpha SCE against CE-only, where it states one: alpha 0.1
    lowers (Tables 2-3), alpha 1 raises (Table 4); None elsewhere."""
    if math.isclose(alpha, 0.1):
        ref = paper("table3/longqlora/a0.1/ppl")
        return "lower (Tables 2-3, alpha 0.1)", ref.grade, -1
    if math.isclose(alpha, 1.0):
        ref = paper("table4/alpha1.0/ppl")
        return f"higher (Table 4: PPL 6.12 -> {ref.value} at alpha 1, CLEX)", ref.grade, +1
    return None


#: the evidence of a comparison Section 5 already claims as the paper's
SECTION5_NOTE = ("the same comparison as Section 5's claim for this method (notebook 03, 2x "
                 "and 4x perplexity), counted there as the paper's; here a check with this "
                 "section's seeds")


def _arm_claim(out: Claims, cid: str, eff: pd.DataFrame, method: str, div: str, alpha: float,
               baseline: str, column: str, evidence: str) -> None:
    """CE + alpha D against ``baseline``: the paper's claim for SCE at an alpha the paper
    states a direction for, against CE-only; the project's control otherwise."""
    label = f"{DIVERGENCE_LABELS[div]} {alpha:g}"
    stated = sce_paper(alpha) if div == "sce" and baseline == f"{method} CE" else None
    if stated and out.in_section5(method, div, alpha):
        out.add(cid, f"CE + {alpha:g} x SCE against {baseline} (longest-window NLL; the paper's "
                f"claim is Section 5's, Tables 2-3)", "-", "?", eff, method, label, baseline,
                column, evidence=f"{evidence}; {SECTION5_NOTE}", kind="control")
    elif stated:
        text, grade, sign = stated
        word = "lowers" if sign < 0 else "raises"
        out.add(cid, f"CE + {alpha:g} x SCE {word} the longest-window NLL ({method})", text,
                grade, eff, method, label, baseline, column, sign, evidence)
    else:
        out.add(cid, f"CE + {alpha:g} x {DIVERGENCE_LABELS[div]} against {baseline} "
                f"(longest-window NLL)", "-", "?", eff, method, label, baseline, column,
                evidence=evidence, kind="control")


# ---------------------------------------------------------------------------------------------
# the items: (pairs compared, claims)


def _arms(cfg: AblationConfig) -> list[tuple[str, float]]:
    return [(d, a) for d, alphas in (("sce", cfg.sce_alphas), ("jeffreys", cfg.jeffreys_alphas),
                                     ("entropy", cfg.entropy_alphas)) for a in alphas]


def divergence_pairs(cfg: AblationConfig) -> list[tuple[str, str, str, str]]:
    """Every arm against CE-only and, where the exposure or compute item runs it, against the
    same-cost control (CE on both windows: the same two windows forward and backward)."""
    m = cfg.method
    fair = "exposure" in cfg.items
    return [(m, f"{DIVERGENCE_LABELS[d]} {a:g}", m, base) for d, a in _arms(cfg)
            for base in ((["CE (both windows)"] if fair else []) + ["CE"])]


#: what each arm does to the paper's metric and its parts (controls: "lowers" / "raises")
METRIC_COLUMNS = ("misalignment", "jeffreys", "mean_entropy")


#: the copy probes' NLL at 1x and 2x l_train (``far_columns``)
FAR_COLUMNS = ("nll_copy_1x", "nll_copy_2x")


def far_columns(runs: pd.DataFrame) -> list[str]:
    """The copy probes' NLL at 1x and 2x ``l_train`` (``nll_copy_Mx``, ``lsa.runtable``): a
    span whose earlier occurrence lies in the far half of the window, so only the far context
    predicts it. At 1x that context is inside the training window: a regularizer that pulls
    the long window's predictions towards the short window's (which lacks it) may teach the
    model to ignore it, and this copy NLL rises."""
    return [c for c in FAR_COLUMNS if c in runs.columns]


def divergence_claims(out: Claims, eff: pd.DataFrame, cfg: AblationConfig, column: str) -> None:
    m, fair = cfg.method, "exposure" in cfg.items
    i = 0
    for d, a in _arms(cfg):  # the fair comparison first: the same-cost control
        label = f"{DIVERGENCE_LABELS[d]} {a:g}"
        if fair:
            i += 1
            _arm_claim(out, f"A1.{i}", eff, m, d, a, f"{m} CE (both windows)", column,
                       "same cost: both windows forward and backward, no divergence")
        i += 1
        _arm_claim(out, f"A1.{i}", eff, m, d, a, f"{m} CE", column,
                   "vs CE-only on window A (half the forward and backward tokens)")
        for metric in METRIC_COLUMNS:
            i += 1
            again = metric == "misalignment" and out.in_section5(m, d, a)
            out.add(f"A1.{i}", f"CE + {a:g} x {DIVERGENCE_LABELS[d]}: its effect on "
                    f"{metric} ({m})", "-", "?", eff, m, label, f"{m} CE", metric,
                    evidence="vs CE-only; the metric on the test books" + (
                        "; " + SECTION5_NOTE.replace("2x and 4x perplexity", "misalignment")
                        if again else ""), kind="control", words=MOVES)
    j = 0  # after every other claim of the item, so their ids do not depend on these
    for d, a in _arms(cfg):
        for far in [c for c in FAR_COLUMNS if c in set(eff["column"])]:
            j += 1
            out.add(f"A1.F{j}", f"CE + {a:g} x {DIVERGENCE_LABELS[d]}: its effect on the "
                    f"copy NLL at {far[9:]} l_train (use of far context; {m})", "-", "?", eff,
                    m, f"{DIVERGENCE_LABELS[d]} {a:g}", f"{m} CE", far,
                    evidence="vs CE-only; copy probes: the copied span's earlier occurrence "
                    "in the far half of the window", kind="control", words=MOVES)


def sweep_pairs(cfg: AblationConfig) -> list[tuple[str, str, str, str]]:
    """Every swept alpha against the method's same-cost control (CE on both windows, which
    the sweep runs for each of its methods) and against CE-only."""
    return [(method, f"SCE {a:g}", method, base) for method in cfg.sweep_methods
            for a in cfg.sweep_alphas if a > 0 for base in ("CE (both windows)", "CE")]


def sweep_claims(out: Claims, runs: pd.DataFrame, eff: pd.DataFrame, cfg: AblationConfig,
                 column: str) -> None:
    i = 0
    for method in cfg.sweep_methods:
        for a in (a for a in cfg.sweep_alphas if a > 0):
            i += 1  # the same-cost control first, as in item 1
            _arm_claim(out, f"A2.{i}", eff, method, "sce", a, f"{method} CE (both windows)",
                       column, "same cost: both windows forward and backward, no divergence")
            i += 1
            _arm_claim(out, f"A2.{i}", eff, method, "sce", a, f"{method} CE", column,
                       "vs CE-only")
        if {0.1, 0.3} <= set(cfg.sweep_alphas):
            i += 1
            p1, p3 = paper("table4/alpha0.1/longbench"), paper("table4/alpha0.3/longbench")
            pair = effects(runs, [(method, "SCE 0.3", method, "SCE 0.1")],
                           [column, "ppl_" + column[4:]])
            out.add(f"A2.{i}", f"alpha = 0.3 beats alpha = 0.1 ({method})",
                    f"LongBench-E {p1.value} -> {p3.value}", p3.grade, pair, method,
                    "SCE 0.3", f"{method} SCE 0.1", column, -1,
                    "paired by seed; the paper's best alpha")


def l_extra_arms(cfg: AblationConfig) -> list[tuple[str, float]]:
    """Item 3's regularizers, fixed in ``config/`` before the run: SCE at ``l_extra_alphas``
    and Jeffreys at ``l_extra_jeffreys_alphas``."""
    return ([("sce", a) for a in cfg.l_extra_alphas]
            + [("jeffreys", a) for a in cfg.l_extra_jeffreys_alphas])


def l_extra_pairs(cfg: AblationConfig) -> list[tuple[str, str, str, str]]:
    m = cfg.method
    return [(m, f"{DIVERGENCE_LABELS[d]} {a:g}, l_extra {x}", m, f"{DIVERGENCE_LABELS[d]} {a:g}")
            for d, a in l_extra_arms(cfg) for x in cfg.l_extra_settings if x != 1]


def l_extra_claims(out: Claims, eff: pd.DataFrame, cfg: AblationConfig, column: str) -> None:
    m = cfg.method
    ref = paper("table5/lextra_setting4/longbench")
    base = paper("table5/lextra_setting1/longbench")
    i = 0
    for d, a in l_extra_arms(cfg):
        label = f"{DIVERGENCE_LABELS[d]} {a:g}"
        for x in (x for x in cfg.l_extra_settings if x != 1):
            i += 1
            what = f"l_extra setting {x} against setting 1 ({label}, {m})"
            if x == 4 and d == "sce" and math.isclose(a, 0.1):
                out.add(f"A3.{i}", f"l_extra setting 4 (U[1, l]) is worse than setting 1 "
                        f"(U[1, l/2]) ({label}, {m})",
                        f"LongBench-E {base.value} -> {ref.value} (LongQLoRA)", ref.grade,
                        eff, m, f"{label}, l_extra 4", f"{m} {label}", column, +1,
                        "paired by seed")
            else:
                out.add(f"A3.{i}", what, "-", "?", eff, m, f"{label}, l_extra {x}",
                        f"{m} {label}", column, evidence="paired by seed", kind="control")


def exposure_pairs(cfg: AblationConfig) -> list[tuple[str, str, str, str]]:
    m, a = cfg.method, cfg.alpha
    return [(m, "CE (both windows)", m, "CE"), (m, f"SCE {a:g}", m, "CE (both windows)"),
            (m, f"SCE {a:g}", m, "CE")]


def exposure_claims(out: Claims, eff: pd.DataFrame, cfg: AblationConfig, column: str) -> None:
    m, a = cfg.method, cfg.alpha
    _arm_claim(out, "A4.1", eff, m, "sce", a, f"{m} CE (both windows)", column,
               "same l_train + l_extra sequences, same two forwards, no divergence")
    out.add("A4.2", f"Seeing the longer sequences (CE on both windows) against CE-only ({m})",
            "not tested", "?", eff, m, "CE (both windows)", f"{m} CE", column,
            evidence="vs window A alone", kind="control")
    for metric in METRIC_COLUMNS:
        out.add(f"A4.{3 + METRIC_COLUMNS.index(metric)}", f"CE on both windows: its effect on "
                f"{metric} ({m})", "-", "?", eff, m, "CE (both windows)", f"{m} CE", metric,
                evidence="vs CE-only", kind="control", words=MOVES)


def far_context_methods(cfg: AblationConfig) -> list[str]:
    """The methods whose far-context question is answered against the same-cost control: the
    ablation method, then ``control_methods``."""
    return list(dict.fromkeys([cfg.method, *cfg.control_methods]))


def far_context_pairs(cfg: AblationConfig) -> list[tuple[str, str, str, str]]:
    """Per method of ``far_context_methods``: CE + alpha SCE against the same-cost control (CE
    on both windows), then against CE-only."""
    a = cfg.alpha
    return [(m, f"SCE {a:g}", m, base) for m in far_context_methods(cfg)
            for base in ("CE (both windows)", "CE")]


def far_context_claims(out: Claims, eff: pd.DataFrame, cfg: AblationConfig) -> None:
    """Item 4's question per method: does CE + alpha SCE raise the copy NLL (use the far
    context less) against the same-cost control? The project's controls ("lowers" /
    "raises"), after every other claim of the section, so their ids do not move the others."""
    j = 0
    for m in far_context_methods(cfg):
        for far in [c for c in FAR_COLUMNS if c in set(eff["column"])]:
            j += 1
            out.add(f"A4.F{j}", f"CE + {cfg.alpha:g} x SCE against the same-cost control: its "
                    f"effect on the copy NLL at {far[9:]} l_train (use of far context; {m})",
                    "-", "?", eff, m, f"SCE {cfg.alpha:g}", f"{m} CE (both windows)", far,
                    evidence="vs CE on both windows (the same sequences and forwards, no "
                    "divergence); copy probes: the copied span's earlier occurrence in the "
                    "far half of the window", kind="control", words=MOVES)


def compute_arms(cfg: AblationConfig) -> list[tuple[str, float]]:
    """The two-window arms (divergence, alpha) item 5 meets with CE-only at more steps: SCE at
    ``alpha``, Jeffreys at ``robust_jeffreys_alpha``, then every arm of item 1 where it is run."""
    arms = [("sce", cfg.alpha), ("jeffreys", cfg.robust_jeffreys_alpha)]
    if "divergence" in cfg.items:
        arms += _arms(cfg)
    return list(dict.fromkeys(arms))


def compute_pairs(cfg: AblationConfig) -> list[tuple[str, str, str, str]]:
    """Every arm of ``compute_arms`` against CE-only with more steps (``compute_steps``), and
    SCE against CE-only."""
    m, a = cfg.method, cfg.alpha
    return [(m, f"{DIVERGENCE_LABELS[d]} {alpha:g}", m, f"CE, {n} steps")
            for d, alpha in compute_arms(cfg) for n in cfg.compute_steps] + \
        [(m, f"SCE {a:g}", m, "CE")]


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


def compute_claims(out: Claims, eff: pd.DataFrame, cfg: AblationConfig, column: str,
                   steps: int, equal_steps: float) -> None:
    m, a = cfg.method, cfg.alpha
    if not cfg.compute_steps:
        return
    nearest = min(cfg.compute_steps, key=lambda n: abs(n - equal_steps))
    ref = paper("sec5.3/compute")
    out.add("A5.1", f"At equal compute the regularized run still wins ({m})", ref.value,
            ref.grade, eff, m, f"SCE {a:g}", f"{m} CE, {nearest} steps", column, -1,
            f"{steps} regularized steps vs CE-only {nearest} steps, the run nearest to equal "
            f"counted work ({equal_steps:.0f} steps: forward and backward tokens)")
    jeff = f"Jeffreys {cfg.robust_jeffreys_alpha:g}"
    out.add("A5.2", f"CE + {cfg.robust_jeffreys_alpha:g} x Jeffreys against CE-only at equal "
            f"counted work ({m})", "-", "?", eff, m, jeff, f"{m} CE, {nearest} steps", column,
            evidence=f"{steps} steps of two windows vs CE-only {nearest} steps (the run nearest "
            f"to {equal_steps:.0f}: equal forward and backward tokens)", kind="control")
    for i, (d, alpha) in enumerate(compute_arms(cfg)[2:], start=3):  # item 1's other arms
        label = DIVERGENCE_LABELS[d]
        out.add(f"A5.{i}", f"CE + {alpha:g} x {label} against CE-only at equal counted work "
                f"({m})", "-", "?", eff, m, f"{label} {alpha:g}", f"{m} CE, {nearest} steps",
                column, evidence=f"{steps} steps of two windows vs CE-only {nearest} steps",
                kind="control")


def parts_pairs(cfg: AblationConfig) -> list[tuple[str, str, str, str]]:
    m, a = cfg.method, f"SCE {cfg.alpha:g}"
    return [("none", a, "none", "CE (both windows)"), ("none", a, "none", "CE"),
            (m, "CE", "none", a), (m, a, m, "CE")]


def parts_claims(out: Claims, eff: pd.DataFrame, cfg: AblationConfig, column: str) -> None:
    m, a = cfg.method, f"SCE {cfg.alpha:g}"
    ref = paper("sec5.3/parts")
    # the same-cost control first; its id follows the paper's three so that theirs do not move
    _arm_claim(out, "A6.4", eff, "none", "sce", cfg.alpha, "none CE (both windows)", column,
               "same cost: raw fine-tuning on both windows forward and backward, no divergence")
    out.add("A6.1", "The regularizer alone beats raw fine-tuning (no positional method)",
            ref.value, ref.grade, eff, "none", a, "none CE", column, -1,
            "method none at l_train")
    out.add("A6.2", f"The positional method alone ({m}) beats the regularizer alone", ref.value,
            ref.grade, eff, m, "CE", f"none {a}", column, -1, "paired by seed")
    out.add("A6.3", f"Combining both beats the method alone ({m})", ref.value, ref.grade, eff,
            m, a, f"{m} CE", column, -1, "paired by seed")


def core_pairs(cfg: AblationConfig) -> list[tuple[str, str]]:
    """The core comparisons run on every base model (``base_seeds``): (changed, baseline)
    settings of ``cfg.method``, the same-cost control first."""
    sce, jeff = f"SCE {cfg.alpha:g}", f"Jeffreys {cfg.robust_jeffreys_alpha:g}"
    both = "CE (both windows)"
    return [(sce, both), (jeff, both), (sce, "CE"), (jeff, "CE"), (both, "CE")]


def base_effects(runs: pd.DataFrame, cfg: AblationConfig, columns: list[str],
                 n_resamples: int = 2000) -> pd.DataFrame:
    """The core comparisons over every base model: per (changed, baseline, column), the
    paired differences by (base model, seed), their mean, each base model's mean, and a
    two-level percentile bootstrap interval (base models with replacement, then seeds within
    each drawn base model: ``stats.two_level_interval``), so the variance between
    independently pretrained base models is inside the interval. With two base models the
    interval is about as wide as they disagree; NaN with one."""
    m = runs[runs["method"] == cfg.method]
    rows = []
    for changed, baseline in core_pairs(cfg):
        a = m[m["setting"] == changed].set_index(["base_seed", "seed"])
        b = m[m["setting"] == baseline].set_index(["base_seed", "seed"])
        keys = a.index.intersection(b.index)
        for col in columns:
            diff = (a.loc[keys, col].astype(float) - b.loc[keys, col].astype(float))
            groups = [g.to_numpy() for _, g in diff.groupby(level="base_seed")]
            low, high = stats.two_level_interval(groups, n_resamples=n_resamples)
            per_base = diff.groupby(level="base_seed").mean()
            rows.append({"setting": changed, "baseline": baseline, "column": col,
                         "delta": float(diff.mean()) if len(diff) else math.nan,
                         "low": low, "high": high, "bases": len(groups), "pairs": len(diff),
                         "per_base": ", ".join(f"base {k}: {v:+.3g}"
                                               for k, v in per_base.items())})
    return pd.DataFrame(rows)


def bases_text(eff: pd.DataFrame | None, gains: dict[str, str] | None = None) -> str:
    """The core comparisons across base models in words: whether each base model's paired
    effect has the same sign, and the two-level interval's outcome; ``gains``: each base
    model's far-copy gain at its window (G1's number: does it copy at all?)."""
    if eff is None or eff.empty:
        return ("One base model (ablation.base_seeds is empty in this profile): every effect "
                "above varies the fine-tuning seed only, not the pretrained model.")
    lines = []
    if gains:
        lines.append("Each base model's far-copy gain at its own window (G1's measure; the "
                     "comparisons below mean little on a base model that does not copy): "
                     + "; ".join(f"{k}: {v}" for k, v in gains.items()) + ".\n")
    for row in eff.itertuples():
        word = control_outcome(row.low, row.high, row.bases)
        signs = {v.split(": ")[1][0] for v in row.per_base.split(", ")} if row.per_base else set()
        agree = ("not run" if row.pairs == 0 else "one base model only" if row.bases < 2
                 else "the same sign on every base model" if len(signs) == 1
                 else "opposite signs between base models")
        lines.append(f"- **{row.setting} vs {row.baseline}**, {row.column}: {row.delta:+.3g} "
                     f"[{row.low:+.3g}, {row.high:+.3g}] over {row.bases} base models x seeds "
                     f"({row.pairs} pairs; {row.per_base}): {word}, {agree}.")
    return ("Paired by (base model, seed); the interval is a two-level bootstrap (base models, "
            "then seeds within each), so it holds the variance between independently "
            "pretrained base models:\n\n" + "\n".join(lines))


def multiplicity_text(claims: list[dict[str, Any]]) -> str:
    """How many interval tests the section makes and how many would come out clear by chance."""
    tested = [c for c in claims if c["verdict"] not in ("not run",)]
    paper_n = sum(c.get("kind", "paper") == "paper" for c in tested)
    clear = sum(c["verdict"] in ("agrees", "disagrees", "helps", "hurts", "lowers", "raises")
                for c in tested)
    return (f"{len(tested)} comparisons tested ({paper_n} of the paper's claims, "
            f"{len(tested) - paper_n} controls), {clear} clear of 0. With 95 % intervals and no "
            f"true effect anywhere, about {0.05 * len(tested):.1f} would be clear by chance "
            "alone; the comparisons share runs (one CE baseline per seed), so they are not "
            "independent either. Read a single clear result with that in mind.")


def far_context_by_method(eff: pd.DataFrame | None) -> str:
    """The far-context question per method (``far_context_pairs``' effects): CE + alpha SCE
    against the same-cost control on the copy NLL at l_train, in words, with its interval;
    "" without effects."""
    if eff is None or eff.empty:
        return ""
    sel = eff[(eff["column"] == "nll_copy_1x") & eff["baseline"].str.endswith("(both windows)")]
    if sel.empty:
        return ""
    lines, up = [], []
    for row in sel.itertuples():
        word = control_outcome(row.low, row.high, row.seeds, MOVES)
        up += [row.method] if word == "raises" else []
        lines.append(f"- **{row.method}**: {row.setting} against CE on both windows: {word} "
                     f"({_effect_text(row)})")
    answer = (f"Against the same-cost control, {row.setting} raises the copy NLL at l_train for "
              f"{', '.join(up)}: there it teaches the model to use the far context less."
              if up else f"Against the same-cost control, {row.setting} raises the copy NLL "
              "at l_train for no method beyond the paired seed noise.")
    return ("Per method, against the same-cost control (copy NLL at l_train; mean paired "
            "difference over seeds, 95 % t interval):\n\n" + "\n".join(lines) + "\n\n"
            + answer)


def far_context_text(eff: pd.DataFrame | None, by_method: pd.DataFrame | None = None) -> str:
    """Does a regularizer teach the model to ignore far context? Per arm, its paired effect on
    the copy NLL (``far_columns``) against CE-only and the same-cost control, in words; then
    whether Jeffreys (alignment alone) and SCE differ there; then, with ``by_method``
    (``far_context_pairs``' effects), the question per method (``far_context_by_method``)."""
    per_method = far_context_by_method(by_method)
    text = _far_context_arms(eff)
    return f"{text}\n\n{per_method}" if per_method else text


def _far_context_arms(eff: pd.DataFrame | None) -> str:
    sel = (eff[eff["column"].isin(FAR_COLUMNS)] if eff is not None
           else pd.DataFrame())
    judged = sel[(sel["column"] == "nll_copy_1x") & (sel["seeds"] >= 2)] if len(sel) else sel
    if judged.empty:
        return ("No copy probes at l_train in these runs' metrics with two or more seeds (or "
                "item 1 not run): the question is not answered here.")
    lines, raised = [], {}
    for setting in dict.fromkeys(sel["setting"]):
        parts = []
        for row in sel[sel["setting"] == setting].itertuples():
            word = control_outcome(row.low, row.high, row.seeds, MOVES)
            if row.baseline.endswith(" CE") and row.column == "nll_copy_1x":
                raised[setting] = word
            parts.append(f"{row.column} against {row.baseline}: {word} ({_effect_text(row)})")
        lines.append(f"- **{setting}**: " + "; ".join(parts) + ".")
    by_kind: dict[str, set[str]] = {}
    for setting, word in raised.items():
        by_kind.setdefault(setting.split(" ")[0], set()).add(word)
    up = [s for s, w in raised.items() if w == "raises"]
    if up:
        answer = (f"At l_train, where the far text lies inside the training window, "
                  f"{', '.join(up)} raise the copy NLL against CE-only: the model uses the far "
                  "context less.")
    else:
        answer = ("No arm raises the copy NLL at l_train against CE-only beyond the paired seed "
                  "noise: at this scale no regularizer measurably teaches the model to ignore "
                  "the far context.")
    if "SCE" in by_kind and "Jeffreys" in by_kind:
        same = by_kind["SCE"] == by_kind["Jeffreys"]
        answer += (" Jeffreys and SCE " + ("behave alike there" if same else "differ there")
                   + f" (SCE: {', '.join(sorted(by_kind['SCE']))}; Jeffreys: "
                   f"{', '.join(sorted(by_kind['Jeffreys']))}).")
    return ("Copy NLL (lower: the far occurrence is used), mean paired difference over seeds "
            "with its 95 % t interval:\n\n" + "\n".join(lines) + "\n\n" + answer)


def closing_text(eff: pd.DataFrame | None, column: str) -> str:
    """What item 1 supports, in words computed from its paired effects (None: not run): for
    each arm, first against the same-cost control (CE on both windows) where it ran, then
    against CE-only, then what it does to the paper's metric; and whether alignment alone
    (Jeffreys) helps against the fair control."""
    sel = eff[eff["column"] == column] if eff is not None else pd.DataFrame()
    if sel.empty:
        return "Item 1 was not run in this profile: nothing to conclude."
    lines, fair_words = [], {}
    for setting in dict.fromkeys(sel["setting"]):
        rows = sel[sel["setting"] == setting]
        parts = []
        for row in sorted(rows.itertuples(), key=lambda r: "both" not in r.baseline):
            word = control_outcome(row.low, row.high, row.seeds)
            if "both" in row.baseline:
                fair_words[setting] = word
            parts.append(f"against {row.baseline}: {word} ({_effect_text(row)})")
        metric = _row(eff, rows.iloc[0]["method"], setting, rows.iloc[0]["method"] + " CE",
                      "misalignment")
        if metric is not None:
            moved = control_outcome(metric.low, metric.high, metric.seeds, MOVES)
            note = ""
            if moved != "lowers" and any(control_outcome(r.low, r.high, r.seeds) == "helps"
                                         for r in rows.itertuples()):
                note = " — it helps without lowering the paper's metric"
            parts.append(f"L_misalign {moved} ({metric.delta:+.3g} [{metric.low:+.3g}, "
                         f"{metric.high:+.3g}]){note}")
        lines.append(f"- **{setting}**: " + "; ".join(parts) + ".")
    jeff = [s for s in fair_words if s.startswith("Jeffreys")]
    if not fair_words:
        answer = ("The same-cost control (CE on both windows) was not run: every effect above "
                  "is against a baseline with half the forward and backward tokens.")
    elif not jeff:
        answer = "Jeffreys was not run: the question stays open here."
    elif any(fair_words[s] == "helps" for s in jeff):
        answer = (f"Against the same-cost control, alignment without sharpening helps here: "
                  f"{', '.join(s for s in jeff if fair_words[s] == 'helps')}.")
    elif any(fair_words[s] == "hurts" for s in jeff):
        answer = (f"Against the same-cost control, alignment without sharpening hurts here: "
                  f"{', '.join(s for s in jeff if fair_words[s] == 'hurts')}.")
    else:
        answer = ("Against the same-cost control, alignment without sharpening does not move "
                  f"the {column} beyond the paired seed noise at this scale.")
    return (f"Effect on {column} (mean paired difference over seeds, 95 % t interval), the "
            "same-cost control first:\n\n" + "\n".join(lines) + "\n\n" + answer)
