"""Section 4.1 (lsa.sections.correlation): Table 1 rows and claims on fixed data with known
answers, and its ``analyse`` on run tables built by hand."""

import numpy as np
import pandas as pd
import pytest

from lsa import runtable, stats
from lsa.sections.correlation import tables
from lsa.sections.correlation.claims import narrative, table1_claims


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
    assert tables.scores(t) == ["score_2x", "score_4x", "score_8x"]  # no babilong values


def test_table1_and_claims_on_a_known_population():
    t = models()
    rows = tables.table1(t, ["misalignment", "train_loss", "jeffreys", "entropy"],
                             ["score_4x"], n_resamples=300)
    mis = rows[(rows.predictor == "misalignment") & (rows.method == "pearson")].iloc[0]
    assert mis.r == pytest.approx(-1.0) and mis.p_permutation < 0.01 and mis.n == 12
    comp = tables.comparisons(t, ["score_4x"], [("misalignment", "train_loss"),
                                                    ("jeffreys", "entropy")], n_resamples=300)
    partial = tables.partial_rows(t, ["score_4x"], n_resamples=300)
    ranking = stats.correlation(t["l2"], t["misalignment"], "spearman", n_resamples=300,
                                n_permutations=300).to_dict()
    claims = {c["id"]: c for c in table1_claims(rows, comp, partial, pd.DataFrame(),
                                                ranking, "score_4x", 300)}
    # r = -1: the interval lies below the paper's -0.85 (beyond it)
    assert claims["T1.1"]["verdict"] == "agrees, larger than the paper's effect"
    assert claims["T1.3"]["verdict"].startswith("agrees")  # |r| 1 vs noise
    assert claims["T1.4"]["verdict"] == "fails"        # here the entropy carries it
    assert claims["T1.6"]["verdict"] == "passes"       # L2 is SCE / 10: same ranking
    assert {claims[c]["kind"] for c in ("T1.4", "T1.5", "T1.6")} == {"control"}  # audits
    assert {claims[c]["kind"] for c in ("T1.1", "T1.2", "T1.3")} == {"paper"}
    assert "T1.7" not in claims                        # no leave-one-out rows given
    assert "the floor of 2000" not in claims["T1.1"]["ours"]  # 300 permutations here
    assert "< 0.0066 (the floor of 300 permutations)" in claims["T1.1"]["ours"]
    assert "-0.85" in claims["T1.1"]["paper"] and claims["T1.1"]["grade"] == "B"


def test_partial_correlation_removes_what_the_training_loss_explains():
    rng = np.random.default_rng(1)
    z = rng.normal(size=200)
    x, y = z + 0.1 * rng.normal(size=200), z + 0.1 * rng.normal(size=200)
    r, boot = stats.partial_correlation_ci(x, y, z, n_resamples=300)
    assert stats.correlation(x, y, n_resamples=100, n_permutations=100).r > 0.95
    assert boot.low <= r <= boot.high and abs(r) < 0.25  # independent noise once z is removed
    assert (boot.p < 0.05) == (not boot.low <= 0 <= boot.high)  # its p is its interval's


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
    views = tables.views(table, 0.1, ["score_beyond_4x"])
    assert list(views["primary"]["unit"]) == ["pi CE", "base"]  # 360 < 500: excluded
    pi = views["primary"].set_index("unit").loc["pi CE"]
    assert pi["seeds"] == 2 and pi["misalignment"] == 1.5  # seeds averaged, kept as a count
    assert pi["score_beyond_4x_seed_sd"] == pytest.approx(np.std([-1.0, -2.0], ddof=1))
    assert list(views["with_regularized"]["unit"]) == ["pi CE", "pi SCE 0.1", "base"]
    assert len(views["all"]) == 5
    comp = tables.composition(table)
    assert comp["excluded"].sum() == 2 and comp["units"].sum() == 5


