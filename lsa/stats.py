"""Statistics for verdicts: paired seed differences, accuracies, the correlations of Table 1,
and every verdict rule of the project (``resolve_verdict`` for the paper's claims, against 0
and against the paper's effect; ``sign_verdict`` and the controls' outcome words; one sign
convention, ``paper_sign``, the sign of the difference or correlation the paper reports), the
numbers a verdict carries (``edge_distance``, ``interval_p``) and the power computation.

Everything here is a thin layer over ``scipy.stats`` (``ttest_1samp``-style t intervals,
``bootstrap``, ``permutation_test``); nothing is re-implemented but the partial correlation
(residuals of two least-squares fits), the bookkeeping that turns a table of models into the
rows of Table 1, and ``pearson`` and ``spearman``: scipy's ``pearsonr`` and ``spearmanr``
without their input checks, because every resample calls them (twice ``population.bootstrap``
times per correlation of Table 1), and with every sum of products in a fixed order (``dot``),
so that the analysis gives the same bytes on any CPU.

- **Paired seeds** (``paired_interval``): the effect of a change is the mean over seeds of the
  paired difference (changed run minus baseline, same seed, same data order); its uncertainty is
  the Student t interval of that mean, read by ``resolve_verdict``; one seed gives no
  interval, so no verdict.
- **Correlations** (``correlation_rows``): for each predictor x score, Pearson r and Spearman
  rho, each with a 95 % bootstrap interval (resampling models, or clusters of them where
  ``groups`` are given; BCa where it is defined, else percentile) and a permutation p-value
  (two-sided, pairings permuted).
- **Which predictor is better** (``compare_predictors``): the difference of absolute
  correlations ``|r(a, score)| - |r(b, score)|`` with a bootstrap interval resampling models
  (both correlations on the same resample); "a predicts better" holds when the interval
  excludes 0 on the positive side.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass
from typing import Any, Final, Literal

import numpy as np

Method = Literal["pearson", "spearman"]
#: the two-sided 95 % normal quantile
Z95 = 1.959963984540054


# ---------------------------------------------------------------------------------------------
# paired seed differences


@dataclass(frozen=True)
class PairedInterval:
    """Mean paired difference over seeds and its t interval (NaN bounds with one seed)."""

    mean: float
    low: float
    high: float
    n: int
    confidence: float

    def excludes_zero(self) -> bool:
        return self.n >= 2 and (self.low > 0 or self.high < 0)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def paired_interval(changed, baseline, confidence: float = 0.95) -> PairedInterval:
    """The t interval of the mean of ``changed - baseline`` (arrays paired by seed)."""
    from scipy import stats

    diff = np.asarray(changed, dtype=float) - np.asarray(baseline, dtype=float)
    if diff.ndim != 1:
        raise ValueError("paired values must be one-dimensional (one value per seed)")
    n = int(diff.size)
    if n == 0:
        return PairedInterval(math.nan, math.nan, math.nan, 0, confidence)
    mean = float(diff.mean())
    if n < 2:
        return PairedInterval(mean, math.nan, math.nan, n, confidence)
    sem = float(diff.std(ddof=1) / math.sqrt(n))
    if sem == 0.0:
        return PairedInterval(mean, mean, mean, n, confidence)
    half = float(stats.t.ppf(0.5 + confidence / 2, df=n - 1)) * sem
    return PairedInterval(mean, mean - half, mean + half, n, confidence)


# ---------------------------------------------------------------------------------------------
# verdicts: one rule, one sign convention
#
# Every verdict compares an interval of a difference (changed - baseline, or a correlation)
# with the paper's direction, ``paper_sign``: +1 when the paper reports a positive value (an
# increase, a positive correlation), -1 a negative one. A paper claim's verdict also says
# where the interval lies against the paper's effect (``resolve_verdict``).


#: every word a verdict can be, the one type of ``lsa.claims.Claim.verdict`` and of what the
#: rules below return: ``PAPER_VERDICTS`` and ``CONTROL_OUTCOMES``, then "not run" and
#: "premise not met" (a test holds the word lists and this type together)
Verdict = Literal["agrees", "agrees in direction, smaller than the paper's effect",
                  "agrees, larger than the paper's effect",
                  "agrees in direction; the paper gives no size", "disagrees",
                  "smaller than the paper's effect", "underpowered", "inconclusive",
                  "helps", "hurts", "unclear", "lowers", "raises", "passes", "fails",
                  "not run", "premise not met"]

#: the verdict of a claim whose runs a profile does not make
NOT_RUN: Final = "not run"


def sign_verdict(low: float, high: float, paper_sign: int, n: int | None = None) -> Verdict:
    """``agrees`` / ``disagrees`` when ``[low, high]`` excludes 0 on the paper's side or on the
    other; ``inconclusive`` when it holds 0, is undefined, or rests on fewer than two paired
    values (``n``, when given); ``not run`` when ``n`` is 0."""
    if paper_sign not in (-1, 1):
        raise ValueError(f"paper_sign = {paper_sign}: must be -1 or +1")
    if n == 0:
        return NOT_RUN
    if (n is not None and n < 2) or not (math.isfinite(low) and math.isfinite(high)) \
            or low <= 0 <= high:
        return "inconclusive"
    return "agrees" if (low > 0) == (paper_sign > 0) else "disagrees"


#: what a verdict on a paper claim can say once an interval is measured (``resolve_verdict``):
#: where it lies against 0 and against the paper's effect d, on both sides of each
AGREES: Final = "agrees"
AGREES_SMALLER: Final = "agrees in direction, smaller than the paper's effect"
AGREES_LARGER: Final = "agrees, larger than the paper's effect"
AGREES_NO_SIZE: Final = "agrees in direction; the paper gives no size"
DISAGREES: Final = "disagrees"
SMALLER: Final = "smaller than the paper's effect"
UNDERPOWERED: Final = "underpowered"
PREMISE_NOT_MET: Final = "premise not met"
#: every verdict a paper claim can get from its numbers ("inconclusive": Section 3's majority
#: of seeds, which has no interval); then "premise not met" or "not run"
PAPER_VERDICTS: tuple[Verdict, ...] = (AGREES, AGREES_SMALLER, AGREES_LARGER, AGREES_NO_SIZE,
                                       DISAGREES, SMALLER, UNDERPOWERED, "inconclusive")
#: the verdicts whose interval excludes 0 (a test against 0 at 5 %, two-sided: the family
#: Holm's correction is taken over, ``lsa.claims.with_holm``)
EXCLUDES_ZERO: tuple[Verdict, ...] = (AGREES, AGREES_SMALLER, AGREES_LARGER, AGREES_NO_SIZE,
                                      DISAGREES)
#: an interval end closer than this many half-widths to a boundary (0 or d) marks its verdict
#: "(edge)": a small shift of the data would move it
EDGE: Final = 0.1
#: the outcome words of the project's controls and audits: an effect that helps (lower is
#: better for NLL and perplexity), a quantity that moves, an audit's pass; the third of each
#: is the interval across 0 (or one seed)
#: three outcome words: below 0, above 0, across 0
Outcomes = tuple[Verdict, Verdict, Verdict]
HELPS: Outcomes = ("helps", "hurts", "unclear")
MOVES: Outcomes = ("lowers", "raises", "unclear")
AUDIT: Outcomes = ("passes", "fails", "unclear")
CONTROL_OUTCOMES: tuple[Verdict, ...] = (*HELPS[:2], *MOVES[:2], *AUDIT[:2], HELPS[2])


def control_outcome(low: float, high: float, seeds: int, words: Outcomes = HELPS) -> Verdict:
    """A control's outcome: ``words[0]`` when the interval lies below 0, ``words[1]`` above,
    ``words[2]`` when it contains 0 or there is one seed; "not run" without runs."""
    if seeds == 0 or (isinstance(low, float) and math.isnan(low) and seeds > 1):
        return NOT_RUN
    if seeds < 2 or not math.isfinite(low):
        return words[2]
    return words[0] if high < 0 else words[1] if low > 0 else words[2]


def audit_outcome(verdict: Verdict) -> Verdict:
    """An audit's outcome from the verdict its comparison would get as a claim of the paper's
    (``sign_verdict``'s words): passes, fails, unclear, or not run."""
    audit: dict[Verdict, Verdict] = {"agrees": "passes", "disagrees": "fails",
                                     "inconclusive": "unclear"}
    return audit.get(verdict, verdict)


def threshold_outcome(low: float, high: float, bar: float) -> Verdict:
    """A check against a threshold ``bar``: passes when the whole interval lies above it, fails
    when the whole interval lies below it, unclear otherwise."""
    return AUDIT[0] if low > bar else AUDIT[1] if high < bar else AUDIT[2]


def resolve_verdict(low: float, high: float, paper_sign: int, effect: float | None,
                    n: int | None = None) -> Verdict:
    """The verdict of a paper claim from the 95 % interval ``[low, high]`` of our effect, the
    paper's direction ``paper_sign`` and its effect ``effect`` (d; its size is what counts, on
    the paper's side), one rule for every section (``docs/methods.md``, "Verdicts"). With the
    interval turned so that the paper's direction is positive, [L, H], and D = |d|:

    - H < 0: *disagrees* (excludes 0 on the other side);
    - L > 0 and L <= D <= H: *agrees*; H < D: *agrees in direction, smaller than the paper's
      effect*; L > D: *agrees, larger than the paper's effect*; no d: *agrees in direction;
      the paper gives no size*;
    - L <= 0 <= H, H < D: *smaller than the paper's effect* (a one-sided exclusion of d at
      97.5 %: a minimum-effect test); H >= D or no d: *underpowered* (its half-width is then
      what the interval resolves, ``resolution_text``).

    No finite interval, or fewer than two paired values (``n``): *underpowered*; ``n`` = 0:
    *not run*."""
    if paper_sign not in (-1, 1):
        raise ValueError(f"paper_sign = {paper_sign}: must be -1 or +1")
    if n == 0:
        return NOT_RUN
    if (n is not None and n < 2) or not (math.isfinite(low) and math.isfinite(high)):
        return UNDERPOWERED
    lo, hi = sorted((paper_sign * low, paper_sign * high))
    size = abs(effect) if effect is not None and math.isfinite(effect) and effect != 0 else None
    if hi < 0:
        return DISAGREES
    if lo > 0:
        if size is None:
            return AGREES_NO_SIZE
        return AGREES if lo <= size <= hi else AGREES_SMALLER if hi < size else AGREES_LARGER
    return SMALLER if size is not None and hi < size else UNDERPOWERED


def edge_distance(low: float, high: float, paper_sign: int, effect: float | None) -> float:
    """How near the verdict's decision lies: the distance from the interval end nearest to a
    boundary (0, and the paper's effect d on the paper's side) to that boundary, in
    half-widths of the interval (NaN without one). Below ``EDGE``, a verdict reads "(edge)"."""
    if not (math.isfinite(low) and math.isfinite(high)) or high <= low:
        return math.nan
    bounds = [0.0]
    if effect is not None and math.isfinite(effect) and effect != 0:
        bounds.append(paper_sign * abs(effect))
    half = (high - low) / 2
    return min(abs(end - b) for end in (low, high) for b in bounds) / half


def interval_p(low: float, high: float, n: int | None = None) -> float:
    """The two-sided p-value of 0 that the 95 % interval ``[low, high]`` implies: its centre
    over the standard error read off its half-width, Student t with ``n - 1`` degrees of
    freedom for a seed interval of ``n`` values, normal otherwise (a bootstrap interval: an
    approximation where it is skewed). NaN without an interval."""
    from scipy import stats

    if not (math.isfinite(low) and math.isfinite(high)) or high < low or \
            (n is not None and n < 2):
        return math.nan
    centre, half = (low + high) / 2, (high - low) / 2
    if half == 0:
        return 0.0 if centre != 0 else 1.0
    dist = stats.t(df=n - 1) if n is not None else stats.norm()
    return float(2 * dist.sf(abs(centre) / (half / dist.ppf(0.975))))


def resolution_text(low: float, high: float, effect: float | None, unit: str = "") -> str:
    """What an interval resolves: its half-width, beside the paper's effect where there is one."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return "no interval (one seed): resolves nothing"
    text = f"resolves +-{(high - low) / 2:.3g}{unit}"
    if effect is not None and math.isfinite(effect):
        text += f" (the paper's effect: {abs(effect):.3g}{unit})"
    return text


def seeds_for_halfwidth(sd: float, target: float, confidence: float = 0.95,
                        most: int = 1000) -> int | None:
    """The power computation of the seeds: the fewest seeds ``n`` (at least 2) whose paired t
    interval, ``t(n-1) sd / sqrt(n)``, is no wider on each side than ``target`` (None beyond
    ``most``)."""
    from scipy import stats

    if not (sd >= 0 and target > 0):
        raise ValueError(f"sd = {sd}, target = {target}: need sd >= 0 and target > 0")
    for n in range(2, most + 1):
        if stats.t.ppf(0.5 + confidence / 2, df=n - 1) * sd / math.sqrt(n) <= target:
            return n
    return None


def sd_upper_bound(sd: float, df: int, level: float = 0.8) -> float:
    """The one-sided ``level`` upper confidence bound of a standard deviation estimated with
    ``df`` degrees of freedom (chi-square): a plan from few seeds takes the bound, not the
    estimate (NaN without a degree of freedom)."""
    from scipy import stats

    if not (df >= 1 and math.isfinite(sd)):
        return math.nan
    return float(sd * math.sqrt(df / stats.chi2.ppf(1 - level, df)))


def seeds_for_power(sd: float, effect: float, power: float = 0.8, alpha: float = 0.05,
                    most: int = 1000) -> int | None:
    """The fewest seeds (at least 2) whose paired two-sided t-test at ``alpha`` detects the
    paper's ``effect`` with probability ``power`` when the paired differences have standard
    deviation ``sd`` (statsmodels ``TTestPower``; None beyond ``most``)."""
    from statsmodels.stats.power import TTestPower

    if not (sd > 0 and effect != 0 and math.isfinite(sd) and math.isfinite(effect)):
        return None
    test = TTestPower()
    for n in range(2, most + 1):
        if test.power(effect_size=abs(effect) / sd, nobs=n, alpha=alpha) >= power:
            return n
    return None


@dataclass(frozen=True)
class Components:
    """The two levels of a nested design (``variance_components``): the standard deviation
    between groups (bases, training seeds) beyond what their members' noise explains, and
    within them (seeds in a base, answers in a seed), with their degrees of freedom and the
    members per group (the mean where unequal)."""

    between: float
    within: float
    df_between: int
    df_within: int
    per_group: float
    groups: int
    #: the mean squares and the effective group size (n0) the components come from
    ms_between: float = math.nan
    ms_within: float = math.nan
    n0: float = math.nan

    def between_upper(self, level: float = 0.8) -> float:
        """The one-sided ``level`` upper bound of ``between``: the mean square between groups
        at its chi-square upper bound, less the within share, over n0 (positive even where the
        point estimate is 0: few groups cannot show a group effect to be absent). NaN
        without a degree of freedom between groups."""
        from scipy import stats

        if not (self.df_between >= 1 and math.isfinite(self.ms_between)):
            return math.nan
        upper = self.ms_between * self.df_between / stats.chi2.ppf(1 - level, self.df_between)
        within = self.ms_within if math.isfinite(self.ms_within) else 0.0
        return math.sqrt(max(upper - within, 0.0) / self.n0)


def variance_components(values, groups) -> Components:
    """One-way random-effects components by the method of moments (the ANOVA estimator):
    ``within`` from the pooled variance inside groups, ``between`` from the spread of the group
    means less the share the within noise explains (floored at 0: a spread no larger than the
    noise estimates no group effect). Unequal groups use the usual n0 in place of the group
    size. NaN where a level has no degree of freedom."""
    frame = {}
    for g, v in zip(np.asarray(groups), np.asarray(values, dtype=float)):
        if math.isfinite(v):
            frame.setdefault(g, []).append(v)
    sizes = np.array([len(v) for v in frame.values()], dtype=float)
    k, total = len(frame), float(sizes.sum())
    df_within, df_between = int(total - k), k - 1
    means = np.array([np.mean(v) for v in frame.values()])
    ss_within = sum(float(((np.asarray(v) - np.mean(v)) ** 2).sum()) for v in frame.values())
    ms_within = ss_within / df_within if df_within > 0 else math.nan
    n0 = ((total - (sizes ** 2).sum() / total) / df_between) if df_between > 0 else math.nan
    ms_between = between = math.nan
    if df_between > 0:
        grand = float((sizes * means).sum() / total)
        ms_between = float((sizes * (means - grand) ** 2).sum() / df_between)
        within_share = ms_within if math.isfinite(ms_within) else 0.0
        between = math.sqrt(max(ms_between - within_share, 0.0) / n0)
    return Components(between=between, within=math.sqrt(ms_within) if df_within > 0
                      else math.nan, df_between=df_between, df_within=df_within,
                      per_group=float(sizes.mean()) if k else math.nan, groups=k,
                      ms_between=ms_between, ms_within=ms_within, n0=n0)


def groups_for_power(effect: float, between: float, within: float, per_group: int,
                     power: float = 0.8, alpha: float = 0.05, most: int = 1000) -> int | None:
    """The fewest groups (bases, or training seeds) whose t test over the group means, each
    the mean of ``per_group`` members (seeds, or answers), detects ``effect`` with probability
    ``power``: a group mean has standard deviation sqrt(between^2 + within^2 / per_group)
    (``seeds_for_power`` on it). None beyond ``most``, or where a component is unknown."""
    sd = math.sqrt(between ** 2 + within ** 2 / per_group) if per_group >= 1 else math.nan
    return seeds_for_power(sd, effect, power, alpha, most)


def nested_t_interval(values, groups, confidence: float = 0.95) -> tuple[float, float, float]:
    """``(mean, low, high)``: the mean over groups of the group means (each group weighs
    alike) with the Student t interval over those means (groups - 1 degrees of freedom): the
    interval of a nested design whose groups (bases) are a random factor and whose members
    (seeds) are nested in them. Missing values are dropped; NaN bounds below two groups."""
    means: dict[Any, list[float]] = {}
    for g, v in zip(np.asarray(groups), np.asarray(values, dtype=float)):
        if math.isfinite(v):  # a missing value leaves its group's mean to the others
            means.setdefault(g, []).append(float(v))
    group_means = np.array([np.mean(v) for v in means.values()])
    if group_means.size == 0:
        return math.nan, math.nan, math.nan
    ci = paired_interval(group_means, np.zeros_like(group_means), confidence)
    return ci.mean, ci.low, ci.high


@dataclass(frozen=True)
class BasePairs:
    """Runs paired by (base model, seed) (``paired_by_base``). ``diff``, ``changed`` and
    ``baseline`` are pandas Series on the pairs' index; ``per_base`` is each base model's mean
    difference, ``sizes`` its pairs; ``nested``: ``nested_t_interval`` over the base models
    (NaN bounds below two)."""

    diff: Any
    changed: Any
    baseline: Any
    per_base: Any
    sizes: Any
    nested: tuple[float, float, float]
    confidence: float

    @property
    def bases(self) -> int:
        return int(len(self.sizes))

    @property
    def seeds(self) -> int:
        """The fewest pairs on one base model (0 without pairs)."""
        return int(self.sizes.min()) if len(self.sizes) else 0

    def interval(self) -> tuple[float, float, float, int]:
        """``(mean, low, high, n)``: on two or more base models the t over their means (``n``
        bases), else the paired t over seeds (``paired_interval``, ``n`` seeds)."""
        if self.bases >= 2:
            return (*self.nested, self.bases)
        ci = paired_interval(self.changed.to_numpy(float), self.baseline.to_numpy(float),
                             self.confidence)
        return ci.mean, ci.low, ci.high, ci.n


def paired_by_base(changed, baseline, confidence: float = 0.95,
                   level: str = "base_seed") -> BasePairs:
    """Pair two pandas Series of one column (a changed setting and its baseline) on their
    index: (``level``, seed) where the index has ``level``, the base model, else seed alone
    (one base model). The one pairing of every comparison of fine-tuning runs, seeds nested
    in base models."""
    both = changed.index.intersection(baseline.index)
    a, b = changed[both].astype(float), baseline[both].astype(float)
    diff = a - b
    groups = (diff.index.get_level_values(level) if level in (diff.index.names or [])
              else np.zeros(len(diff), dtype=int))
    return BasePairs(diff=diff, changed=a, baseline=b,
                     per_base=diff.groupby(groups).mean(), sizes=diff.groupby(groups).size(),
                     nested=nested_t_interval(diff.to_numpy(), groups, confidence),
                     confidence=confidence)


def majority_verdict(wins: int, total: int, mean_better: bool) -> Verdict:
    """Section 3, by seed (no interval): 'agrees' when the mean and a strict majority of seeds
    go the paper's way, 'disagrees' when neither does, 'inconclusive' otherwise."""
    if total == 0:
        return NOT_RUN
    if mean_better and wins * 2 > total:
        return "agrees"
    if not mean_better and wins * 2 < total:
        return "disagrees"
    return "inconclusive"


def equivalence_verdict(low: float, high: float, margin: float) -> Verdict:
    """For a paper claim of "comparable": ``agrees`` when the interval lies within +-margin,
    ``disagrees`` when it lies wholly beyond it, ``underpowered`` otherwise (it holds a margin:
    too wide to tell)."""
    if -margin <= low and high <= margin:
        return "agrees"
    if low > margin or high < -margin:
        return "disagrees"
    return UNDERPOWERED


# ---------------------------------------------------------------------------------------------
# accuracies (BABILong): one proportion, and the paired difference of two


def wilson_interval(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion ``k / n`` (scipy's binomtest)."""
    from scipy.stats import binomtest

    if n == 0:
        return math.nan, math.nan
    ci = binomtest(int(k), int(n)).proportion_ci(confidence_level=level, method="wilson")
    return float(ci.low), float(ci.high)


def paired_proportion_interval(wins: int, losses: int, n: int, level: float = 0.95
                               ) -> tuple[float, float]:
    """Interval of a paired difference of proportions from ``n`` pairs, ``wins`` where only the
    second is correct and ``losses`` where only the first is: the normal interval on the
    per-pair differences after adding 1/2 to each cell of the 2x2 table (Agresti & Min 2005),
    so that it keeps a width when no pair disagrees."""
    from scipy.stats import norm

    if n == 0:
        return math.nan, math.nan
    b, c, m = wins + 0.5, losses + 0.5, n + 2
    centre = (b - c) / m
    half = float(norm.ppf(0.5 + level / 2)) * math.sqrt(b + c - (b - c) ** 2 / m) / m
    return centre - half, centre + half


def normal_interval(value: float, se: float) -> tuple[float, float]:
    """``value -+ 1.96 se``: the normal 95 % interval of an estimate with standard error ``se``
    (the premise gates' probe means: hundreds of probes)."""
    return value - Z95 * se, value + Z95 * se


def mean_interval(values) -> tuple[float, float, float]:
    """``(mean, low, high)``: the mean of ``values`` with its normal interval (NaN bounds for
    one value)."""
    from lsa.summary import mean_se

    mean, se = mean_se(values)
    se = se if len(values) > 1 else float("nan")
    return (mean, *normal_interval(mean, se))


def difference_interval(a, b) -> tuple[float, float, float]:
    """``(diff, low, high)``: the difference of two independent means (``a - b``, e.g. one
    model's copy probes at two lengths) with its normal interval."""
    va, vb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    diff = float(va.mean() - vb.mean())
    se = float(np.sqrt(va.var(ddof=1) / len(va) + vb.var(ddof=1) / len(vb)))
    return (diff, *normal_interval(diff, se))


def crossed_two_level_interval(statistic, n_seeds: int, probe_counts: list[int],
                               n_resamples: int, rng: np.random.Generator
                               ) -> tuple[float, float]:
    """Percentile interval of ``statistic(seeds, *probe_indices)`` over a two-level resample:
    the training seeds with replacement, then the probes of each length with replacement. The
    probes are the same windows for every model (not nested in a seed), so one draw of a
    length's probes serves every seed and the base model (crossed, as measured: the premise gate
    G3). 95 %."""
    values = np.empty(n_resamples)
    for b in range(n_resamples):
        seeds = rng.integers(n_seeds, size=n_seeds)
        values[b] = statistic(seeds, *(rng.integers(n, size=n) for n in probe_counts))
    low, high = np.quantile(values, [0.025, 0.975])
    return float(low), float(high)


# ---------------------------------------------------------------------------------------------
# correlations (Table 1)


# Each correlation of Table 1 is computed once per bootstrap resample and once per permutation
# (2000 each by default, every audit again), and scipy's ``pearsonr`` and ``spearmanr`` spend
# much of each call on checking and dispatching their input (what it cost notebook 02:
# docs/bench/notebooks.md). ``pearson`` and ``spearman`` follow their arithmetic on two 1-D
# float arrays without NaN (what ``_clean`` leaves) with one change: every sum of products is
# ``dot``, a correctly rounded sum (``math.fsum``), where scipy and numpy call BLAS, whose
# kernels (chosen for the CPU at run time: AVX512, AVX2, SSE) sum in different orders. So the
# analysis gives the same bytes on any x86-64 CPU (tests/e2e/test_any_machine.py re-analyses the
# published snapshots under the lowest kernels); against scipy they agree to a few units in
# the last place (tests/unit/test_stats.py).


def dot(x: np.ndarray, y: np.ndarray) -> float:
    """``sum(x * y)`` correctly rounded: the products are exact IEEE operations on every CPU
    and ``math.fsum`` rounds their exact sum once, so no kernel's summation order enters (the
    number ``np.dot``, ``np.vecdot`` and BLAS give differs between CPUs in its last bits)."""
    return math.fsum(np.multiply(x, y).tolist())


def slope(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """``(slope, intercept)`` of the least-squares line of ``y`` on ``x`` (``np.polyfit(x, y,
    1)`` up to rounding) with ``dot``'s fixed-order sums: the same bytes on any CPU."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    xm, ym = x - x.mean(), y - y.mean()
    b = dot(xm, ym) / dot(xm, xm)
    return b, float(y.mean() - b * x.mean())


def pearson(x: np.ndarray, y: np.ndarray) -> float:
    """``scipy.stats.pearsonr(x, y).statistic`` (scipy 1.17's arithmetic: centred, each scaled
    by its largest deviation before the norm, the product summed, clipped to [-1, 1], rounded
    for two points) with the sums of products by ``dot``; NaN when either input is
    constant."""
    if (x == x[0]).all() or (y == y[0]).all():
        return math.nan
    xm, ym = x - x.mean(), y - y.mean()
    xmax, ymax = np.abs(xm).max(), np.abs(ym).max()
    sx, sy = xm / xmax, ym / ymax
    normx = xmax * math.sqrt(dot(sx, sx))
    normy = ymax * math.sqrt(dot(sy, sy))
    r = min(1.0, max(-1.0, dot(xm / normx, ym / normy)))
    return float(round(r)) if x.size == 2 else r


def average_ranks(v: np.ndarray) -> np.ndarray:
    """``scipy.stats.rankdata(v)`` (ties get the mean of their ranks, 1-based)."""
    order = np.argsort(v, kind="mergesort")
    ordered = v[order]
    new = np.r_[True, ordered[1:] != ordered[:-1]]
    dense = np.cumsum(new)[np.argsort(order, kind="mergesort")]
    bounds = np.r_[np.flatnonzero(new), v.size]
    return 0.5 * (bounds[dense] + bounds[dense - 1] + 1)


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """``scipy.stats.spearmanr(x, y).statistic``: numpy's ``corrcoef`` of the two rank vectors
    as numpy computes it (the covariances of the centred ranks, then divided by each standard
    deviation) with the sums of products by ``dot``; NaN when either input is constant."""
    if (x == x[0]).all() or (y == y[0]).all():
        return math.nan
    a, b = average_ranks(x), average_ranks(y)
    a, b = a - a.mean(), b - b.mean()
    scale = 1 / (x.size - 1)
    c = dot(a, b) * scale
    c = c / math.sqrt(dot(a, a) * scale) / math.sqrt(dot(b, b) * scale)
    return float(min(1.0, max(-1.0, c)))


def _corr(method: Method):
    if method == "pearson":
        return pearson
    if method == "spearman":
        return spearman
    raise ValueError(f"method = {method!r}: must be 'pearson' or 'spearman'")


def _clean(x, y, groups=None) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"x and y must be 1-D of one length, got {x.shape} and {y.shape}")
    keep = np.isfinite(x) & np.isfinite(y)
    return x[keep], y[keep], None if groups is None else np.asarray(groups, dtype=object)[keep]


@dataclass(frozen=True)
class Resampled:
    """One bootstrap of a statistic: its interval, the two-sided p of 0 from the same
    resamples (``_inverted_p``: below ``1 - confidence`` exactly when the interval excludes 0),
    and ``position``, the share of the resampled statistics below the estimate (0.5 for an
    unbiased one; BCa's bias correction reads it)."""

    low: float
    high: float
    p: float
    position: float


def _position(values: np.ndarray, value: float) -> float:
    """The fraction ``u`` with ``np.percentile(values, 100 u) == value`` (linear
    interpolation, as the interval's ends are read), clipped to [0, 1]."""
    d = np.sort(values)
    if value <= d[0]:
        return 0.0
    if value >= d[-1]:
        return 1.0
    k = int(np.searchsorted(d, value, side="right")) - 1
    return float((k + (value - d[k]) / (d[k + 1] - d[k])) / (d.size - 1))


def _inverted_p(dist: np.ndarray, z0: float | None, accel: float | None) -> float:
    """The two-sided p of 0 by inverting the bootstrap interval: the level ``1 - p`` at which
    the interval (BCa with bias correction ``z0`` and acceleration ``accel``; percentile where
    they are None) has 0 at an end. BCa reads its ends at ``Phi(z0 + w / (1 - a w))``, ``w =
    z0 + z_alpha`` (Efron & Tibshirani 1993, 14.3); solving it for the fraction where 0 lies
    gives ``w = c / (1 + a c)``, ``c = Phi^-1(u0) - z0``."""
    from scipy.special import ndtr, ndtri

    u0 = _position(dist, 0.0)
    if z0 is None:
        tail = u0
    else:
        c = float(ndtri(u0)) - z0
        if not math.isfinite(c):
            tail = 0.0 if c < 0 else 1.0
        else:
            if 1 + accel * c <= 0:
                return math.nan
            tail = float(ndtr(c / (1 + accel * c) - z0))
    return float(min(1.0, 2 * min(tail, 1 - tail)))


def _bootstrap(statistic, arrays, n_resamples: int, seed: int, confidence: float,
               groups=None) -> Resampled:
    """BCa interval over scipy's paired bootstrap resamples (its ends as scipy's BCa computes
    them, in a fixed order), and the p of 0 from the same resamples
    (``_inverted_p``); where BCa is undefined (a resample of few models can be constant, its
    statistic NaN) the percentile interval of the finite resampled statistics and its p. With
    ``groups`` (one label per row) the resampled unit is the group, all its rows together (a
    cluster bootstrap, Field & Welsh 2007; BCa's jackknife leaves out a group). A cluster
    bootstrap needs clusters of comparable size: with one dominant cluster its level is not
    guaranteed, which the leave-one-cluster-out refits check (``position`` shows the bias)."""
    from scipy import stats
    from scipy.special import ndtr, ndtri

    if groups is not None:
        labels = list(dict.fromkeys(groups))
        members = [np.flatnonzero(np.asarray(groups) == g) for g in labels]
        rows, inner = arrays, statistic

        def statistic(picked):
            idx = np.concatenate([members[int(i)] for i in picked])
            return inner(*(a[idx] for a in rows))

        arrays = (np.arange(len(labels)),)
        units = len(labels)
        of_units = statistic
    else:
        units = len(arrays[0])

        def of_units(picked):
            return statistic(*(a[picked] for a in arrays))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # the resamples alone (scipy's percentile method draws the same ones as its BCa); BCa's
        # ends are computed here, from the same quantities scipy's ``_bca_interval`` uses, with
        # the powers as products and a square root: numpy's ``**`` on an array runs a
        # vectorised ``pow`` on AVX512 CPUs whose last bits differ from the scalar one
        res = stats.bootstrap(arrays, statistic, paired=True, vectorized=False,
                              n_resamples=n_resamples, confidence_level=confidence,
                              method="percentile", random_state=np.random.default_rng(seed))
        estimate = of_units(np.arange(units))
        jack = np.array([of_units(np.delete(np.arange(units), i)) for i in range(units)])
    dist = np.asarray(res.bootstrap_distribution, dtype=float)
    position = float(((dist < estimate).sum() + (dist <= estimate).sum()) / 2 / dist.size) \
        if math.isfinite(estimate) else math.nan
    if math.isfinite(position) and np.isfinite(dist).all():
        z0 = float(ndtri(position))
        u = (units - 1) * (jack.mean() - jack)
        square = float((u * u).sum()) / units ** 2
        # a constant jackknife leaves BCa undefined (scipy's NaN): the percentile interval
        accel = (float((u * u * u).sum()) / units ** 3 / 6 / (square * math.sqrt(square))
                 if square > 0 else math.nan)
        z = float(ndtri(0.5 - confidence / 2))
        ends = [float(ndtr(z0 + w / (1 - accel * w))) for w in (z0 + z, z0 - z)]
        if all(math.isfinite(e) for e in ends):
            low, high = (float(v) for v in stats.quantile(dist, np.array(ends)))
            return Resampled(low, high, _inverted_p(dist, z0, accel), position)
    dist = dist[np.isfinite(dist)]
    if dist.size == 0:
        return Resampled(math.nan, math.nan, math.nan, position)
    tail = 50 * (1 - confidence)
    return Resampled(float(np.percentile(dist, tail)), float(np.percentile(dist, 100 - tail)),
                     _inverted_p(dist, None, None), position)


@dataclass(frozen=True)
class Correlation:
    predictor: str
    score: str
    method: str
    r: float
    low: float
    high: float
    p_permutation: float
    n: int
    #: the p of 0 from the interval's own resamples (``Resampled``) and the estimate's
    #: position among them
    p_bootstrap: float = math.nan
    position: float = math.nan

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def correlation_interval(x, y, method: Method = "pearson", *, n_resamples: int = 2000,
                         seed: int = 0, confidence: float = 0.95, groups=None
                         ) -> tuple[float, Resampled]:
    """``(r, its bootstrap)``: one correlation with its interval over the pairs (rows with a
    missing value dropped; over the ``groups`` of pairs where given) and the p of 0 from the
    same resamples, without ``correlation``'s permutation test."""
    x, y, groups = _clean(x, y, groups)
    corr = _corr(method)
    return corr(x, y), _bootstrap(corr, (x, y), n_resamples, seed, confidence, groups)


def correlation_value(x, y, method: Method = "pearson") -> float:
    """The correlation alone (rows with a missing value dropped): ``correlation_interval``'s
    ``r`` without its bootstrap."""
    return _corr(method)(*_clean(x, y)[:2])


def correlation(x, y, method: Method = "pearson", *, n_resamples: int = 2000,
                n_permutations: int = 2000, seed: int = 0, confidence: float = 0.95,
                predictor: str = "x", score: str = "y", groups=None) -> Correlation:
    """One correlation with its bootstrap interval (over ``groups`` of rows where given: the
    clusters of units that come from one trained model) and two-sided permutation p-value
    (over rows); rows with a missing value are dropped. Needs at least 3 models."""
    from scipy import stats

    x, y, groups = _clean(x, y, groups)
    n = int(x.size)
    if n < 3:
        raise ValueError(f"{predictor} vs {score}: {n} models with both values; need >= 3")
    corr = _corr(method)
    r, boot = correlation_interval(x, y, method, n_resamples=n_resamples, seed=seed,
                                   confidence=confidence, groups=groups)
    perm = stats.permutation_test((x, y), corr, permutation_type="pairings", vectorized=False,
                                  n_resamples=n_permutations, alternative="two-sided",
                                  random_state=np.random.default_rng(seed + 1))
    return Correlation(predictor, score, method, r, boot.low, boot.high, float(perm.pvalue), n,
                       boot.p, boot.position)


def correlation_rows(table, predictors: list[str], scores: list[str],
                     methods: tuple[Method, ...] = ("pearson", "spearman"),
                     group_col: str | None = None, **kwargs) -> list[dict[str, Any]]:
    """Table 1: one row per predictor x score x method, from a DataFrame with one row per
    model (columns named by ``predictors`` and ``scores``; ``group_col``: the cluster of each
    row, resampled whole)."""
    groups = table[group_col] if group_col else None
    return [correlation(table[p], table[s], m, predictor=p, score=s, groups=groups,
                        **kwargs).to_dict()
            for s in scores for p in predictors for m in methods]


@dataclass(frozen=True)
class Comparison:
    better: str
    worse: str
    score: str
    method: str
    difference: float      # direction * r(better) - direction * r(worse)
    low: float
    high: float
    n: int
    r_better: float = math.nan
    r_worse: float = math.nan
    direction: int = -1    # the sign the paper expects of each correlation
    p: float = math.nan         # of 0, from the interval's own resamples (``Resampled``)
    position: float = math.nan  # the difference's position among them

    @property
    def right_sign(self) -> bool:
        """``better``'s correlation points the paper's way (a wrong sign is a disagreement
        before any comparison of strength)."""
        return self.direction * self.r_better > 0

    @property
    def holds(self) -> bool:
        """``better`` predicts better in the paper's direction: it points the right way and
        the interval of the signed difference lies above 0."""
        return self.right_sign and self.low > 0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "right_sign": self.right_sign, "holds": self.holds}


def _complete(table, columns: tuple[str, ...], group_col: str | None = None
              ) -> tuple[np.ndarray, np.ndarray | None]:
    cols = np.column_stack([np.asarray(table[c], dtype=float) for c in columns])
    keep = np.isfinite(cols).all(axis=1)
    cols = cols[keep]
    if len(cols) < 4:
        raise ValueError(f"{columns[0]} vs {columns[1]} on {columns[2]}: {len(cols)} complete "
                         f"models; need >= 4")
    return cols, (np.asarray(table[group_col], dtype=object)[keep] if group_col else None)


def _difference(method: Method, direction: int):
    """``compare_predictors``' statistic of the columns ``(a, b, score)``: ``direction *
    (r(a, score) - r(b, score))``."""
    corr = _corr(method)

    def diff(xa, xb, y):
        return direction * (corr(xa, y) - corr(xb, y))

    return diff


def predictor_difference(table, a: str, b: str, score: str, method: Method = "pearson",
                         direction: int = -1) -> float:
    """``compare_predictors``' difference alone over the rows complete in all three columns,
    without its bootstrap."""
    cols, _ = _complete(table, (a, b, score))
    return _difference(method, direction)(cols[:, 0], cols[:, 1], cols[:, 2])


def compare_predictors(table, a: str, b: str, score: str, method: Method = "pearson", *,
                       n_resamples: int = 2000, seed: int = 0, confidence: float = 0.95,
                       direction: int = -1, group_col: str | None = None) -> Comparison:
    """Does ``a`` predict ``score`` better than ``b``, in the direction the paper expects
    (``direction``: -1, more of the predictor, a lower score)? The bootstrap interval
    (resampling the table's rows, its units, or their clusters ``group_col``) of ``direction *
    (r(a) - r(b))``, signed: a predictor pointing the wrong way gets no credit for its size."""
    cols, groups = _complete(table, (a, b, score), group_col)
    corr, diff = _corr(method), _difference(method, direction)
    value = diff(cols[:, 0], cols[:, 1], cols[:, 2])
    boot = _bootstrap(diff, (cols[:, 0], cols[:, 1], cols[:, 2]), n_resamples, seed,
                      confidence, groups)
    return Comparison(a, b, score, method, value, boot.low, boot.high, len(cols),
                      corr(cols[:, 0], cols[:, 2]), corr(cols[:, 1], cols[:, 2]), direction,
                      boot.p, boot.position)


def p_text(p: float, n_permutations: int) -> str:
    """A permutation p-value as measured: at the floor of ``n_permutations`` resamples (no
    permuted statistic as extreme) it reads "< 1/(B+1)", never the floor itself."""
    if p is None or not math.isfinite(p):
        return "n/a"
    floor = 1.0 / (n_permutations + 1)
    if p <= 2 * floor + 1e-12:  # two-sided: scipy doubles the one-sided floor
        return f"< {2 * floor:.2g} (the floor of {n_permutations} permutations)"
    return f"{p:.2g}"


def partial_correlation(x, y, z) -> float:
    """Pearson correlation of ``x`` and ``y`` given ``z``: the correlation of their residuals
    after a least-squares fit (with intercept) on ``z``."""
    x, y, z = (np.asarray(v, dtype=float) for v in (x, y, z))
    keep = np.isfinite(x) & np.isfinite(y) & np.isfinite(z)
    x, y, z = x[keep], y[keep], z[keep]
    if x.size < 4:
        raise ValueError(f"partial correlation needs >= 4 complete models, got {x.size}")
    flat = bool((z == z[0]).all())  # lstsq's minimum-norm fit: the mean alone

    def residual(v):  # least squares with intercept, as lstsq fits it, in fixed order
        if flat:
            return v - v.mean()
        b, a = slope(z, v)
        return v - (a + b * z)

    return pearson(residual(x), residual(y))


def partial_correlation_ci(x, y, z, *, n_resamples: int = 2000, seed: int = 0,
                           confidence: float = 0.95) -> tuple[float, Resampled]:
    """``partial_correlation(x, y, z)`` and its bootstrap (resampling models): its interval
    and the p of 0 from the same resamples."""
    x, y, z = (np.asarray(v, dtype=float) for v in (x, y, z))
    keep = np.isfinite(x) & np.isfinite(y) & np.isfinite(z)
    x, y, z = x[keep], y[keep], z[keep]
    r = partial_correlation(x, y, z)

    def stat(a, b, c):
        try:
            return partial_correlation(a, b, c)
        except (ValueError, np.linalg.LinAlgError):
            return math.nan

    return r, _bootstrap(stat, (x, y, z), n_resamples, seed, confidence)
