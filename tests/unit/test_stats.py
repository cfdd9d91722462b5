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
    assert stats.sign_verdict(iv.low, iv.high, -1, n=iv.n) == "inconclusive"
    empty = stats.paired_interval([], [])
    assert stats.sign_verdict(empty.low, empty.high, -1, n=empty.n) == "not run"


def test_sign_verdict_of_a_seed_interval():
    lower = stats.paired_interval([1.0, 1.1, 0.9, 1.0], [2.0, 2.0, 2.0, 2.1])  # clearly lower
    assert lower.excludes_zero() and lower.high < 0
    assert stats.sign_verdict(lower.low, lower.high, -1, n=lower.n) == "agrees"
    assert stats.sign_verdict(lower.low, lower.high, +1, n=lower.n) == "disagrees"
    noisy = stats.paired_interval([1.0, 3.0, 0.0], [2.0, 2.0, 2.0])
    assert stats.sign_verdict(noisy.low, noisy.high, -1, n=noisy.n) == "inconclusive"
    with pytest.raises(ValueError, match="paper_sign"):
        stats.sign_verdict(lower.low, lower.high, 0, n=lower.n)


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


def _inputs(seed: int, count: int):
    """Pairs like those the resamples of Table 1 see: 2 to 60 models on scales from 1e-3 to
    1e3, correlated, some drawn with replacement (a bootstrap's repeats), some rounded or on
    three levels (ties), some constant."""
    rng = np.random.default_rng(seed)
    for k in range(count):
        n = int(rng.integers(2, 61))
        x = rng.normal(size=n) * 10 ** rng.uniform(-3, 3)
        y = rng.normal(size=n) + 0.5 * x
        if k % 3 == 0:
            pick = rng.integers(0, n, n)
            x, y = x[pick], y[pick]
        if k % 7 == 0:
            x = np.round(x, 1)
        if k % 11 == 0:
            y = rng.integers(0, 3, n).astype(float)
        if k % 50 == 0:
            x = np.full(n, 2.5)
        yield x, y


def test_pearson_and_spearman_are_scipys_to_rounding():
    """The fast correlations the resamples call are scipy's to a few units in the last place
    (their sums of products are correctly rounded where scipy's are BLAS's; NaN where scipy's
    is: a constant input), and the ranks are ``rankdata``'s."""
    import warnings

    from scipy import stats as sp

    def same(a, b):
        return math.isclose(a, b, rel_tol=1e-13, abs_tol=1e-15) or (math.isnan(a)
                                                                     and math.isnan(b))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scipy warns on the constant inputs
        for x, y in _inputs(0, 5000):
            assert np.array_equal(stats.average_ranks(x), sp.rankdata(x))
            assert same(stats.pearson(x, y), float(sp.pearsonr(x, y).statistic)), (x, y)
            assert same(stats.spearman(x, y), float(sp.spearmanr(x, y).statistic)), (x, y)
    assert stats.pearson(np.array([1.0, 2.0]), np.array([3.0, 1.0])) == -1.0
    assert stats.spearman(np.array([1.0, 2.0, 2.0]), np.array([1.0, 2.0, 3.0])) == \
        pytest.approx(math.sqrt(3) / 2)  # ranks (1, 2.5, 2.5) against (1, 2, 3), by hand


def test_dot_is_the_exact_sum_rounded_once_in_any_order():
    """``dot`` is the exact sum of the exact products rounded once (fractions by hand), so no
    order of summation, the kernel's or the rows', can change it; ``slope`` is
    ``np.polyfit``'s line to rounding, and the partial correlation's residuals are
    ``lstsq``'s."""
    from fractions import Fraction

    rng = np.random.default_rng(3)
    for n in (1, 2, 17, 300):
        x, y = rng.normal(size=n) * 1e3, rng.normal(size=n) * 1e-3
        exact = sum(Fraction(float(a * b)) for a, b in zip(x, y))  # each product rounded once
        assert stats.dot(x, y) == float(exact)
        order = rng.permutation(n)
        assert stats.dot(x[order], y[order]) == stats.dot(x, y)
    x = rng.normal(size=40)
    y = 0.3 * x + rng.normal(size=40)
    assert stats.slope(x, y) == pytest.approx(tuple(np.polyfit(x, y, 1)), rel=1e-12)
    z = rng.normal(size=40)
    design = np.column_stack([np.ones_like(z), z])
    res = [v - design @ np.linalg.lstsq(design, v, rcond=None)[0] for v in (x, y)]
    assert stats.partial_correlation(x, y, z) == pytest.approx(stats.pearson(*res), rel=1e-12)
    flat = np.full(40, 2.0)  # lstsq's minimum-norm fit on a constant z: the plain correlation
    assert stats.partial_correlation(x, y, flat) == pytest.approx(stats.pearson(x, y))


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


