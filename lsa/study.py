"""The confirmatory study of the regularizer's mechanism (issue 62), as its pre-registration
(``docs/preregistration.md``) specifies it: the design's numbers, the per-base effects, the
hypotheses H1-H7 and the paper's family of three, the verdict rule, the sequential rule of H1,
the premise, the gates' replacements and the diverged runs' exclusions, and the sensitivity
analyses. Pure functions of tables (no torch, no run folder): ``lsa.runtable.read_study``
reads the runs, section 07 (``lsa.sections.study``) narrates.

The tables:

- ``runs``: one row per finished study run: ``base`` (its pretraining seed), ``method``,
  ``arm`` (a name of ``StudyConfig.arms``), ``seed`` (the fine-tuning seed), the outcomes
  (``nll4``, ``nll1``, ``copy1``: ``StudyConfig.outcomes``), ``ppl1`` (perplexity at
  ``l_train``) and ``finite`` (every loss and outcome finite);
- ``bases``: one row per planned base: ``base``, ``stage`` (1 or 2), ``complete`` (the base and
  every run of it finished), ``g1``, ``g2`` (passed: True, False, or None before its base model
  is made), ``g1_gain`` and the base model's ``base_ppl1`` and ``base_nll4`` (its probe).

A base's value of an arm is the mean over the fine-tuning seeds it has for it; an effect is an
arm's value minus its comparator's on the same base (``base_effects``); a test is a t over the
bases' effects (``estimate``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import pandas as pd

from lsa.config import BasePlan, base_plan
from lsa.stats import PREMISE_NOT_MET, paired_interval

if TYPE_CHECKING:
    from lsa.config import StudyConfig

# ---------------------------------------------------------------------------------------------
# the verdict words (section 4)

CONFIRMED: Final = "confirmed"
CONFIRMED_SMALL: Final = "confirmed, smaller than the effect of interest"
REVERSED: Final = "reversed"
NO_EFFECT: Final = "no effect of interest"
INCONCLUSIVE: Final = "inconclusive"
#: an exploratory estimate: no verdict
ESTIMATE: Final = "estimate only"
STUDY_VERDICTS = (CONFIRMED, CONFIRMED_SMALL, REVERSED, NO_EFFECT, INCONCLUSIVE,
                  PREMISE_NOT_MET, ESTIMATE)


class StudyIncomplete(ValueError):
    """The study's stage is not complete: nothing of it is analysed."""


class StudyStopped(ValueError):
    """More than ``max_failures`` of the first ``first_bases`` bases failed G1 or G2."""


def verdict(low: float, high: float, sign: int, sesoi: float, holm_p: float | None = None,
            alpha: float = 0.05) -> str:
    """Section 4's rule, in order of precedence, on an interval ``[low, high]`` of an effect
    predicted to have the sign ``sign``: it excludes 0 on the predicted side: confirmed (",
    smaller than the effect of interest" where it lies wholly within ``sesoi`` of 0); on the
    other side: reversed; a test of a family (``holm_p`` given) needs ``holm_p < alpha`` for
    either, else inconclusive; it holds 0 and lies within +-``sesoi``: no effect of interest;
    otherwise (an undefined interval too) inconclusive."""
    if sign not in (-1, 1):
        raise ValueError(f"sign = {sign}: must be -1 or +1")
    if not (math.isfinite(low) and math.isfinite(high)):
        return INCONCLUSIVE
    family_ok = holm_p is None or holm_p < alpha
    predicted = high < 0 if sign < 0 else low > 0
    other = low > 0 if sign < 0 else high < 0
    if predicted:
        if not family_ok:
            return INCONCLUSIVE
        return CONFIRMED_SMALL if -sesoi < low and high < sesoi else CONFIRMED
    if other:
        return REVERSED if family_ok else INCONCLUSIVE
    if -sesoi <= low and high <= sesoi:
        return NO_EFFECT
    return INCONCLUSIVE


