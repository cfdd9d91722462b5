"""Tables and verdicts of the fine-tuning sections, on hand-made runs."""

import math

import pandas as pd
import pytest

from lsa import analysis


def runs(values):
    """values: {(method, alpha, seed): ppl_long}"""
    return pd.DataFrame([{"method": m, "alpha": a, "seed": s, "ppl_long": v,
                          "ppl_growth": 1 + v / 1000, "misalignment": v / 10}
                         for (m, a, s), v in values.items()])


def test_paired_effect_by_hand():
    df = runs({("pi", 0.0, 0): 100.0, ("pi", 0.1, 0): 90.0,
               ("pi", 0.0, 1): 110.0, ("pi", 0.1, 1): 106.0})
    row = analysis.paired_effect(df, "ppl_long", 0.1).iloc[0]
    assert row["delta"] == pytest.approx(-7.0)          # mean of -10 and -4
    assert row["noise"] == pytest.approx(math.sqrt(18))  # std of (-10, -4), ddof 1
    assert row["wins"] == 2 and row["seeds"] == 2
    assert row["baseline"] == 105.0 and row["regularized"] == 98.0


@pytest.mark.parametrize("delta, noise, seeds, verdict", [
    (-7.0, 4.2, 2, "agrees"), (-3.0, 4.2, 2, "inconclusive"), (5.0, 4.2, 2, "disagrees"),
    (-0.1, float("nan"), 1, "agrees"), (0.1, float("nan"), 1, "disagrees"),
    (float("nan"), 1.0, 0, "not run"),
])
def test_direction_verdict(delta, noise, seeds, verdict):
    assert analysis.direction_verdict(delta, noise, seeds) == verdict


def test_extension_claims_set_the_paper_beside_ours():
    df = runs({("clex", 0.0, 0): 100.0, ("clex", 0.1, 0): 90.0,
               ("yarn", 0.0, 0): 100.0, ("yarn", 0.1, 0): 120.0})
    claims = {c["claim"]: c for c in analysis.extension_claims(df)}
    clex = claims["CE + 0.1 misalign lowers long-window perplexity (clex)"]
    assert clex["verdict"] == "agrees" and "6.12 -> 5.88" in clex["paper"]
    assert clex["grade"] == "A"
    yarn = claims["CE + 0.1 misalign lowers long-window perplexity (yarn)"]
    assert yarn["verdict"] == "disagrees" and yarn["grade"] == "?"
    growth = claims["The regularizer flattens the growth of perplexity with length (clex)"]
    assert growth["verdict"] == "agrees" and "1.100 -> 1.090" in growth["ours"]
    assert len({c["id"] for c in claims.values()}) == len(claims)  # ids are unique


def test_babilong_tables_and_claims_by_hand():
    rows = []
    for seed in (0, 1):
        for alpha, correct in ((0.0, [1, 1, 0, 0]), (0.1, [1, 1, 1, 0])):
            for multiple in (1, 2):
                for i, c in enumerate(correct):
                    rows.append({"alpha": alpha, "loss": analysis.loss_label(alpha),
                                 "seed": seed, "task": "qa1", "multiple": multiple,
                                 "length": 256 * multiple, "depth": None, "index": i,
                                 "correct": bool(c)})
    acc = pd.DataFrame(rows)
    table = analysis.accuracy_table(acc, ["multiple"])
    assert set(table["accuracy"]) == {50.0, 75.0} and set(table["seeds"]) == {2}
    claims = {c["id"]: c for c in analysis.babilong_claims(acc, pd.DataFrame())}
    # 8 answers per cell: the intervals are too wide for a verdict (tests/test_babilong.py)
    assert claims["S5.4.gate.qa1"]["verdict"] == "inconclusive"  # 50 %, Wilson 22-78 %
    assert claims["S5.4.len2x"]["verdict"] == "inconclusive"     # +25 points, CI -12 to +52
    assert "42.4 -> 44.4" in claims["S5.4.len2x"]["paper"]


def test_misalignment_claim_reports_the_papers_positions_and_every_position():
    df = runs({("pi", 0.0, 0): 100.0, ("pi", 0.1, 0): 90.0})
    df["misalignment_all"] = [5.0, 6.0]  # every overlap position: higher after, unlike paper's
    claims = {c["claim"]: c for c in analysis.extension_claims(df)}
    mis = claims["The regularizer lowers the long-short misalignment (pi)"]
    assert "L_misalign 10 -> 9" in mis["ours"] and mis["verdict"] == "agrees"
    assert "every overlap position 5 -> 6" in mis["evidence"] and ">= l_train / 2" in mis["evidence"]