@pytest.mark.parametrize("low, high, sign, effect, verdict", [
    # lower is the paper's direction (sign -1), its effect 0.04
    (-0.09, -0.01, -1, 0.04, stats.AGREES),            # excludes 0, holds the paper's effect
    (-0.03, -0.01, -1, 0.04, stats.AGREES_SMALLER),    # excludes both, between them
    (-0.20, -0.10, -1, 0.04, stats.AGREES_LARGER),     # beyond the paper's effect
    (-0.09, -0.01, -1, None, stats.AGREES_NO_SIZE),    # the paper gives no size
    (0.01, 0.09, -1, 0.04, stats.DISAGREES),           # excludes 0 on the other side
    (-0.02, 0.03, -1, 0.04, stats.SMALLER),            # holds 0, excludes the paper's effect
    (-0.05, 0.03, -1, 0.04, stats.UNDERPOWERED),       # holds both
    (-0.02, 0.03, -1, None, stats.UNDERPOWERED),       # holds 0, no effect to hold it against
    (-0.04, -0.01, -1, -0.04, stats.AGREES),           # the effect's sign is the paper's side
    # the three cases of issue 45, as the snapshots had them
    (-0.75, -0.02, -1, -0.85, stats.AGREES_SMALLER),   # T1.1 mini-full: excludes -0.85
    (-12.5, 6.2, +1, 8.0, stats.SMALLER),              # BABILong depth 50 %: one-sided
    (-15.0, 0.0, +1, 5.0, stats.SMALLER),              # BABILong depth 75 %
    (-0.00006, 0.125, -1, -0.017, stats.SMALLER),      # mini S5.2: rules the paper out
])
def test_every_cell_of_the_verdict_rule(low, high, sign, effect, verdict):
    assert stats.resolve_verdict(low, high, sign, effect, n=3) == verdict


def test_no_interval_says_so():
    assert stats.resolve_verdict(-0.1, -0.01, -1, 0.04, n=1) == stats.UNDERPOWERED  # one seed
    assert stats.resolve_verdict(math.nan, math.nan, -1, 0.04) == stats.UNDERPOWERED
    assert stats.resolve_verdict(math.nan, math.nan, -1, 0.04, n=0) == stats.NOT_RUN
    assert stats.resolution_text(-0.02, 0.04, 0.017, " nats") == (
        "resolves +-0.03 nats (the paper's effect: 0.017 nats)")


def test_edge_distance_by_hand():
    # T1.1 of mini-full: the upper end lies 0.02 from 0, the half-width is 0.365
    assert stats.edge_distance(-0.75, -0.02, -1, -0.85) == pytest.approx(0.02 / 0.365)
    assert stats.edge_distance(-0.75, -0.02, -1, -0.85) < stats.EDGE
    # the nearest boundary may be the paper's effect: [1, 3] against d = 3.1, half-width 1
    assert stats.edge_distance(1.0, 3.0, +1, 3.1) == pytest.approx(0.1)
    assert stats.edge_distance(1.0, 3.0, +1, None) == pytest.approx(1.0)  # 0 alone
    assert math.isnan(stats.edge_distance(math.nan, 1.0, +1, None))