def holm(pvalues: Mapping[str, float], alpha: float = 0.05) -> dict[str, float]:
    """Holm's step-down adjustment (statsmodels) of a family's p-values, by test id (a NaN
    p stays NaN and is not counted in the family)."""
    from statsmodels.stats.multitest import multipletests

    known = {k: p for k, p in pvalues.items() if math.isfinite(p)}
    out = {k: math.nan for k in pvalues}
    if known:
        adjusted = multipletests(list(known.values()), alpha=alpha, method="holm")[1]
        out.update(dict(zip(known, (float(p) for p in adjusted))))
    return out


# ---------------------------------------------------------------------------------------------
# the tests (section 3)


@dataclass(frozen=True)
class Test:
    """One test: ``method``'s ``arm`` against ``comparator`` on ``outcome`` (``growth``: the
    effect on ``nll4`` minus the effect on ``nll1``), predicted sign ``sign``; ``family``:
    ``primary``, ``secondary`` (one Holm family), ``paper`` (the family of three) or
    ``exploratory`` (an estimate); ``minus``: arms whose effects are subtracted (additivity)."""

    id: str
    family: str
    method: str
    arm: str
    comparator: str
    outcome: str
    sign: int
    text: str
    minus: tuple[str, ...] = ()


TESTS: tuple[Test, ...] = (
    Test("H1", "primary", "eabf", "jeffreys1", "ce_both", "nll4", -1,
         "on EABF, Jeffreys 1 lowers the book NLL at 4x l_train against CE on both windows"),
    Test("H2", "secondary", "eabf", "jeffreys1", "ce_both", "copy1", 1,
         "on EABF, Jeffreys 1 raises the copy NLL inside the window"),
    Test("H3", "secondary", "eabf", "jeffreys1", "ce_both", "growth", -1,
         "on EABF, Jeffreys 1's effect on the NLL at 4x is below its effect at 1x"),
    Test("H4", "secondary", "eabf", "entropy01", "ce_both", "nll4", 1,
         "on EABF, entropy 0.1 raises the book NLL at 4x"),
    Test("H5", "secondary", "yarn", "jeffreys1", "ce_both", "nll4", -1,
         "on YaRN, Jeffreys 1 lowers the book NLL at 4x"),
    Test("H6", "secondary", "pi", "jeffreys1", "ce_both", "nll4", -1,
         "on PI, Jeffreys 1 lowers the book NLL at 4x"),
    Test("H7", "secondary", "eabf", "jeffreys1_plain", "ce_both_plain", "nll4", -1,
         "on EABF fine-tuned on plain books, Jeffreys 1 lowers the book NLL at 4x"),
    Test("P.eabf", "paper", "eabf", "sce01", "ce_a", "nll1", -1,
         "on EABF, SCE 0.1 lowers the book NLL at 1x against CE (the paper's S5.eabf)"),
    Test("P.yarn", "paper", "yarn", "sce01", "ce_a", "nll1", -1,
         "on YaRN, SCE 0.1 lowers the book NLL at 1x against CE (an extension)"),
    Test("P.pi", "paper", "pi", "sce01", "ce_a", "nll1", -1,
         "on PI, SCE 0.1 lowers the book NLL at 1x against CE (an extension)"),
    Test("E.dose", "exploratory", "eabf", "jeffreys01", "ce_both", "nll4", -1,
         "dose: on EABF, Jeffreys 0.1 against CE on both windows, NLL at 4x"),
    Test("E.additivity", "exploratory", "eabf", "sce01", "ce_a", "nll4", 1,
         "additivity: on EABF, SCE 0.1's effect minus Jeffreys 0.1's and entropy 0.1's "
         "(each against CE), NLL at 4x", minus=("jeffreys01", "entropy01")),
)
FAMILIES = ("primary", "secondary", "paper", "exploratory")


def test(test_id: str) -> Test:
    return next(t for t in TESTS if t.id == test_id)


def arm_values(runs: pd.DataFrame, method: str, arm: str, outcome: str) -> pd.Series:
    """Each base's value of ``arm`` on ``method``: the mean over the fine-tuning seeds it has."""
    rows = runs[(runs["method"] == method) & (runs["arm"] == arm)]
    return rows.groupby("base")[outcome].mean()