def test_the_main_score_is_the_nll_beyond_the_window():
    cols = tables.scores(pd.DataFrame(columns=["score_2x", "score_4x", "score_beyond_2x",
                                                   "score_beyond_4x", "score_copy_4x"]))
    assert tables.main_score(cols) == "score_beyond_4x"


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
    plan = runs_of(pipe)
    run = plan.probes["ref_smollm2"]
    assert run.needs == () and run.identity["reference"]["window"] == 32
    m = jobs.run_job(pipe, run, progress=False) and run.metrics()
    sce, parts = m["misalignment"]["mean"], m["jeffreys"]["mean"] + m["entropy"]["mean"]
    assert m["window"] == 32 and m["misalignment"]["n"] == 4
    assert sce == pytest.approx(parts, rel=1e-4)  # SCE = Jeffreys + H(p) + H(q)
    table = tables.decomposition(pd.DataFrame(), runtable.read_references(plan),
                                 pipe.finetune.l_train)
    (row,) = table.to_dict(orient="records")
    assert row["model"] == "smollm2" and row["Jeffreys share"] == pytest.approx(
        m["jeffreys"]["mean"] / sce)
    for part, label in (("misalignment", "SCE"), ("jeffreys", "Jeffreys"),
                        ("entropy", "entropy"), ("top1_change", "top1_change")):
        assert row[f"{label} s.e."] == pytest.approx(m[part]["stderr"])  # every part
    assert runtable.read_models(pipe, plan).empty  # not a Table 1 model


def test_within_method_slopes_need_three_units():
    t = pd.DataFrame({"method": ["pi"] * 3 + ["yarn"] * 2,
                      "misalignment": [1.0, 2.0, 3.0, 1.0, 2.0],
                      "train_loss": [5.0, 5.0, 5.0, 1.0, 2.0],
                      "score_beyond_4x": [-1.0, -3.0, -5.0, 0.0, 1.0]})
    rows = tables.within_method(t, "score_beyond_4x")
    (row,) = rows.to_dict(orient="records")  # yarn has 2 units; pi's train_loss is constant
    assert (row["method"], row["predictor"], row["units"]) == ("pi", "misalignment", 3)
    assert row["slope"] == pytest.approx(-2.0) and row["r"] == pytest.approx(-1.0)


def test_the_narrative_says_which_part_carries_the_correlation_and_where_it_varies():
    """Entropy = score exactly (r -1 with the misalignment's sign); the Jeffreys part is large
    only for the four never-fine-tuned units and flat among the fine-tuning runs."""
    t = models(12).assign(kind=["base + RoPE, no fine-tuning"] * 4 + ["fine-tuning run"] * 8)
    t["jeffreys"] = [2.0, 2.5, 3.0, 3.5] + [0.01] * 4 + [0.02] * 4
    rows = tables.table1(t, ["misalignment", "train_loss", "jeffreys", "entropy"],
                             ["score_4x"], n_resamples=300)
    text = narrative(t, rows, "score_4x")
    mis = rows[(rows.predictor == "misalignment") & (rows.method == "pearson")].iloc[0]
    assert f"{mis.r:+.2f} [{mis.low:+.2f}, {mis.high:+.2f}]" in text
    assert "the paper's sign (negative), its interval clear of 0" in text
    assert "The larger |r| is the entropy (sharpness)'s" in text
    assert "base + RoPE, no fine-tuning (4 units) 2.75 (2-3.5)" in text
    assert "fine-tuning run (8 units) 0.015" in text
    assert "among the fine-tuning runs alone r(Jeffreys, score) =" in text
    assert "12 units" in text and narrative(t.head(2), rows, "score_4x") == \
        "2 units: too few for a correlation."


def test_the_logged_training_loss_is_the_mean_ce_of_the_last_fifth():
    from lsa.runtable import final_ce

    log = [{"step": i + 1, "ce": float(i + 1)} for i in range(10)]
    assert final_ce(log) == pytest.approx(9.5)  # steps 9 and 10
    assert final_ce(log[:3]) == pytest.approx(3.0) and np.isnan(final_ce([]))


def test_leave_one_out_by_method_and_by_kind():
    t = models(12).assign(kind=["probe"] * 4 + ["fine-tuning run"] * 7 + ["base model"])
    loo = tables.leave_one_out(t, "score_4x", n_resamples=200)
    assert list(loo["by"]) == ["method"] * 4 + ["kind"] * 3
    assert set(loo[loo["by"] == "kind"]["left_out"]) == {"probe", "fine-tuning run",
                                                         "base model"}
    assert (loo[loo["by"] == "method"]["n"] == 9).all()    # 3 of 12 units per method
    assert loo.set_index("left_out").loc["fine-tuning run", "n"] == 5
    assert np.allclose(loo["r"], -1.0)                     # score = -2 x misalignment in each
    one_kind = tables.leave_one_out(t.assign(kind="probe"), "score_4x", n_resamples=200)
    assert set(one_kind["by"]) == {"method"}               # leaving the only kind: no fit
    rows = tables.table1(t, ["misalignment"], ["score_4x"], n_resamples=100)
    claim = {c["id"]: c for c in table1_claims(rows, pd.DataFrame(), pd.DataFrame(), loo,
                                               None, "score_4x", 200)}["T1.7"]
    assert claim["verdict"] == "passes" and "4 leaving one method out, 3 leaving one kind" \
        in claim["ours"]