def test_interval_p_inverts_the_interval():
    from scipy import stats as sps

    z, t2 = sps.norm.ppf(0.975), sps.t.ppf(0.975, df=2)
    assert stats.interval_p(0.0, 2 * z) == pytest.approx(0.05)        # normal: ends at 0
    assert stats.interval_p(0.0, 2 * t2, n=3) == pytest.approx(0.05)  # t, 2 df
    assert stats.interval_p(-1.0, 1.0) == pytest.approx(1.0)
    assert stats.interval_p(1.0, 3.0) < 0.05 < stats.interval_p(-0.1, 3.0)
    assert math.isnan(stats.interval_p(1.0, 3.0, n=1))


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
    for rule in (stats.sign_verdict, stats.resolve_verdict,
                 stats.majority_verdict, stats.equivalence_verdict, stats.control_outcome,
                 stats.audit_outcome, stats.threshold_outcome):
        assert typing.get_type_hints(rule)["return"] is stats.Verdict, rule.__name__
    assert set(VERDICT_ORDER) | set(CONTROL_ORDER) == words
    made = {stats.control_outcome(lo, hi, n, w) for w in (stats.HELPS, stats.MOVES)
            for lo, hi, n in ((-2, -1, 3), (1, 2, 3), (-1, 1, 3), (-1, 1, 1), (math.nan, 1, 0))}
    made |= {stats.threshold_outcome(lo, hi, 0.5) for lo, hi in ((1, 2), (-1, 0), (0, 1))}
    made |= {stats.audit_outcome(stats.sign_verdict(lo, hi, +1)) for lo, hi in ((1, 2), (-2, -1),
                                                                                 (-1, 1))}
    made |= {stats.resolve_verdict(lo, hi, +1, e) for lo, hi, e in (
        (1, 2, 0.5), (0.1, 1, 0.5), (0.1, 0.2, 0.5), (0.1, 0.2, None), (-2, -1, 0.5),
        (-0.1, 0.1, 0.5), (-1, 1, 0.5))}
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


def _claim(id, verdict, p, kind="paper", edge=0.5):
    from lsa.claims import Claim

    return Claim(id=id, section="s", claim=id, paper="-", grade="A", ours="-", verdict=verdict,
                 kind=kind, low=-1.0, high=1.0, edge=edge, p=p).to_dict()


def test_holm_by_hand_within_each_family_and_the_one_verdict_rule():
    """Issue 74, item 3: Holm's correction within each declared family (the paper's claims,
    extensions, ...), never across them; controls and rows without an interval outside; a
    verdict that excludes 0 at a Holm p of 0.05 or more reads as an interval that holds 0
    (smaller than the paper's effect where it still excludes it, else underpowered), its
    evidence keeping the verdict it replaced; an equivalence claim's agrees reads underpowered."""
    from lsa.claims import (
        claims_table,
        family_verdict,
        holm_sentence,
        moved_by_family_rule,
        with_family_rule,
        with_holm,
    )

    def judged(id, verdict, p, **more):  # an interval [-1, 1] read in the paper's direction
        return {**_claim(id, verdict, p), "direction": 1.0, **more}

    table = with_holm(claims_table([
        judged("a", stats.AGREES, 0.01), judged("b", stats.DISAGREES, 0.04),
        judged("c", stats.AGREES_NO_SIZE, 0.03), judged("d", stats.SMALLER, math.nan),
        judged("e", stats.PREMISE_NOT_MET, 0.001), _claim("f", "helps", 0.001, kind="control"),
        judged("x", stats.DISAGREES, 0.02, origin="extension"),
        judged("y", stats.AGREES, 0.04, origin="extension")]))
    holm = table.set_index("id")["p_holm"]
    # the paper's family, sorted 0.01, 0.03, 0.04: x3, x2, x1, then running maximum
    assert holm[["a", "c", "b"]].tolist() == pytest.approx([0.03, 0.06, 0.06])
    assert holm[["x", "y"]].tolist() == pytest.approx([0.04, 0.04])  # their own family of two
    assert holm[["d", "e", "f"]].isna().all()
    ruled = with_family_rule(table).set_index("id")
    # b and c fail Holm: b (interval [-1, 1] turned to the paper's side, no size) reads
    # underpowered; x and y stand in their own family; a stands
    assert ruled["verdict"][["a", "b", "c", "x", "y"]].tolist() == [
        stats.AGREES, stats.UNDERPOWERED, stats.UNDERPOWERED, stats.DISAGREES, stats.AGREES]
    assert "[disagrees before Holm's correction in the paper's claims (Holm p 0.06)]" in \
        ruled.loc["b", "evidence"]
    assert moved_by_family_rule(ruled.reset_index()) == ["b", "c"]
    assert with_family_rule(with_holm(ruled.reset_index()))["verdict"].tolist() == \
        ruled["verdict"].tolist()  # the rule applied twice changes nothing more
    text = holm_sentence(ruled.reset_index())
    assert "the paper's claims 3, the extensions 2" in text
    assert text.endswith("2 did not and read otherwise: b, c")
    # by hand: an interval [+0.02, +0.30] on the paper's side (direction -1: [-0.30, -0.02]),
    # paper effect 0.5: agrees in direction, smaller; failing Holm its end 0.30 < 0.5 still
    # excludes the paper's effect: smaller than the paper's effect
    assert family_verdict(stats.AGREES_SMALLER, -0.30, -0.02, -1, -0.5) == stats.SMALLER
    assert family_verdict(stats.DISAGREES, 0.05, 0.2, -1, -0.5) == stats.SMALLER
    assert family_verdict(stats.AGREES, -0.6, -0.4, -1, -0.5) == stats.UNDERPOWERED
    assert family_verdict(stats.SMALLER, -0.2, 0.3, -1, -0.5) == stats.SMALLER  # not decisive
    assert family_verdict(stats.AGREES, -0.01, 0.01, math.nan, math.nan) == stats.UNDERPOWERED
    assert family_verdict(stats.DISAGREES, 6.0, 9.0, math.nan, math.nan) == stats.DISAGREES