def base_effects(runs: pd.DataFrame, t: Test, comparator: str | None = None) -> pd.Series:
    """Each base's effect of test ``t`` (paired within base: the bases that have every arm it
    needs), by base; ``comparator`` replaces the test's own (a sensitivity analysis)."""
    if t.outcome == "growth":
        return (base_effects(runs, replace(t, outcome="nll4"), comparator)
                - base_effects(runs, replace(t, outcome="nll1"), comparator)).dropna()
    base = arm_values(runs, t.method, comparator or t.comparator, t.outcome)
    effect = arm_values(runs, t.method, t.arm, t.outcome) - base
    for arm in t.minus:
        effect = effect - (arm_values(runs, t.method, arm, t.outcome) - base)
    return effect.dropna().sort_index()


@dataclass
class Estimate:
    """A t over bases' effects: mean, interval at ``level``, two-sided p, the bases' values,
    how many lie on the predicted side."""

    n: int
    mean: float
    low: float
    high: float
    level: float
    p: float
    values: dict[Any, float]
    on_side: int


def estimate(effects: pd.Series, sign: int, level: float = 0.95) -> Estimate:
    """The t interval (``lsa.stats.paired_interval``) and two-sided p (scipy's one-sample t)
    of the mean of ``effects``; NaN below two bases."""
    from scipy import stats

    values = effects.to_numpy(float)
    ci = paired_interval(values, np.zeros_like(values), level)
    p = float(stats.ttest_1samp(values, 0.0).pvalue) if len(values) >= 2 else math.nan
    return Estimate(len(values), ci.mean, ci.low, ci.high, level, p,
                    {k: float(v) for k, v in effects.items()},
                    int(np.sum(np.sign(values) == sign)))


# ---------------------------------------------------------------------------------------------
# the design (section 5): Lan-DeMets O'Brien-Fleming boundaries, power by simulation


def spent(t: float, alpha: float = 0.05) -> float:
    """Lan-DeMets' O'Brien-Fleming spending function, two-sided: the type I error spent by
    information fraction ``t``."""
    from scipy.stats import norm

    return float(2 - 2 * norm.cdf(norm.ppf(1 - alpha / 2) / math.sqrt(t)))


def boundaries(stages: tuple[int, ...], alpha: float = 0.05) -> list[float]:
    """The two-sided z boundary of each look (after each stage of ``stages`` bases), equally or
    unequally spaced: look k's boundary makes P(no crossing up to k) = 1 - spent(t_k) under
    the null (the looks' z are correlated sqrt(t_i / t_j))."""
    from scipy.optimize import brentq
    from scipy.stats import multivariate_normal, norm

    cum = np.cumsum(stages)
    t = cum / cum[-1]
    out: list[float] = []
    for k in range(len(t)):
        target = 1 - spent(float(t[k]), alpha)
        if k == 0:
            out.append(float(norm.ppf(1 - (1 - target) / 2)))
            continue
        cov = np.sqrt(np.minimum.outer(t[:k + 1], t[:k + 1]) / np.maximum.outer(t[:k + 1],
                                                                             t[:k + 1]))
        mvn = multivariate_normal(np.zeros(k + 1), cov, seed=0)

        def inside(c: float, mvn: Any = mvn, target: float = target) -> float:
            upper = np.array([*out, c])
            return float(mvn.cdf(upper, lower_limit=-upper)) - target

        out.append(float(brentq(inside, 1.0, 6.0, xtol=1e-6)))
    return out


