"""Section 4.1 (lsa.sections.correlation.table1): Table 1 rows and claims on fixed data with
known answers."""

import numpy as np
import pandas as pd
import pytest

from lsa import stats
from lsa.sections.correlation import table1 as population


def models(n: int = 12, seed: int = 0) -> pd.DataFrame:
    """score = -misalignment exactly; train_loss unrelated noise; entropy = misalignment - J."""
    rng = np.random.default_rng(seed)
    mis = np.linspace(1.0, 3.0, n)
    jeff = rng.uniform(0, 0.1, n)
    return pd.DataFrame({"model": [f"m{i}" for i in range(n)], "misalignment": mis,
                         "jeffreys": jeff, "entropy": mis - jeff, "l2": mis / 10,
                         "train_loss": rng.normal(size=n), "score_2x": -mis,
                         "score_4x": -2 * mis, "babilong": np.nan,
                         "method": ["pi", "yarn", "clex", "none"] * (n // 4)})


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
    claims = {c["id"]: c for c in population.claims(rows, comp, partial, pd.DataFrame(),
                                                    ranking, "score_4x", 300)}
    assert claims["T1.1"]["verdict"] == "agrees"       # r = -1, interval below 0
    assert claims["T1.3"]["verdict"] == "agrees"       # |r| 1 vs noise
    assert claims["T1.4"]["verdict"] == "fails"        # here the entropy carries it
    assert claims["T1.6"]["verdict"] == "passes"       # L2 is SCE / 10: same ranking
    assert {claims[c]["kind"] for c in ("T1.4", "T1.5", "T1.6")} == {"control"}  # audits
    assert {claims[c]["kind"] for c in ("T1.1", "T1.2", "T1.3")} == {"paper"}
    assert "T1.7" not in claims                        # no leave-one-out rows given
    assert "the floor of 2000" not in claims["T1.1"]["ours"]  # 300 permutations here
    assert "< 0.0066 (the floor of 300 permutations)" in claims["T1.1"]["ours"]
    assert "-0.85" in claims["T1.1"]["paper"] and claims["T1.1"]["grade"] == "A"


def test_partial_correlation_removes_what_the_training_loss_explains():
    rng = np.random.default_rng(1)
    z = rng.normal(size=200)
    x, y = z + 0.1 * rng.normal(size=200), z + 0.1 * rng.normal(size=200)
    r, low, high = stats.partial_correlation_ci(x, y, z, n_resamples=300)
    assert stats.correlation(x, y, n_resamples=100, n_permutations=100).r > 0.95
    assert low <= r <= high and abs(r) < 0.25  # independent noise once z is removed


def test_units_average_seeds_and_the_primary_view_keeps_untrained_unexcluded_models():
    rows = []
    for unit, trained, alpha, ppl, seeds in [("pi CE", "none", 0.0, 100.0, (0, 1)),
                                             ("pi SCE 0.1", "sce", 0.1, 110.0, (0, 1)),
                                             ("pi SCE 1", "sce", 1.0, 900.0, (0,)),
                                             ("base", "none", 0.0, 120.0, (None,)),
                                             ("pi CE, 5 steps", "none", 0.0, 500.0, (0,))]:
        for seed in seeds:
            rows.append({"model": f"{unit}/{seed}", "unit": unit, "kind": "k",
                         "trained_on": trained, "method": "pi", "setting": unit, "alpha": alpha,
                         "seed": seed, "ppl_1x": ppl, "misalignment": 1.0 + (seed or 0),
                         "score_beyond_4x": -ppl / 100 - (seed or 0)})
    table = pd.DataFrame(rows)
    base = table["unit"] == "base"
    table["excluded"] = table["ppl_1x"] > 3.0 * float(table.loc[base, "ppl_1x"].iloc[0])
    views = population.views(table, 0.1, ["score_beyond_4x"])
    assert list(views["primary"]["unit"]) == ["pi CE", "base"]  # 360 < 500: excluded
    pi = views["primary"].set_index("unit").loc["pi CE"]
    assert pi["seeds"] == 2 and pi["misalignment"] == 1.5  # seeds averaged, kept as a count
    assert pi["score_beyond_4x_seed_sd"] == pytest.approx(np.std([-1.0, -2.0], ddof=1))
    assert list(views["with_regularized"]["unit"]) == ["pi CE", "pi SCE 0.1", "base"]
    assert len(views["all"]) == 5
    comp = population.composition(table)
    assert comp["excluded"].sum() == 2 and comp["units"].sum() == 5


def test_the_main_score_is_the_nll_beyond_the_window():
    cols = population.scores(pd.DataFrame(columns=["score_2x", "score_4x", "score_beyond_2x",
                                                   "score_beyond_4x", "score_copy_4x"]))
    assert population.main_score(cols) == "score_beyond_4x"


def test_a_reference_model_is_decomposed_on_its_own_tokens(out_root, monkeypatch, tokenizer):
    """SmolLM2's job with a small stand-in model: the metric and its parts at the reference
    window, on its own tokenization of the test books, outside Table 1."""
    from lsa import jobs
    from lsa.config import load_config
    from lsa.models import scratch_llama
    from lsa.runs import runs_of

    def stand_in(dtype=None):
        return scratch_llama(len(tokenizer), 32, 1, 2, 64, 64,
                             eos_token_id=tokenizer.eos_token_id), tokenizer

    monkeypatch.setattr("lsa.models.load_smollm2", stand_in)
    pipe = load_config(profile="smoke", overrides={"profiles": {"smoke": {"population": {
        "reference_models": ["smollm2"], "reference_window": 32, "reference_samples": 4}}}})
    run = runs_of(pipe).probes["ref_smollm2"]
    assert run.needs == () and run.identity["reference"]["window"] == 32
    m = jobs.run_job(pipe, run, progress=False) and run.metrics()
    sce, parts = m["misalignment"]["mean"], m["jeffreys"]["mean"] + m["entropy"]["mean"]
    assert m["window"] == 32 and m["misalignment"]["n"] == 4
    assert sce == pytest.approx(parts, rel=1e-4)  # SCE = Jeffreys + H(p) + H(q)
    table = population.decomposition(pipe, pd.DataFrame())
    (row,) = table.to_dict(orient="records")
    assert row["model"] == "smollm2" and row["Jeffreys share"] == pytest.approx(
        m["jeffreys"]["mean"] / sce)
    for part, label in (("misalignment", "SCE"), ("jeffreys", "Jeffreys"),
                        ("entropy", "entropy"), ("top1_change", "top1_change")):
        assert row[f"{label} s.e."] == pytest.approx(m[part]["stderr"])  # every part
    assert population.population_table(pipe).empty  # not a Table 1 model


def test_within_method_slopes_need_three_units():
    t = pd.DataFrame({"method": ["pi"] * 3 + ["yarn"] * 2,
                      "misalignment": [1.0, 2.0, 3.0, 1.0, 2.0],
                      "train_loss": [5.0, 5.0, 5.0, 1.0, 2.0],
                      "score_beyond_4x": [-1.0, -3.0, -5.0, 0.0, 1.0]})
    rows = population.within_method(t, "score_beyond_4x")
    (row,) = rows.to_dict(orient="records")  # yarn has 2 units; pi's train_loss is constant
    assert (row["method"], row["predictor"], row["units"]) == ("pi", "misalignment", 3)
    assert row["slope"] == pytest.approx(-2.0) and row["r"] == pytest.approx(-1.0)


def test_the_narrative_says_which_part_carries_the_correlation_and_where_it_varies():
    """Entropy = score exactly (r -1 with the misalignment's sign); the Jeffreys part is large
    only for the four never-fine-tuned units and flat among the fine-tuning runs."""
    t = models(12).assign(kind=["base + RoPE, no fine-tuning"] * 4 + ["fine-tuning run"] * 8)
    t["jeffreys"] = [2.0, 2.5, 3.0, 3.5] + [0.01] * 4 + [0.02] * 4
    rows = population.table1(t, ["misalignment", "train_loss", "jeffreys", "entropy"],
                             ["score_4x"], n_resamples=300)
    text = population.narrative(t, rows, "score_4x")
    mis = rows[(rows.predictor == "misalignment") & (rows.method == "pearson")].iloc[0]
    assert f"{mis.r:+.2f} [{mis.low:+.2f}, {mis.high:+.2f}]" in text
    assert "the paper's sign (negative), its interval clear of 0" in text
    assert "The larger |r| is the entropy (sharpness)'s" in text
    assert "base + RoPE, no fine-tuning (4 units) 2.75 (2-3.5)" in text
    assert "fine-tuning run (8 units) 0.015" in text
    assert "among the fine-tuning runs alone r(Jeffreys, score) =" in text
    assert "12 units" in text and population.narrative(t.head(2), rows, "score_4x") == \
        "2 units: too few for a correlation."


def test_the_logged_training_loss_is_the_mean_ce_of_the_last_fifth():
    from lsa.runtable import final_ce

    log = [{"step": i + 1, "ce": float(i + 1)} for i in range(10)]
    assert final_ce(log) == pytest.approx(9.5)  # steps 9 and 10
    assert final_ce(log[:3]) == pytest.approx(3.0) and np.isnan(final_ce([]))


def test_leave_one_out_by_method_and_by_kind():
    t = models(12).assign(kind=["probe"] * 4 + ["fine-tuning run"] * 7 + ["base model"])
    loo = population.leave_one_out(t, "score_4x", n_resamples=200)
    assert list(loo["by"]) == ["method"] * 4 + ["kind"] * 3
    assert set(loo[loo["by"] == "kind"]["left_out"]) == {"probe", "fine-tuning run",
                                                         "base model"}
    assert (loo[loo["by"] == "method"]["n"] == 9).all()    # 3 of 12 units per method
    assert loo.set_index("left_out").loc["fine-tuning run", "n"] == 5
    assert np.allclose(loo["r"], -1.0)                     # score = -2 x misalignment in each
    one_kind = population.leave_one_out(t.assign(kind="probe"), "score_4x", n_resamples=200)
    assert set(one_kind["by"]) == {"method"}               # leaving the only kind: no fit
    rows = population.table1(t, ["misalignment"], ["score_4x"], n_resamples=100)
    claim = {c["id"]: c for c in population.claims(rows, pd.DataFrame(), pd.DataFrame(), loo,
                                                   None, "score_4x", 200)}["T1.7"]
    assert claim["verdict"] == "passes" and "4 leaving one method out, 3 leaving one kind" \
        in claim["ours"]


def test_unit_influence_leaves_each_unit_out_and_shifts_from_the_full_fit():
    t = models(12).assign(unit=[f"u{i}" for i in range(12)], kind="probe")
    t.loc[11, "score_4x"] = 5.0  # one unit far from the line
    inf = population.unit_influence(t, "score_4x", n_resamples=200)
    assert len(inf) == 24 and set(inf["statistic"]) == {"r(misalignment)", "jeffreys - entropy"}
    assert (inf["n"] == 11).all()
    r = inf[inf["statistic"] == "r(misalignment)"].set_index("unit")
    full = np.corrcoef(t["misalignment"], t["score_4x"])[0, 1]
    assert r.loc["u11", "value"] == pytest.approx(-1.0)  # the rest lie on the line
    assert r.loc["u11", "shift"] == pytest.approx(-1.0 - full)
    assert r["shift"].abs().idxmax() == "u11"
    rest = t.drop(index=3)  # one by hand: the signed difference of the parts without u3
    by_hand = -(np.corrcoef(rest["jeffreys"], rest["score_4x"])[0, 1]
                - np.corrcoef(rest["entropy"], rest["score_4x"])[0, 1])
    d = inf[inf["statistic"] == "jeffreys - entropy"].set_index("unit")
    assert d.loc["u3", "value"] == pytest.approx(by_hand)
    assert population.unit_influence(t.head(5), "score_4x").empty


def test_the_influence_audit_fails_when_one_unit_moves_an_interval_across_0():
    rows = pd.DataFrame([{"predictor": "misalignment", "method": "pearson", "score": "s",
                          "r": -0.6, "low": -0.9, "high": -0.2, "p_permutation": 0.01, "n": 12}])
    inf = pd.DataFrame([
        {"unit": "base", "kind": "base model", "statistic": "r(misalignment)", "value": -0.3,
         "low": -0.7, "high": 0.1, "shift": 0.3, "n": 11},
        {"unit": "pi CE", "kind": "fine-tuning run", "statistic": "r(misalignment)",
         "value": -0.62, "low": -0.9, "high": -0.25, "shift": -0.02, "n": 11}])
    claims = {c["id"]: c for c in population.claims(rows, pd.DataFrame(), pd.DataFrame(),
                                                    pd.DataFrame(), None, "s", 200, inf)}
    assert claims["T1.8"]["verdict"] == "fails" and claims["T1.8"]["kind"] == "control"
    assert "largest shift without base (base model)" in claims["T1.8"]["ours"]
    assert "r(misalignment) without base" in claims["T1.8"]["ours"]
    steady = inf.assign(low=-0.8, high=-0.1)
    claims = {c["id"]: c for c in population.claims(rows, pd.DataFrame(), pd.DataFrame(),
                                                    pd.DataFrame(), None, "s", 200, steady)}
    assert claims["T1.8"]["verdict"] == "passes" and "0 of 2 fits change side" \
        in claims["T1.8"]["ours"]


@pytest.mark.parametrize("low, high, verdict", [
    (-0.95, -0.3, "agrees"), (-0.6, 0.3, "smaller than the paper's effect"),
    (-0.93, 0.03, "underpowered"), (0.1, 0.5, "disagrees")])
def test_table1_correlations_are_held_against_the_papers_r(low, high, verdict):
    """T1.1 against the paper's r = -0.85: an interval across 0 inside +-0.85 rules it out;
    the published mini's [-0.93, +0.03] does not."""
    rows = pd.DataFrame([{"predictor": "misalignment", "method": "pearson", "score": "s",
                          "r": (low + high) / 2, "low": low, "high": high,
                          "p_permutation": 0.05, "n": 33}])
    (claim,) = population.claims(rows, pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), None,
                                 "s", 200)
    assert claim["id"] == "T1.1" and claim["verdict"] == verdict
    assert "(the paper's effect: 0.85)" in claim["evidence"]