def test_judged_carries_the_numbers_and_display_marks_the_edge():
    from lsa.claims import Claim, claims_table, display, judged

    fields = judged(-0.75, -0.02, -1, -0.85, estimate=-0.39)
    assert fields["verdict"] == stats.AGREES_SMALLER and fields["paper_effect"] == -0.85
    assert fields["edge"] < stats.EDGE and fields["p"] < 0.05
    assert (fields["estimate"], fields["half_width"], fields["confidence"],
            fields["direction"]) == (-0.39, 0.365, 0.95, -1)
    # the file's own columns give the verdict back
    assert stats.resolve_verdict(fields["low"], fields["high"], fields["direction"],
                                 fields["paper_effect"]) == fields["verdict"]
    no_size = judged(-0.1, -0.01, -1, None)
    assert math.isnan(no_size["paper_effect"]) and math.isnan(no_size["estimate"])
    row = Claim(id="T1.1", section="s", claim="c", paper="-", grade="A", ours="-",
                **fields).to_dict()
    shown = display(claims_table([row]))
    assert shown["verdict"].iloc[0] == stats.AGREES_SMALLER + " (edge)"
    assert "low" not in shown and "p (Holm)" not in shown
    assert shown["p"].iloc[0] == "0.039"  # z = 0.385 / (0.365 / 1.96) = 2.07