@dataclass(frozen=True)
class Design:
    """The primary test's plan: bases per stage, each look's z boundary, its nominal two-sided
    p (a look stops the study where H1's p is below it) and the level of H1's interval at it."""

    stages: tuple[int, ...]
    z: tuple[float, ...]
    alpha: float

    @property
    def p(self) -> tuple[float, ...]:
        from scipy.stats import norm

        return tuple(float(2 * norm.sf(z)) for z in self.z)

    @property
    def levels(self) -> tuple[float, ...]:
        return tuple(1 - p for p in self.p)

    def simulate(self, effect: float, sd: float, reps: int = 20000, seed: int = 0
                 ) -> dict[str, float]:
        """Seeded simulation of the design's t-tests (bases' effects ~ N(effect, sd)): the
        power (any look's p below its bound), the probability of stopping at the first look
        and the expected number of bases."""
        from scipy import stats

        rng = np.random.default_rng(seed)
        x = rng.normal(effect, sd, size=(reps, sum(self.stages)))
        stopped = np.zeros(reps, dtype=bool)
        bases = np.full(reps, float(sum(self.stages)))
        first = math.nan
        for n, bound in zip(np.cumsum(self.stages), self.p):
            head = x[:, :n]
            tstat = head.mean(1) / (head.std(1, ddof=1) / math.sqrt(n))
            crossed = (2 * stats.t.sf(np.abs(tstat), n - 1) < bound) & ~stopped
            bases[crossed] = n
            stopped |= crossed
            first = float(crossed.mean()) if math.isnan(first) else first
        return {"power": float(stopped.mean()), "stop_first": first,
                "expected_bases": float(bases.mean())}

    def single_stage_power(self, effect: float, sd: float, n: int) -> float:
        """The power of one t-test over ``n`` bases at ``alpha`` (statsmodels)."""
        from statsmodels.stats.power import TTestPower

        return float(TTestPower().power(effect_size=abs(effect) / sd, nobs=n, alpha=self.alpha,
                                        alternative="two-sided"))


def design(cfg: StudyConfig) -> Design:
    """The design of ``cfg``: its stages' sizes and their boundaries."""
    stages = tuple(len(s) for s in cfg.stage_seeds)
    return Design(stages, tuple(boundaries(stages, cfg.alpha)), cfg.alpha)


# ---------------------------------------------------------------------------------------------
# bases: gates, replacements (section 6: ``lsa.config.base_plan``, which plans the runs too)


def diverged(runs: pd.DataFrame, bases: pd.DataFrame, ratio: float) -> pd.DataFrame:
    """The diverged runs (section 6): a non-finite loss or outcome, or a perplexity at
    ``l_train`` above ``ratio`` times its base model's; ``base``, ``method``, ``arm``,
    ``seed``, ``why``."""
    limit = runs["base"].map(bases.set_index("base")["base_ppl1"]) * ratio
    bad = ~runs["finite"].astype(bool) | (runs["ppl1"] > limit)
    out = runs.loc[bad, ["base", "method", "arm", "seed"]].copy()
    out["why"] = np.where(~runs.loc[bad, "finite"].astype(bool), "non-finite",
                          f"perplexity at l_train above {ratio:g}x its base model's")
    return out.reset_index(drop=True)


# ---------------------------------------------------------------------------------------------
# the analysis (sections 4, 5, 7)


@dataclass
class Look:
    """The interim look: H1's p over the first stage's bases against its bound."""

    bases: int
    p: float
    bound: float

    @property
    def stop(self) -> bool:
        return bool(self.p < self.bound)

    def sentence(self) -> str:
        return (f"interim look at {self.bases} bases: the study "
                + ("stops (H1 is judged at this look)" if self.stop
                   else "goes on to its second stage (nothing else is read)"))


@dataclass
class Row:
    """One test's result: the estimate, its verdict and the sensitivity analyses."""

    test: Test
    est: Estimate
    verdict: str
    p_holm: float = math.nan
    excluded: list[int] = field(default_factory=list)
    sensitivity: dict[str, Any] = field(default_factory=dict)
    held: str = ""  # the verdict the numbers give where the premise failed

    def to_dict(self) -> dict[str, Any]:
        t, e = self.test, self.est
        return {"id": t.id, "family": t.family, "method": t.method, "arm": t.arm,
                "comparator": t.comparator, "outcome": t.outcome, "sign": t.sign,
                "hypothesis": t.text, "estimate": e.mean, "low": e.low, "high": e.high,
                "level": e.level, "p": e.p, "p_holm": self.p_holm, "verdict": self.verdict,
                "bases": e.n, "on_predicted_side": e.on_side,
                "excluded_bases": list(self.excluded), "values": e.values,
                "verdict_if_premise_held": self.held, **self.sensitivity}