def test_unit_influence_leaves_each_unit_out_and_shifts_from_the_full_fit():
    t = models(12).assign(unit=[f"u{i}" for i in range(12)], kind="probe")
    t.loc[11, "score_4x"] = 5.0  # one unit far from the line
    inf = tables.unit_influence(t, "score_4x", n_resamples=200)
    assert len(inf) == 48 and set(inf["statistic"]) == set(tables.INFLUENCE)
    assert (inf["n"] == 11).all() and (inf["units"] == 1).all()   # no clusters: one unit each
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
    assert tables.unit_influence(t.head(5), "score_4x").empty
    t3 = inf[inf["statistic"] == "misalignment - train_loss"].set_index("unit")
    by_hand = -(np.corrcoef(rest["misalignment"], rest["score_4x"])[0, 1]
                - np.corrcoef(rest["train_loss"], rest["score_4x"])[0, 1])
    assert t3.loc["u3", "value"] == pytest.approx(by_hand)
    assert t3.loc["u3", "r_better"] == pytest.approx(
        np.corrcoef(rest["misalignment"], rest["score_4x"])[0, 1])


def test_influence_leaves_a_cluster_out_whole():
    """The base model and its RoPE copies are one trained model: left out together, as one
    row per statistic that counts its units; the rest keep their own clusters."""
    t = models(12).assign(unit=[f"u{i}" for i in range(12)],
                          kind=["base model"] + ["base + RoPE, no fine-tuning"] * 4
                          + ["fine-tuning run"] * 7)
    t["cluster"] = tables.clusters(t)
    inf = tables.unit_influence(t, "score_4x", n_resamples=200)
    r = inf[inf["statistic"] == "r(misalignment)"].set_index("unit")
    assert list(r.index) == ["base model"] + [f"u{i}" for i in range(5, 12)]
    assert r.loc["base model", "units"] == 5 and r.loc["base model", "n"] == 7
    rest = t.iloc[5:]
    assert r.loc["base model", "value"] == pytest.approx(
        np.corrcoef(rest["misalignment"], rest["score_4x"])[0, 1])
    assert r.loc["base model", "kind"] == "base model, base + RoPE, no fine-tuning"