def test_a_cluster_bootstrap_counts_a_cluster_once():
    """Each point copied three times: resampling the copies as one cluster gives the interval
    of the points themselves (r is the same on the copies); resampling rows as if independent
    gives a narrower one (issue 45: 24 of Table 1's units are copies of one trained model)."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=12)
    y = 0.5 * x + rng.normal(size=12)
    r, one = stats.correlation_interval(x, y, n_resamples=500)
    xs, ys, groups = np.repeat(x, 3), np.repeat(y, 3), np.repeat(np.arange(12), 3)
    r3, three = stats.correlation_interval(xs, ys, n_resamples=500, groups=groups)
    assert (r3, three.low, three.high, three.p) == pytest.approx((r, one.low, one.high, one.p))
    _, rows = stats.correlation_interval(xs, ys, n_resamples=500)
    assert rows.high - rows.low < 0.8 * (one.high - one.low)
    # singletons: the cluster bootstrap is the row bootstrap
    assert stats.correlation_interval(x, y, n_resamples=300, groups=np.arange(12)) == \
        pytest.approx(stats.correlation_interval(x, y, n_resamples=300))


@pytest.mark.parametrize("clustered", [False, True])
def test_a_bootstraps_p_is_its_own_interval_inverted(clustered):
    """One procedure for an interval and its p (issue 61): p < 0.05 exactly when the 95 %
    interval excludes 0, and the same bootstrap at level 1 - p has 0 at an end (BCa and its
    percentile fallback alike), on skewed data and unequal clusters."""
    rng = np.random.default_rng(7)
    seen = set()
    for trial in range(12):
        n = 14
        x = rng.exponential(size=n)
        y = (trial - 6) * 0.08 * x + rng.exponential(size=n)
        groups = np.r_[np.zeros(6), np.arange(1, n - 5)] if clustered else None
        r, boot = stats.correlation_interval(x, y, n_resamples=400, seed=trial, groups=groups)
        assert 0 <= boot.p <= 1 and 0 <= boot.position <= 1
        assert (boot.p < 0.05) == (not boot.low <= 0 <= boot.high), (trial, boot)
        seen.add(boot.p < 0.05)
        if 0.002 < boot.p < 0.998:  # at level 1 - p, one end of the interval is 0
            again = stats._bootstrap(stats._corr("pearson"), (x, y), 400, trial, 1 - boot.p,
                                     groups)
            assert min(abs(again.low), abs(again.high)) < 1e-6, (trial, again)
    assert seen == {True, False}  # both sides of 0.05 were tried
    # the percentile fallback: p from the finite resamples' own ranks
    dist = np.array([-1.0, 0.5, 1.0, 2.0, 3.0])
    # 0 lies 1/1.5 of the way from -1 to 0.5, the 1st to 2nd of 5 sorted values: u0 = (2/3) / 4
    assert stats._inverted_p(dist, None, None) == pytest.approx(2 * (1 / 1.5) / 4)


def test_table1_clusters_the_base_model_and_its_rope_copies():
    import pandas as pd

    from lsa.sections.correlation.tables import clusters

    units = pd.DataFrame({"unit": ["base", "base pi x2", "base yarn x4", "eabf CE", "pi CE"],
                          "kind": ["base model", "base + RoPE, no fine-tuning",
                                   "base + RoPE, no fine-tuning", "fine-tuning run",
                                   "fine-tuning run"]})
    assert clusters(units).tolist() == ["base model"] * 3 + ["eabf CE", "pi CE"]


def test_power_planned_for_power_by_hand():
    from scipy import stats as sps

    # 2 seeds (df 1): the 80 % upper bound of sd is sd * sqrt(1 / chi2.ppf(0.2, 1)) = 3.95 sd
    assert stats.sd_upper_bound(1.0, 1) == pytest.approx(math.sqrt(1 / sps.chi2.ppf(0.2, 1)))
    assert stats.sd_upper_bound(1.0, 1) == pytest.approx(3.947, abs=0.001)
    assert math.isnan(stats.sd_upper_bound(1.0, 0))
    # effect = sd: a paired t-test needs 10 pairs for 80 % power at 5 % (power 0.803; 9: 0.76)
    assert stats.seeds_for_power(1.0, 1.0) == 10
    assert stats.seeds_for_power(1.0, -1.0) == 10       # the sign does not matter
    assert stats.seeds_for_power(0.0, 1.0) is None


def test_variance_components_by_hand():
    """Groups [1, 3] and [5, 7]: within-group mean square (2 + 2) / 2 = 2; group means 2 and
    6 around 4 give a between mean square 2 x (4 + 4) / 1 = 16; between = sqrt((16 - 2) / 2)."""
    from lsa.stats import variance_components

    c = variance_components([1, 3, 5, 7], ["a", "a", "b", "b"])
    assert c.within == pytest.approx(math.sqrt(2)) and c.between == pytest.approx(math.sqrt(7))
    assert (c.df_between, c.df_within, c.groups, c.per_group) == (1, 2, 2, 2.0)
    # the upper bound: 16 x 1 / chi2(0.2, 1) less 2, over 2
    from scipy import stats as st
    assert c.between_upper(0.8) == pytest.approx(
        math.sqrt((16 / st.chi2.ppf(0.2, 1) - 2) / 2))
    flat = variance_components([1, 3, 1, 3], ["a", "a", "b", "b"])   # equal group means
    assert flat.between == 0.0 and flat.between_upper() == 0.0     # within the noise
    assert math.isnan(variance_components([1, 2], ["a", "a"]).between)   # one group


def test_variance_components_match_statsmodels_anova_for_unequal_groups():
    """Unequal groups: the mean squares are one-way ANOVA's (statsmodels), n0 the usual
    (N - sum n_i^2 / N) / (k - 1)."""
    import pandas as pd
    import statsmodels.api as sm
    from statsmodels.formula.api import ols

    from lsa.stats import variance_components

    rng = np.random.default_rng(0)
    groups = np.repeat(["a", "b", "c", "d"], [2, 3, 4, 5])
    values = rng.normal(size=groups.size) + np.repeat([0.0, 1.0, -1.0, 0.5], [2, 3, 4, 5])
    table = sm.stats.anova_lm(ols("v ~ C(g)", pd.DataFrame({"v": values, "g": groups})).fit())
    ms_b, ms_w = table["mean_sq"].iloc[0], table["mean_sq"].iloc[1]
    n0 = (14 - (4 + 9 + 16 + 25) / 14) / 3
    c = variance_components(values, groups)
    assert c.ms_between == pytest.approx(ms_b) and c.ms_within == pytest.approx(ms_w)
    assert c.between == pytest.approx(math.sqrt(max(ms_b - ms_w, 0) / n0))
    assert c.n0 == pytest.approx(n0)


def test_groups_for_power_reduces_to_seeds_for_power():
    """No group effect: groups of m members are one sample of sd / sqrt(m) each; with a group
    effect the members cannot buy it away (many members: the between SD alone)."""
    from lsa.stats import groups_for_power, seeds_for_power

    assert groups_for_power(0.5, 0.0, 1.0, 4) == seeds_for_power(0.5, 0.5)
    assert groups_for_power(0.5, 0.5, 1.0, 10 ** 6) == seeds_for_power(0.5, 0.5)
    assert groups_for_power(0.5, 0.5, 1.0, 1) > groups_for_power(0.5, 0.5, 1.0, 4)
    assert groups_for_power(0.5, math.nan, 1.0, 4) is None


def test_the_nested_interval_is_a_t_over_group_means():
    """Each group weighs alike, whatever its members: means 2 (of 1, 3) and 6 (of 4, 6, 8) ->
    4 +- t(0.975, 1) x sd(2, 6) / sqrt(2) = 4 +- 12.706 x 2.828 / 1.414."""
    from scipy import stats as st

    from lsa.stats import nested_t_interval

    mean, low, high = nested_t_interval([1, 3, 4, 6, 8], ["a", "a", "b", "b", "b"])
    half = st.t.ppf(0.975, 1) * math.sqrt(8) / math.sqrt(2)
    assert mean == pytest.approx(4.0) and (low, high) == pytest.approx((4 - half, 4 + half))
    assert math.isnan(nested_t_interval([1, 2], ["a", "a"])[1])


def test_runs_pair_by_base_and_seed_and_the_interval_follows_the_bases():
    """Pairs are (base model, seed) present on both sides; on two bases the interval is the t
    over the base means, on one base the paired t over seeds."""
    import pandas as pd
    from scipy import stats as st

    from lsa.stats import paired_by_base, paired_interval

    idx = pd.MultiIndex.from_tuples([(0, 0), (0, 1), (1, 0), (1, 1), (1, 2)],
                                    names=["base_seed", "seed"])
    changed = pd.Series([2.0, 4.0, 7.0, 9.0, 11.0], index=idx)
    baseline = pd.Series([1.0, 1.0, 1.0, 1.0], index=idx[:4])  # (1, 2) has no baseline
    p = paired_by_base(changed, baseline)
    assert list(p.diff) == [1.0, 3.0, 6.0, 8.0] and (p.bases, p.seeds) == (2, 2)
    assert p.per_base.to_dict() == {0: 2.0, 1: 7.0}
    # base means 2 and 7: 4.5 +- t(0.975, 1) x sd(2, 7) / sqrt(2)
    half = st.t.ppf(0.975, 1) * math.sqrt(12.5) / math.sqrt(2)
    mean, low, high, n = p.interval()
    assert n == 2 and mean == pytest.approx(4.5)
    assert (low, high) == pytest.approx((4.5 - half, 4.5 + half))
    one = paired_by_base(changed.xs(1, level="base_seed", drop_level=False),
                         baseline.xs(1, level="base_seed", drop_level=False))
    ci = paired_interval([7.0, 9.0], [1.0, 1.0])
    assert one.bases == 1 and math.isnan(one.nested[1])
    assert one.interval() == pytest.approx((ci.mean, ci.low, ci.high, 2))
    by_seed = paired_by_base(pd.Series([3.0, 5.0], index=[0, 1]), pd.Series([1.0, 1.0]))
    assert by_seed.interval()[0] == pytest.approx(3.0) and by_seed.bases == 1


def test_bca_ends_are_scipys_bca_to_rounding_on_untied_data():
    """The BCa ends computed from scipy's resamples in a fixed order are scipy's own BCa
    interval (same seed, same resamples) to rounding, where no resampled correlation can equal
    the estimate (continuous data: BCa's bias correction counts the same resamples)."""
    import warnings

    from scipy import stats as sp

    rng = np.random.default_rng(11)
    x = rng.normal(size=25)
    y = 0.5 * x + rng.normal(size=25)
    r, ours = stats.correlation_interval(x, y, "pearson", n_resamples=999, seed=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = sp.bootstrap((x, y), stats.pearson, paired=True, vectorized=False,
                              n_resamples=999, method="BCa",
                              random_state=np.random.default_rng(4)).confidence_interval
    assert ours.low == pytest.approx(theirs.low, rel=1e-12)
    assert ours.high == pytest.approx(theirs.high, rel=1e-12)