@dataclass
class Analysis:
    """What the study's analysis found: the look, and (where the study is judged) one row per
    test, the exclusions and the moderators."""

    look: Look | None
    judged: bool
    bases: list[int]
    rows: list[Row] = field(default_factory=list)
    diverged: pd.DataFrame | None = None
    moderators: dict[str, float] = field(default_factory=dict)
    premise_failed: list[str] = field(default_factory=list)

    def table(self) -> pd.DataFrame:
        return pd.DataFrame([r.to_dict() for r in self.rows])


def stage_of_analysis(cfg: StudyConfig, bases: pd.DataFrame) -> tuple[BasePlan, int]:
    """The plan of bases (``lsa.config.base_plan``) and the number of stages complete;
    ``StudyIncomplete`` where the first stage (or any stage ``cfg.stages`` asks for) is not
    in, ``StudyStopped`` where the failures stopped the study."""
    passed = {int(r.base): (None if r.g1 is None or r.g2 is None or pd.isna(r.g1)
                            or pd.isna(r.g2) else bool(r.g1 and r.g2))
              for r in bases.itertuples()}
    plan = base_plan(cfg, passed)
    if plan.stopped:
        raise StudyStopped(plan.reason)
    complete = set(bases.loc[bases["complete"].astype(bool), "base"].astype(int))
    for k, members in enumerate(plan.stages, start=1):
        lacking = sorted(s for s in members if s not in complete or passed.get(s) is None)
        if lacking:
            raise StudyIncomplete(
                f"stage {k} of the study is incomplete: {len(lacking)} of its "
                f"{len(members)} bases are not in ({', '.join(map(str, lacking[:6]))}"
                f"{' ...' if len(lacking) > 6 else ''}); nothing is analysed before every base "
                "of a stage is kept")
    return plan, len(plan.stages)


def analyse(cfg: StudyConfig, runs: pd.DataFrame, bases: pd.DataFrame,
            g3: Mapping[str, bool | None], ratio: float,
            pilot: pd.DataFrame | None = None) -> Analysis:
    """The study's analysis of its complete stages (``stage_of_analysis``): at a look that does
    not stop, H1's p and nothing else; else every test on every base the study ends with (H1
    at the level of the look where it stops), premise, Holm per family, verdicts and the
    sensitivity analyses (``pilot``: the pilot's runs, as ``runs``)."""
    plan, done = stage_of_analysis(cfg, bases)
    d = design(cfg)
    use = [s for members in plan.stages for s in members]
    runs = runs[runs["base"].isin(use)]
    out = diverged(runs, bases, ratio)
    excluded = {m: sorted(set(out.loc[out["method"] == m, "base"])) for m in cfg.methods}
    clean = runs[~runs.apply(lambda r: r["base"] in excluded.get(r["method"], ()), axis=1)]
    h1 = test("H1")
    look = None
    level_h1 = d.levels[-1]
    if len(d.stages) > 1:
        first = set(plan.stages[0])
        effects = base_effects(clean[clean["base"].isin(first)], h1)
        look = Look(len(effects), estimate(effects, h1.sign).p, d.p[0])
        if not look.stop and done < len(d.stages):
            return Analysis(look, False, sorted(first), diverged=None)
        if look.stop:
            level_h1 = d.levels[0]
            clean = clean[clean["base"].isin(first)]
            use = sorted(first)
    failed = [m for m in cfg.methods if g3.get(m) is not True]
    rows = []
    for t in TESTS:
        level = level_h1 if t.id == "H1" else 0.95
        effects = base_effects(clean, t)
        est = estimate(effects, t.sign, level)
        rows.append(Row(t, est, ESTIMATE if t.family == "exploratory" else "",
                        excluded=excluded.get(t.method, [])))
    for family in ("secondary", "paper"):
        members = [r for r in rows if r.test.family == family and r.test.method not in failed]
        for r, p in zip(members, holm({r.test.id: r.est.p for r in members},
                                      cfg.alpha).values()):
            r.p_holm = p
    for r in rows:
        if r.test.family == "exploratory":
            continue
        e = r.est
        r.verdict = verdict(e.low, e.high, r.test.sign, cfg.sesoi,
                            None if r.test.family == "primary" else r.p_holm, cfg.alpha)
        if r.test.method in failed:
            r.held, r.verdict = r.verdict, PREMISE_NOT_MET
        r.sensitivity = sensitivity(clean, r.test, pilot)
    h1_effects = base_effects(clean, h1)
    mods = bases.set_index("base")[["g1_gain", "base_nll4"]].reindex(h1_effects.index)
    moderators = {f"r(H1 effect, {c})": float(pd.Series(h1_effects).corr(mods[c]))
                  for c in mods.columns} if len(h1_effects) >= 3 else {}
    return Analysis(look, True, use, rows, out, moderators, failed)