def _one_row_and_two_refits(base: str, units: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """T1.1's row with every unit (r -0.6 [-0.9, -0.2], 12 units) and its refits without
    ``base`` (``units`` units: -0.3 [-0.7, +0.1]) and without one fine-tuning run."""
    rows = pd.DataFrame([{"predictor": "misalignment", "method": "pearson", "score": "s",
                          "r": -0.6, "low": -0.9, "high": -0.2, "p_permutation": 0.01, "n": 12}])
    inf = pd.DataFrame([
        {"unit": base, "kind": "base model", "units": units, "statistic": "r(misalignment)",
         "value": -0.3, "low": -0.7, "high": 0.1, "shift": 0.3, "n": 12 - units},
        {"unit": "pi CE", "kind": "fine-tuning run", "units": 1, "statistic": "r(misalignment)",
         "value": -0.62, "low": -0.9, "high": -0.25, "shift": -0.02, "n": 11}])
    return rows, inf


def _table1(rows: pd.DataFrame, influence: pd.DataFrame) -> dict[str, dict]:
    return {c["id"]: c for c in table1_claims(rows, pd.DataFrame(), pd.DataFrame(),
                                              pd.DataFrame(), None, "s", 200, influence)}


def test_the_influence_audit_fails_when_one_unit_moves_an_interval_across_0():
    rows, inf = _one_row_and_two_refits("base", 1)
    claims = _table1(rows, inf)
    assert claims["T1.8"]["verdict"] == "fails" and claims["T1.8"]["kind"] == "control"
    assert "largest shift without base (base model)" in claims["T1.8"]["ours"]
    assert "r(misalignment) without base" in claims["T1.8"]["ours"]
    claims = _table1(rows, inf.assign(low=-0.8, high=-0.1))
    assert claims["T1.8"]["verdict"] == "passes" and "0 of 2 fits change side" \
        in claims["T1.8"]["ours"]


def test_a_paper_claim_names_the_cluster_its_verdict_rests_on():
    """T1.1's verdict with every unit (r -0.6 [-0.9, -0.2] against the paper's -0.85:
    agrees) changes without the base model (-0.3 [-0.7, +0.1]: smaller than the paper's effect,
    as it excludes -0.85), not without a fine-tuning run: the row says it rests on the base
    model, with the refit's numbers, and the table a reader sees marks the verdict."""
    from lsa.claims import claims_table, display

    rows, inf = _one_row_and_two_refits("base model", 5)
    claims = _table1(rows, inf)
    t11 = claims["T1.1"]
    assert t11["verdict"] == "agrees" and t11["rests_on"] == "base model"
    assert ("rests on base model (1 of 2 clusters left out in turn change the verdict): "
            "without base model (5 units) -0.30 [-0.70, +0.10], smaller than the paper's effect") \
        in t11["evidence"]
    shown = display(claims_table(list(claims.values()))).set_index("id")
    assert shown.loc["T1.1", "verdict"] == "agrees (rests on base model)"
    inf.loc[0, ["value", "low", "high"]] = [-0.55, -0.88, -0.15]   # now no cluster moves it
    again = _table1(rows, inf)["T1.1"]
    assert again["rests_on"] == "" and "no one cluster changes the verdict (2 left out" \
        in again["evidence"]


@pytest.mark.parametrize("low, high, verdict", [
    (-0.95, -0.3, "agrees"),
    (-0.75, -0.02, "agrees in direction, smaller than the paper's effect"),
    (-0.6, 0.3, "smaller than the paper's effect"),
    (-0.77, 0.02, "smaller than the paper's effect"),
    (-0.93, 0.03, "underpowered"), (0.1, 0.5, "disagrees")])
def test_table1_correlations_are_held_against_the_papers_r(low, high, verdict):
    """T1.1 against the paper's r = -0.85: an interval that holds 0 but not -0.85 rules the
    paper's size out (mini's [-0.77, +0.02]), as does one below 0 that stops short of it
    (mini-full's [-0.75, -0.02]); the published mini's older [-0.93, +0.03] does not."""
    rows = pd.DataFrame([{"predictor": "misalignment", "method": "pearson", "score": "s",
                          "r": (low + high) / 2, "low": low, "high": high,
                          "p_permutation": 0.05, "n": 33}])
    (claim,) = table1_claims(rows, pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), None,
                             "s", 200)
    assert claim["id"] == "T1.1" and claim["verdict"] == verdict
    assert "(the paper's effect: 0.85)" in claim["evidence"]


# --- analyse on run tables built by hand (no runs) ----------------------------------------------

#: (model, unit, kind, trained_on, alpha, seed, ppl_1x, misalignment, jeffreys, NLL beyond 4x)
RAW = [("base", "base", "base model", "none", 0.0, np.nan, 100.0, 2.0, 0.5, 5.0),
       ("base_ntk_x2", "base ntk x2", "base + RoPE, no fine-tuning", "none", 0.0, np.nan, 110.0,
        1.5, 0.3, 4.8),
       ("pi_a0_s0", "pi CE", "fine-tuning run", "none", 0.0, 0, 90.0, 1.0, 0.1, 4.0),
       ("pi_a0_s1", "pi CE", "fine-tuning run", "none", 0.0, 1, 92.0, 1.2, 0.3, 4.2),
       ("yarn_a0_s0", "yarn CE", "fine-tuning run", "none", 0.0, 0, 95.0, 0.9, 0.2, 4.3),
       ("yarn_a0_s1", "yarn CE", "fine-tuning run", "none", 0.0, 1, 400.0, 3.0, 0.1, 9.0),
       ("none_a0_s0", "none CE", "fine-tuning run", "none", 0.0, 0, 97.0, 1.3, 0.2, 4.4),
       ("pi_a0.1_s0", "pi SCE 0.1", "fine-tuning run", "sce", 0.1, 0, 91.0, 0.5, 0.05, 4.1)]


