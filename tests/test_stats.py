"""lsa.stats against hand-computed values and brute-force references."""

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from lsa import stats


def test_paired_interval_is_the_t_interval_of_the_mean_difference():
    # differences 1, 2, 3: mean 2, sd 1, sem 1/sqrt(3); t(0.975, df=2) = 4.302653
    iv = stats.paired_interval([11, 22, 33], [10, 20, 30])
    assert iv.mean == pytest.approx(2.0)
    half = 4.302653 / math.sqrt(3)
    assert (iv.low, iv.high) == (pytest.approx(2 - half, rel=1e-6), pytest.approx(2 + half,
                                                                                rel=1e-6))
    assert iv.n == 3 and not iv.excludes_zero()


def test_one_seed_gives_no_interval_and_no_verdict():
    iv = stats.paired_interval([5.0], [1.0])
    assert iv.mean == 4.0 and math.isnan(iv.low) and not iv.excludes_zero()
    assert stats.interval_verdict(iv, -1) == "inconclusive"
    assert stats.interval_verdict(stats.paired_interval([], []), -1) == "not run"


def test_interval_verdict_directions():
    lower = stats.paired_interval([1.0, 1.1, 0.9, 1.0], [2.0, 2.0, 2.0, 2.1])  # clearly lower
    assert lower.excludes_zero() and lower.high < 0
    assert stats.interval_verdict(lower, -1) == "agrees"
    assert stats.interval_verdict(lower, +1) == "disagrees"
    noisy = stats.paired_interval([1.0, 3.0, 0.0], [2.0, 2.0, 2.0])
    assert stats.interval_verdict(noisy, -1) == "inconclusive"
    with pytest.raises(ValueError, match="paper_sign"):
        stats.interval_verdict(lower, 0)


def test_pearson_value_and_exact_permutation_p_value():
    x, y = [1, 2, 3, 4, 5], [2, 4, 5, 4, 5]
    # by hand: sum dx dy = 6, sum dx^2 = 10, sum dy^2 = 6 -> r = 6 / sqrt(60)
    # two samples of 5 have (5!)^2 = 14400 pairings: more resamples make scipy enumerate them
    c = stats.correlation(x, y, "pearson", n_permutations=20_000)
    assert c.r == pytest.approx(6 / math.sqrt(60))
    # brute force over the 120 orders of y
    def r(a, b):
        return np.corrcoef(a, b)[0, 1]
    count = sum(abs(r(x, p)) >= abs(c.r) - 1e-12 for p in itertools.permutations(y))
    assert c.p_permutation == pytest.approx(count / 120)
    assert c.n == 5 and c.low <= c.r <= c.high


def test_correlation_drops_missing_models_and_needs_three():
    c = stats.correlation([1, 2, np.nan, 4], [1, 2, 3, 5], "spearman")
    assert c.n == 3 and c.r == pytest.approx(1.0)
    with pytest.raises(ValueError, match="need >= 3"):
        stats.correlation([1, 2, np.nan], [1, 2, 3])


def test_partial_correlation_removes_the_shared_factor():
    rng = np.random.default_rng(0)
    z = rng.normal(size=40)
    design = np.column_stack([np.ones_like(z), z])
    proj = design @ np.linalg.pinv(design)
    a, b = rng.normal(size=40), rng.normal(size=40)
    a, b = a - proj @ a, b - proj @ b            # exactly orthogonal to [1, z]
    x, y = 10 * z + a, -8 * z + b + 0.5 * a
    expected = np.corrcoef(a, b + 0.5 * a)[0, 1]
    assert stats.partial_correlation(x, y, z) == pytest.approx(expected)
    # the plain correlation is dominated by z; the partial one is not
    assert abs(np.corrcoef(x, y)[0, 1]) > 0.9


def test_compare_predictors_finds_the_better_one():
    rng = np.random.default_rng(1)
    score = rng.normal(size=30)
    table = pd.DataFrame({"good": -score + 0.05 * rng.normal(size=30),
                          "noise": rng.normal(size=30), "score": score})
    cmp = stats.compare_predictors(table, "good", "noise", "score", n_resamples=500)
    assert cmp.holds and cmp.low > 0 and cmp.difference > 0.5
    reverse = stats.compare_predictors(table, "noise", "good", "score", n_resamples=500)
    assert not reverse.holds and reverse.high < 0


