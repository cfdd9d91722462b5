"""Section 5.3: the ablations (notebook ``04_ablations``), from the ablation runs' table
(``lsa.analysis.collect_runs(pipe, runs_of(pipe).ablation)``).

Every comparison is paired by seed (same data order, same ``l_extra`` draws): the effect of a
setting is the mean over seeds of (run with the setting) - (its baseline run), with the 95 %
Student t interval of that mean (``lsa.stats.paired_interval``); a verdict is given only when
the interval excludes 0. The judged quantity is the perplexity at the longest evaluation
window (``longest_column``: 4x the training window in ``mini``), lower is better.

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
from lsa.analysis import DIVERGENCE_LABELS
from lsa.config import AblationConfig
from lsa.report import Claim, fmt, paper
from lsa.stats import sign_verdict

SECTION = "Sec. 5.3"
ITEMS = {
    "divergence": "1. Alignment or sharpening",
    "alpha_sweep": "2. The alpha sweep (Table 4)",
    "l_extra": "3. The l_extra range (Table 5)",
    "exposure": "4. The longer-exposure control",
    "compute": "5. Equal compute",
    "parts": "6. Each part alone",
}


def longest_column(runs: pd.DataFrame) -> str:
    """``ppl_Mx`` of the largest multiple M present."""
    mults = [int(c[4:-1]) for c in runs.columns if c.startswith("ppl_") and c[4:-1].isdigit()]
    return f"ppl_{max(mults)}x"


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


def _effect_text(row: Any, unit: str = "PPL") -> str:
    interval = (f"[{row.low:+.3g}, {row.high:+.3g}]" if row.seeds > 1 and math.isfinite(row.low)
                else "(one seed: no interval)")
    return (f"{unit} {fmt(row.baseline_mean, 4)} -> {fmt(row.changed_mean, 4)}, "
            f"paired diff {row.delta:+.3g} {interval}, {row.seeds} seeds")


def _claim(cid: str, claim: str, paper_text: str, grade: str, eff: pd.DataFrame,
           method: str, setting: str, baseline: str, column: str, paper_sign: int,
           evidence: str = "") -> Claim:
    sel = eff[(eff["method"] == method) & (eff["setting"] == setting)
              & (eff["baseline"] == baseline) & (eff["column"] == column)]
    if sel.empty or sel.iloc[0].seeds == 0:
        return Claim(cid, SECTION, claim, paper_text, grade, "no finished runs",  # type: ignore
                     "not run", evidence)
    row = sel.iloc[0]
    return Claim(cid, SECTION, claim, paper_text, grade, _effect_text(row),  # type: ignore
                 sign_verdict(row.low, row.high, paper_sign, row.seeds),  # type: ignore[arg-type]
                 f"{column}; {evidence}".strip("; "))


def not_run(item: str) -> dict[str, Any]:
    return Claim(f"A{list(ITEMS).index(item) + 1}.0", SECTION, ITEMS[item], "-", "?",
                 "not run in this profile (mini-full runs every item)", "not run").to_dict()


# ---------------------------------------------------------------------------------------------
# the items: (pairs compared, claims)


def divergence_pairs(cfg: AblationConfig) -> list[tuple[str, str, str, str]]:
    m = cfg.method
    return [(m, f"{DIVERGENCE_LABELS[d]} {a:g}", m, "CE")
            for d, alphas in (("sce", cfg.sce_alphas), ("jeffreys", cfg.jeffreys_alphas),
                              ("entropy", cfg.entropy_alphas)) for a in alphas]


def divergence_claims(eff: pd.DataFrame, cfg: AblationConfig, column: str) -> list[Claim]:
    out, m = [], cfg.method
    sce = paper("table3/longqlora/a0.1/ppl")
    texts = {"sce": ("lower (Tables 2-3, alpha 0.1)", sce.grade),
             "jeffreys": ("implied: the alignment is what helps", "?"),
             "entropy": ("not in the paper (control: sharpening without alignment)", "?")}
    i = 0
    for d, alphas in (("sce", cfg.sce_alphas), ("jeffreys", cfg.jeffreys_alphas),
                      ("entropy", cfg.entropy_alphas)):
        for a in alphas:
            i += 1
            label = f"{DIVERGENCE_LABELS[d]} {a:g}"
            out.append(_claim(f"A1.{i}", f"CE + {a:g} x {DIVERGENCE_LABELS[d]} lowers the "
                              f"longest-window perplexity ({m})", *texts[d], eff, m, label,
                              f"{m} CE", column, -1, "vs CE-only, paired by seed"))
    return out


def sweep_pairs(cfg: AblationConfig) -> list[tuple[str, str, str, str]]:
    return [(method, f"SCE {a:g}", method, "CE") for method in cfg.sweep_methods
            for a in cfg.sweep_alphas if a > 0]


def sweep_claims(runs: pd.DataFrame, eff: pd.DataFrame, cfg: AblationConfig, column: str
                 ) -> list[Claim]:
    out = []
    ppl1 = paper("table4/alpha1.0/ppl")
    for j, method in enumerate(cfg.sweep_methods, start=1):
        if 1.0 in cfg.sweep_alphas:
            out.append(_claim(f"A2.{2 * j - 1}", f"alpha = 1 raises the perplexity ({method})",
                              f"PPL 6.12 -> {ppl1.value} (CLEX)", ppl1.grade, eff, method,
                              "SCE 1", f"{method} CE", column, +1, "vs CE-only"))
        if {0.1, 0.3} <= set(cfg.sweep_alphas):
            p1, p3 = paper("table4/alpha0.1/longbench"), paper("table4/alpha0.3/longbench")
            pair = effects(runs, [(method, "SCE 0.3", method, "SCE 0.1")], [column])
            out.append(_claim(f"A2.{2 * j}", f"alpha = 0.3 beats alpha = 0.1 ({method})",
                              f"LongBench-E {p1.value} -> {p3.value}", p3.grade, pair, method,
                              "SCE 0.3", f"{method} SCE 0.1", column, -1,
                              "paired by seed; the paper's best alpha"))
    return out


def l_extra_pairs(cfg: AblationConfig) -> list[tuple[str, str, str, str]]:
    m = cfg.method
    return [(m, f"SCE {a:g}, l_extra {x}", m, f"SCE {a:g}") for a in cfg.l_extra_alphas
            for x in cfg.l_extra_settings if x != 1]


def l_extra_claims(eff: pd.DataFrame, cfg: AblationConfig, column: str) -> list[Claim]:
    out, m = [], cfg.method
    ref = paper("table5/lextra_setting4/longbench")
    base = paper("table5/lextra_setting1/longbench")
    for i, a in enumerate(cfg.l_extra_alphas, start=1):
        if 4 in cfg.l_extra_settings:
            out.append(_claim(f"A3.{i}", f"l_extra setting 4 (U[1, l]) is worse than setting 1 "
                              f"(U[1, l/2]) (alpha {a:g}, {m})",
                              f"LongBench-E {base.value} -> {ref.value} (LongQLoRA)", ref.grade,
                              eff, m, f"SCE {a:g}, l_extra 4", f"{m} SCE {a:g}", column, +1,
                              "paired by seed"))
    return out


def exposure_pairs(cfg: AblationConfig) -> list[tuple[str, str, str, str]]:
    m, a = cfg.method, cfg.alpha
    return [(m, "CE (both windows)", m, "CE"), (m, f"SCE {a:g}", m, "CE (both windows)"),
            (m, f"SCE {a:g}", m, "CE")]


def exposure_claims(eff: pd.DataFrame, cfg: AblationConfig, column: str) -> list[Claim]:
    m, a = cfg.method, cfg.alpha
    return [
        _claim("A4.1", f"CE + {a:g} SCE beats the longer-exposure control, CE on both windows "
               f"({m})", "not tested (reviewers' doubt 3)", "?", eff, m, f"SCE {a:g}",
               f"{m} CE (both windows)", column, -1,
               "same l_train + l_extra sequences, same two forwards, no divergence"),
        _claim("A4.2", f"Seeing the longer sequences (CE on both windows) lowers the "
               f"longest-window perplexity ({m})", "not tested", "?", eff, m,
               "CE (both windows)", f"{m} CE", column, -1, "vs window A alone")]


def compute_pairs(cfg: AblationConfig) -> list[tuple[str, str, str, str]]:
    m, a = cfg.method, cfg.alpha
    return [(m, f"SCE {a:g}", m, f"CE, {n} steps") for n in cfg.compute_steps] + \
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


def compute_claims(eff: pd.DataFrame, cfg: AblationConfig, column: str, steps: int,
                   equal_steps: float) -> list[Claim]:
    m, a = cfg.method, cfg.alpha
    if not cfg.compute_steps:
        return []
    nearest = min(cfg.compute_steps, key=lambda n: abs(n - equal_steps))
    ref = paper("sec5.3/compute")
    return [_claim("A5.1", f"At equal compute the regularized run still wins ({m})",
                   ref.value, ref.grade, eff, m,
                   f"SCE {a:g}", f"{m} CE, {nearest} steps", column, -1,
                   f"{steps} regularized steps vs CE-only {nearest} steps, the run nearest to "
                   f"equal counted work ({equal_steps:.0f} steps: forward and backward "
                   "tokens)")]


def parts_pairs(cfg: AblationConfig) -> list[tuple[str, str, str, str]]:
    m, a = cfg.method, f"SCE {cfg.alpha:g}"
    return [("none", a, "none", "CE"), (m, "CE", "none", a), (m, a, m, "CE")]


def parts_claims(eff: pd.DataFrame, cfg: AblationConfig, column: str) -> list[Claim]:
    m, a = cfg.method, f"SCE {cfg.alpha:g}"
    ref = paper("sec5.3/parts")
    return [
        _claim("A6.1", "The regularizer alone beats raw fine-tuning (no positional method)",
               ref.value, ref.grade, eff, "none", a, "none CE", column, -1,
               "method none at l_train"),
        _claim("A6.2", f"The positional method alone ({m}) beats the regularizer alone",
               ref.value, ref.grade, eff, m, "CE", f"none {a}", column, -1, "paired by seed"),
        _claim("A6.3", f"Combining both beats the method alone ({m})", ref.value, ref.grade,
               eff, m, a, f"{m} CE", column, -1, "paired by seed")]


def closing_text(eff: pd.DataFrame | None, column: str) -> str:
    """What item 1 supports, in words computed from its paired effects on ``column`` (None:
    not run): for each regularizer and alpha, the direction and whether the interval excludes
    0."""
    sel = eff[eff["column"] == column] if eff is not None else pd.DataFrame()
    if sel.empty:
        return "Item 1 was not run in this profile: nothing to conclude."
    lines = []
    for row in sel.itertuples():
        v = sign_verdict(row.low, row.high, -1, row.seeds)
        word = {"agrees": "lowers it", "disagrees": "raises it",
                "inconclusive": "does not move it beyond the seed noise"}.get(v, "was not run")
        lines.append(f"- **{row.setting}** {word}: {_effect_text(row)}.")
    jeff = sel[sel["setting"].str.startswith("Jeffreys")]
    helped = [r.setting for r in jeff.itertuples()
              if sign_verdict(r.low, r.high, -1, r.seeds) == "agrees"]
    hurt = [r.setting for r in jeff.itertuples()
            if sign_verdict(r.low, r.high, -1, r.seeds) == "disagrees"]
    if jeff.empty:
        answer = "Jeffreys was not run: the question stays open here."
    elif helped:
        answer = (f"Alignment without sharpening helps length generalization here: "
                  f"{', '.join(helped)} lower(s) the {column} beyond the paired seed noise.")
    elif hurt:
        answer = (f"Alignment without sharpening hurts here: {', '.join(hurt)} raise(s) the "
                  f"{column} beyond the paired seed noise.")
    else:
        answer = (f"Alignment without sharpening does not move the {column} beyond the paired "
                  "seed noise at this scale.")
    return (f"Effect on {column} against CE-only (mean paired difference over seeds, 95 % t "
            "interval):\n\n" + "\n".join(lines) + "\n\n" + answer)