def raw_models() -> pd.DataFrame:
    """``runtable.read_models``' rows for RAW: the fine-tuning runs with their logged CE, the
    probes without (NaN, as the reader leaves them)."""
    rows = []
    for i, (model, unit, kind, trained, alpha, seed, ppl, mis, jef, beyond) in enumerate(RAW):
        tuned = kind == "fine-tuning run"
        rows.append({"model": model, "unit": unit, "group": "fine-tuning" if tuned else "probe",
                     "kind": kind, "method": model.split("_")[0] if tuned else "none",
                     "alpha": alpha, "seed": seed, "setting": unit, "trained_on": trained,
                     "babilong": np.nan, "ppl_1x": ppl, "nll_1x": np.log(ppl),
                     "nll_4x": beyond - 0.5, "nll_beyond_4x": beyond, "misalignment": mis,
                     "misalignment_se": 0.01, "jeffreys": jef, "jeffreys_se": 0.02,
                     "entropy": mis - jef, "entropy_se": 0.01, "l2": mis / 10,
                     "top1_change": 0.1 * (i + 1), "top1_change_se": 0.01,
                     "train_loss": 3.0 + 0.1 * i,
                     **({"train_loss_logged": 2.0 + 0.1 * i} if tuned else {})})
    return pd.DataFrame(rows)


def run_tables(**kw) -> runtable.RunTables:
    samples = pd.DataFrame([{"model": m, "l_extra": x, "top1_change": x > 4 or (m == "base"
                                                                                 and x == 1),
                             "tv": x / 10}
                            for m in ("base", "pi_a0_s0", "base_pi_x2") for x in range(1, 9)])
    references = pd.DataFrame([{"model": "smollm2", "window": 32, "misalignment": 0.5,
                                "jeffreys": 0.1, "entropy": 0.4, "top1_change": 0.2,
                                "misalignment_se": 0.01, "jeffreys_se": 0.002,
                                "entropy_se": 0.01, "top1_change_se": 0.03}])
    return runtable.RunTables(**{"models": raw_models(), "last_positions": samples,
                                 "references": references, **kw})


def smoke_pipe():
    import dataclasses

    from lsa.config import load_config

    pipe = load_config(profile="smoke")
    return dataclasses.replace(pipe, population=dataclasses.replace(
        pipe.population, bootstrap=200, exclude_ppl_ratio=3.0, secondary_max_alpha=0.1))


def test_the_population_fills_the_probes_loss_the_scores_and_the_exclusion_rule():
    table = tables.population(raw_models(), 3.0)
    logged = table.set_index("model")["train_loss_logged"]
    assert logged["base"] == pytest.approx(3.0)           # a probe: its CE at l_train
    assert logged["pi_a0_s0"] == pytest.approx(2.2)       # a run: its logged CE
    assert (table["score_beyond_4x"] == -table["nll_beyond_4x"]).all()
    assert "score_4x" in table and "score_1x" not in table  # every NLL but the 1x window's
    assert list(table.loc[table["excluded"], "model"]) == ["yarn_a0_s1"]  # 400 > 3 x 100
    assert tables.population(raw_models(), 5.0)["excluded"].sum() == 0
    no_base = tables.population(raw_models().iloc[1:], 3.0)
    assert not no_base["excluded"].any()                  # no base model: nothing excluded
    assert tables.excluded_models(table) == ["yarn_a0_s1"]
    assert list(tables.population_csv(table).columns[:5]) == ["model", "unit", "kind",
                                                              "trained_on", "excluded"]


def test_analyse_on_hand_built_run_tables():
    """Primary units: base, base ntk x2, pi CE (two seeds averaged), yarn CE (its exploded
    seed excluded), none CE; pi SCE 0.1 is trained on the predictor. Pearson r of the
    misalignment with the main score over those five units, by hand."""
    from lsa.sections import correlation

    pipe = smoke_pipe()
    result = correlation.analyse(pipe, run_tables(), [])
    mis = [2.0, 1.5, 1.1, 0.9, 1.3]                     # unit means
    score = [-5.0, -4.8, -4.1, -4.3, -4.4]
    m = result.metrics
    assert m["main_score"] == "score_beyond_4x" and m["models"] == len(RAW)
    assert m["excluded"] == ["yarn_a0_s1"] and m["units_primary"] == 5
    assert list(result.units_primary["unit"]) == ["base", "base ntk x2", "pi CE", "yarn CE",
                                                  "none CE"]
    row = result.table1.set_index(["predictor", "method", "score"]).loc[
        ("misalignment", "pearson", "score_beyond_4x")]
    assert row["r"] == pytest.approx(np.corrcoef(mis, score)[0, 1]) and row["n"] == 5
    assert row["paper r"] == -0.85 and row["low"] <= row["r"] <= row["high"]
    claim = {c["id"]: c for c in result.claims}["T1.1"]
    assert f"r = {row['r']:+.2f}" in claim["ours"] and "n = 5 units" in claim["ours"]
    assert list(result.table1_views["view"].unique()) == ["primary", "with_regularized", "all"]
    assert set(result.table1_views.groupby("view")["units"].first()) == {5, 6}
    assert list(m) == ["models", "units_primary", "main_score", "excluded", "table1", "views",
                       "comparisons", "ranking_l2_sce", "noise", "label_change", "narrative"]
    assert result.l_train == pipe.finetune.l_train
    saved = list(result.saved_tables())
    assert saved[:3] == ["population", "composition", "units_primary"]