def sensitivity(runs: pd.DataFrame, t: Test, pilot: pd.DataFrame | None) -> dict[str, Any]:
    """Section 7's sensitivity analyses of ``t`` (reported, never a verdict): the signed-rank
    p (scipy's Wilcoxon), the estimate against CE on window A (where the comparator is CE on
    both windows), the range of the estimate leaving one base out, and the pilot's bases
    added where the pilot has both arms of the test (their seeds named in ``pilot_bases``)."""
    from scipy import stats

    effects = base_effects(runs, t)
    out: dict[str, Any] = {"signed_rank_p": (float(stats.wilcoxon(effects.to_numpy()).pvalue)
                                             if len(effects) >= 2 else math.nan)}
    if t.comparator == "ce_both":
        alt = estimate(base_effects(runs, t, comparator="ce_a"), t.sign)
        out.update(ce_a_estimate=alt.mean, ce_a_low=alt.low, ce_a_high=alt.high, ce_a_p=alt.p)
    loo = [effects.drop(b).mean() for b in effects.index] if len(effects) >= 2 else []
    out.update(loo_min=min(loo, default=math.nan), loo_max=max(loo, default=math.nan))
    extra = base_effects(pilot, t) if pilot is not None and len(pilot) else pd.Series(
        dtype=float)
    out["pilot_bases"] = [int(b) for b in extra.index]
    if len(extra):
        both = estimate(pd.concat([effects, extra.rename(lambda b: f"pilot {b}")]), t.sign)
        out.update(pilot_estimate=both.mean, pilot_low=both.low, pilot_high=both.high,
                   pilot_p=both.p)
    return out


def pooled_base(metrics: list[dict[str, Any]]) -> dict[str, Any]:
    """The base models' copy probes pooled for G3 (section 6): at each length, the per-probe
    copy NLL averaged over the bases (every model is measured on the same probes)."""
    lengths = set.intersection(*(set(m.get("long_range") or {}) for m in metrics))
    pooled = {}
    for length in lengths:
        rows = [m["long_range"][length] for m in metrics]
        per_probe = np.mean([r["per_probe"] for r in rows], axis=0)
        pooled[length] = {"per_probe": per_probe.tolist(),
                          "copy_nll": float(per_probe.mean())}
    return {"long_range": pooled}


# ---------------------------------------------------------------------------------------------
# a run's outcomes (StudyConfig.outcomes) and whether it is finite


def outcome(metrics: dict[str, Any], where: str, l_train: int) -> float:
    """The number ``where`` (``<metric>.<multiple of l_train>.<key>``, ``StudyConfig.outcomes``)
    of a run's ``metrics.json``; NaN where the run lacks it."""
    group, multiple, key = where.split(".")
    rows = metrics.get(group) or {}
    row = rows.get(str(int(multiple) * l_train)) or {}
    value = row.get(key)
    return float(value) if value is not None else math.nan


def finite_run(metrics: dict[str, Any], log: list[dict[str, Any]],
               outcomes: Mapping[str, str], l_train: int) -> bool:
    """Whether a run's training losses (every step's ``loss`` and ``ce`` of its log) and its
    outcomes are all finite (section 6's first reason to exclude a run)."""
    losses = [row.get(k) for row in log for k in ("loss", "ce") if row.get(k) is not None]
    values = [outcome(metrics, where, l_train) for where in outcomes.values()]
    return all(math.isfinite(float(v)) for v in [*losses, *values])