def test_a_predictor_pointing_the_wrong_way_gets_no_credit_for_its_size():
    """|r| would rank "wrong" (r = +0.99 with the score, the paper expects a negative r) above
    "right" (r about -0.5); the signed comparison does not."""
    rng = np.random.default_rng(3)
    score = rng.normal(size=40)
    table = pd.DataFrame({"wrong": score + 0.05 * rng.normal(size=40),
                          "right": -score + 1.5 * rng.normal(size=40), "score": score})
    cmp = stats.compare_predictors(table, "wrong", "right", "score", n_resamples=500)
    assert cmp.r_better > 0.95 and cmp.r_worse < 0
    assert not cmp.right_sign and not cmp.holds and cmp.high < 0
    assert stats.compare_predictors(table, "right", "wrong", "score", n_resamples=500).holds


def test_a_p_value_at_the_permutation_floor_says_so():
    assert stats.p_text(2 / 2001, 2000).startswith("< 0.001 (the floor of 2000 permutations)")
    assert stats.p_text(0.034, 2000) == "0.034"


def test_correlation_rows_cover_every_predictor_score_and_method():
    rng = np.random.default_rng(2)
    table = pd.DataFrame(rng.normal(size=(12, 3)), columns=["a", "b", "s"])
    rows = stats.correlation_rows(table, ["a", "b"], ["s"], n_resamples=200,
                                  n_permutations=200)
    assert [(r["predictor"], r["method"]) for r in rows] == [
        ("a", "pearson"), ("a", "spearman"), ("b", "pearson"), ("b", "spearman")]
    assert all(r["n"] == 12 and 0 < r["p_permutation"] <= 1 for r in rows)


@pytest.mark.parametrize("low, high, sign, n, verdict", [
    (-2.0, -0.5, -1, 3, "agrees"), (-2.0, -0.5, +1, 3, "disagrees"),
    (0.5, 2.0, +1, None, "agrees"), (0.5, 2.0, -1, None, "disagrees"),
    (-1.0, 1.0, -1, 5, "inconclusive"), (0.0, 1.0, +1, 5, "inconclusive"),  # 0 on the edge
    (-2.0, -0.5, -1, 1, "inconclusive"),  # one seed: no verdict
    (math.nan, math.nan, -1, 0, "not run"), (math.nan, 1.0, +1, None, "inconclusive"),
])
def test_one_verdict_rule_with_one_sign_convention(low, high, sign, n, verdict):
    """paper_sign is the sign the paper reports for the difference (or correlation)."""
    assert stats.sign_verdict(low, high, sign, n) == verdict


def test_equivalence_verdict():
    assert stats.equivalence_verdict(-2.0, 3.0, 5.0) == "agrees"
    assert stats.equivalence_verdict(6.0, 9.0, 5.0) == "disagrees"
    assert stats.equivalence_verdict(-2.0, 7.0, 5.0) == stats.UNDERPOWERED


@pytest.mark.parametrize("low, high, effect, verdict", [
    (-0.09, -0.01, 0.04, "agrees"),            # excludes 0 on the paper's side (lower)
    (0.01, 0.09, 0.04, "disagrees"),
    (-0.02, 0.03, 0.04, "smaller than the paper's effect"),  # inside +-0.04: rules it out
    (-0.05, 0.03, 0.04, "underpowered"),       # spans 0 and reaches past the paper's effect
    (-0.02, 0.03, None, "underpowered"),       # no paper effect to hold it against
])
def test_resolve_verdict_says_what_an_interval_rules_out(low, high, effect, verdict):
    assert stats.resolve_verdict(low, high, -1, effect, n=3) == verdict