def test_analyse_bins_audit_3_for_the_models_of_table_1_and_decomposes_the_references():
    from lsa.sections import correlation

    result = correlation.analyse(smoke_pipe(), run_tables(), [])
    top1 = result.audit_top1
    # base_pi_x2 has samples but is not a Table 1 model here: left out, as before the driver
    assert list(dict.fromkeys(top1["model"])) == ["base", "pi_a0_s0"]
    base = top1[top1["model"] == "base"]
    assert list(base["l_extra"]) == ["1-2", "3-4", "5-6", "7-8"]  # 4 bins over 1..8
    assert list(base["top1_changed"]) == [0.5, 0.0, 1.0, 1.0] and (base["samples"] == 2).all()
    assert base["tv"].iloc[0] == pytest.approx(0.15)
    dec = result.decomposition.set_index("model")
    assert list(dec.index) == ["base model", "CE-only fine-tuning runs", "smollm2"]
    assert dec.loc["smollm2", "Jeffreys share"] == pytest.approx(0.2)  # 0.1 / 0.5
    assert dec.loc["smollm2", "what"] == "pretrained, l = 32, its own tokens"
    assert dec.loc["smollm2", "Jeffreys s.e."] == pytest.approx(0.002)
    assert dec.loc["base model", "Jeffreys share"] == pytest.approx(0.5 / 2.0)
    # the CE-only fine-tuning units: pi CE (0.2 / 1.1), yarn CE, none CE, means of units
    assert dec.loc["CE-only fine-tuning runs", "SCE"] == pytest.approx((1.1 + 0.9 + 1.3) / 3)
    assert dec.loc["CE-only fine-tuning runs", "what"] == "mean of 3 units"
    empty = correlation.analyse(smoke_pipe(), run_tables(last_positions=pd.DataFrame(),
                                                         references=pd.DataFrame()), [])
    assert empty.audit_top1.empty and len(empty.decomposition) == 2


def test_analyse_needs_its_tables():
    from lsa.sections import correlation

    with pytest.raises(ValueError, match="last_positions"):
        correlation.analyse(smoke_pipe(), runtable.RunTables(models=raw_models()), [])


def test_objection_one_is_answered_by_g1_then_models_inside_their_window():
    """The answer to "labels change when the context is cut" (issue 61): G1's far-copy gain
    first, then audit 3 on models inside their window, and a model measured beyond its window
    only as a labelled control, last."""
    from lsa.config import load_config
    from lsa.gates import Gate
    from lsa.runtable import beyond_window
    from lsa.sections.correlation.claims import label_change_text

    top1 = pd.DataFrame([
        {"model": "base", "l_extra_mid": 100.0, "l_extra": "65-128", "samples": 32,
         "top1_changed": 0.59, "low": 0.36, "high": 0.78, "tv": 0.4},
        {"model": "eabf_a0_s0", "l_extra_mid": 100.0, "l_extra": "65-128", "samples": 32,
         "top1_changed": 0.2, "low": 0.12, "high": 0.29, "tv": 0.1}])
    g1 = Gate("G1", "q", 1.31, 1.2, 1.4, 0.5, True, "")
    text = label_change_text(top1, frozenset({"base"}), g1)
    assert text.startswith("G1: the far occurrence lowers the copy NLL by 1.31 [1.20, 1.40] "
                           "nats at the base window (passes its bar of 0.5)")
    inside, control = text.index("models inside their window"), text.index("control, a model")
    assert inside < text.index("eabf_a0_s0 20% [12, 29] of 32 positions") < control
    assert control < text.index("base 59% [36, 78]")
    assert label_change_text(pd.DataFrame()) == ""
    assert beyond_window(load_config(profile="mini")) == {"base"}  # 128-token base at 256
