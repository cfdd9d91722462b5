"""Section 4.1 (lsa.population): Table 1 rows and claims on fixed data with known answers."""

import numpy as np
import pandas as pd
import pytest

from lsa import population, stats


def models(n: int = 12, seed: int = 0) -> pd.DataFrame:
    """score = -misalignment exactly; train_loss unrelated noise; entropy = misalignment - J."""
    rng = np.random.default_rng(seed)
    mis = np.linspace(1.0, 3.0, n)
    jeff = rng.uniform(0, 0.1, n)
    return pd.DataFrame({"model": [f"m{i}" for i in range(n)], "misalignment": mis,
                         "jeffreys": jeff, "entropy": mis - jeff, "l2": mis / 10,
                         "train_loss": rng.normal(size=n), "score_2x": -mis,
                         "score_4x": -2 * mis, "held_out": [i % 3 == 0 for i in range(n)],
                         "babilong": np.nan})


def test_scores_are_the_window_scores_by_length():
    t = models().assign(score_8x=0.0)
    assert population.scores(t) == ["score_2x", "score_4x", "score_8x"]  # no babilong values


def test_table1_and_claims_on_a_known_population():
    t = models()
    rows = population.table1(t, ["misalignment", "train_loss", "jeffreys", "entropy"],
                             ["score_4x"], n_resamples=300)
    mis = rows[(rows.predictor == "misalignment") & (rows.method == "pearson")].iloc[0]
    assert mis.r == pytest.approx(-1.0) and mis.p_permutation < 0.01 and mis.n == 12
    comp = population.comparisons(t, ["score_4x"], [("misalignment", "train_loss"),
                                                    ("jeffreys", "entropy")], n_resamples=300)
    partial = population.partial_rows(t, ["score_4x"], n_resamples=300)
    ranking = stats.correlation(t["l2"], t["misalignment"], "spearman", n_resamples=300,
                                n_permutations=300).to_dict()
    claims = {c["id"]: c for c in population.claims(rows, comp, partial, rows.iloc[0:0],
                                                    ranking, "score_4x")}
    assert claims["T1.1"]["verdict"] == "agrees"       # r = -1, interval below 0
    assert claims["T1.3"]["verdict"] == "agrees"       # |r| 1 vs noise
    assert claims["T1.4"]["verdict"] == "disagrees"    # here the entropy carries it
    assert claims["T1.6"]["verdict"] == "agrees"       # L2 is SCE / 10: same ranking
    assert "T1.7" not in claims                        # no held-out rows given
    assert "-0.85" in claims["T1.1"]["paper"] and claims["T1.1"]["grade"] == "A"


def test_partial_correlation_removes_what_the_training_loss_explains():
    rng = np.random.default_rng(1)
    z = rng.normal(size=200)
    x, y = z + 0.1 * rng.normal(size=200), z + 0.1 * rng.normal(size=200)
    r, low, high = stats.partial_correlation_ci(x, y, z, n_resamples=300)
    assert stats.correlation(x, y, n_resamples=100, n_permutations=100).r > 0.95
    assert low <= r <= high and abs(r) < 0.25  # independent noise once z is removed