def test_tost_and_the_interval_rule_agree():
    """statsmodels' paired TOST at 2.5 % per side is the 95 % t interval lying inside the
    margin: the two rules give the same verdict on every draw."""
    rng = np.random.default_rng(0)
    for _ in range(200):
        diffs = rng.normal(rng.uniform(-0.03, 0.03), rng.uniform(0.001, 0.03), size=4)
        ci = stats.paired_interval(diffs, np.zeros(4))
        by_tost = stats.resolve_verdict(ci.low, ci.high, -1, 0.04, ci.n, diffs)
        by_interval = stats.resolve_verdict(ci.low, ci.high, -1, 0.04, ci.n)
        assert by_tost == by_interval
    assert stats.resolution_text(-0.02, 0.04, 0.017, " nats") == (
        "resolves +-0.03 nats (the paper's effect: 0.017 nats)")


def test_seeds_for_halfwidth_by_hand():
    # t(0.975, 2) = 4.303: 3 seeds resolve 4.303 * 0.01 / sqrt(3) = 0.0248
    assert stats.seeds_for_halfwidth(0.01, 0.025) == 3
    assert stats.seeds_for_halfwidth(0.01, 0.0248) == 4
    assert stats.seeds_for_halfwidth(0.0, 0.01) == 2
    # the numbers written into config/config.yaml from the 2-seed mini of b3da731 (nats)
    assert [stats.seeds_for_halfwidth(sd, e) for sd, e in
            [(0.074, 0.0400), (0.0247, 0.0168), (0.0119, 0.0086), (0.0048, 0.0400),
             (0.0206, 0.0400)]] == [16, 11, 10, 3, 4]
    with pytest.raises(ValueError):
        stats.seeds_for_halfwidth(0.01, 0.0)


def test_the_verdict_type_lists_exactly_the_words_the_rules_make():
    import typing

    from lsa import claims
    from lsa.claims import CONTROL_ORDER, VERDICT_ORDER

    words = {*stats.PAPER_VERDICTS, *stats.CONTROL_OUTCOMES, stats.NOT_RUN,
             stats.PREMISE_NOT_MET}
    assert set(typing.get_args(stats.Verdict)) == words
    assert claims.Verdict is stats.Verdict  # one type: the claims carry what the rules return
    assert typing.get_type_hints(claims.Claim)["verdict"] is stats.Verdict
    for rule in (stats.sign_verdict, stats.resolve_verdict, stats.interval_verdict,
                 stats.majority_verdict, stats.equivalence_verdict, stats.control_outcome,
                 stats.audit_outcome, stats.threshold_outcome):
        assert typing.get_type_hints(rule)["return"] is stats.Verdict, rule.__name__
    assert set(VERDICT_ORDER) | set(CONTROL_ORDER) == words
    made = {stats.control_outcome(lo, hi, n, w) for w in (stats.HELPS, stats.MOVES)
            for lo, hi, n in ((-2, -1, 3), (1, 2, 3), (-1, 1, 3), (-1, 1, 1), (math.nan, 1, 0))}
    made |= {stats.threshold_outcome(lo, hi, 0.5) for lo, hi in ((1, 2), (-1, 0), (0, 1))}
    made |= {stats.audit_outcome(stats.sign_verdict(lo, hi, +1)) for lo, hi in ((1, 2), (-2, -1),
                                                                                 (-1, 1))}
    made |= {stats.resolve_verdict(lo, hi, +1, 0.5) for lo, hi in ((1, 2), (-2, -1), (-0.1, 0.1),
                                                                   (-1, 1))}
    assert made == words - {"inconclusive", stats.PREMISE_NOT_MET}  # Section 3's, the gates'
    assert stats.majority_verdict(1, 2, True) == "inconclusive"


def test_point_values_are_the_intervals_own_estimates():
    """``correlation_value`` and ``predictor_difference`` (the audits' fits on every unit) are
    exactly the estimates the bootstrap functions report, without their resamples."""
    rng = np.random.default_rng(3)
    table = pd.DataFrame({"a": rng.normal(size=12), "b": rng.normal(size=12),
                          "s": rng.normal(size=12)})
    table.loc[4, "b"] = np.nan  # a missing value drops that row from both
    assert stats.correlation_value(table["a"], table["s"]) == stats.correlation_interval(
        table["a"], table["s"], n_resamples=50)[0]
    comp = stats.compare_predictors(table, "a", "b", "s", n_resamples=50)
    assert stats.predictor_difference(table, "a", "b", "s") == comp.difference
    assert comp.difference == -(comp.r_better - comp.r_worse)
