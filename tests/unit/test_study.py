"""lsa.study: the confirmatory study's analysis (docs/preregistration.md), on synthetic numbers
with hand-checked values: the design, the t over bases, Holm, every verdict branch, the
stopping rule, the replacement rule, the exclusions and the sensitivity analyses."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps
from support.study import base_table, small_config, synthetic

from lsa import study
from lsa.config import ConfigError, StudyConfig
from lsa.stats import PREMISE_NOT_MET

SESOI = 0.05


# ---------------------------------------------------------------------------------------------
# the design (section 5)


def test_obrien_fleming_boundaries_of_two_equal_looks():
    d = study.design(StudyConfig())
    assert d.stages == (16, 16)
    # the first look spends 2 - 2 Phi(1.95996 / sqrt(0.5)) = 2 (1 - Phi(2.7718))
    assert study.spent(0.5) == pytest.approx(2 * sps.norm.sf(1.959964 / math.sqrt(0.5)), 1e-6)
    assert d.z[0] == pytest.approx(2.772, abs=5e-4) and d.p[0] == pytest.approx(0.00557, abs=1e-5)
    # the final bound: the two looks together spend 0.05 (checked by simulation below)
    assert d.z[1] == pytest.approx(1.979, abs=1e-3) and d.p[1] == pytest.approx(0.0478, abs=1e-4)
    assert d.levels[0] == pytest.approx(0.99443, abs=1e-4)
    rng = np.random.default_rng(0)
    z1 = rng.standard_normal(1_000_000)
    z2 = math.sqrt(0.5) * z1 + math.sqrt(0.5) * rng.standard_normal(z1.size)
    crossed = (np.abs(z1) >= d.z[0]) | (np.abs(z2) >= d.z[1])
    assert crossed.mean() == pytest.approx(0.05, abs=1e-3)
    # one stage: the plain two-sided 5 % bound
    assert study.boundaries((16,)) == [pytest.approx(1.959964, abs=1e-5)]


def test_the_simulated_power_is_the_pre_registrations():
    d = study.design(StudyConfig())
    pilot = d.simulate(-0.149, 0.127)
    upper = d.simulate(-0.149, 0.269)
    # the probability of stopping at the look, exactly: the noncentral t
    crit = sps.t.isf(d.p[0] / 2, 15)
    for sim, sd in ((pilot, 0.127), (upper, 0.269)):
        exact = sps.nct.sf(crit, 15, 0.149 / sd * 4) + sps.nct.cdf(-crit, 15, 0.149 / sd * 4)
        assert sim["stop_first"] == pytest.approx(exact, abs=0.01)
        assert sim["expected_bases"] == pytest.approx(16 * exact + 32 * (1 - exact), abs=0.2)
    assert pilot["stop_first"] == pytest.approx(0.90, abs=0.01)
    assert pilot["expected_bases"] == pytest.approx(17.5, abs=0.1)
    assert upper["power"] == pytest.approx(0.85, abs=0.01)
    assert upper["expected_bases"] == pytest.approx(28.75, abs=0.15)
    assert d.simulate(0.0, 0.127)["power"] == pytest.approx(0.05, abs=0.005)  # type I error
    assert d.simulate(-0.05, 0.127)["power"] == pytest.approx(0.57, abs=0.015)
    assert d.single_stage_power(-0.149, 0.127, 16) == pytest.approx(0.99, abs=0.005)
    assert d.single_stage_power(-0.149, 0.269, 16) == pytest.approx(0.54, abs=0.01)
    assert d.single_stage_power(-0.05, 0.127, 16) == pytest.approx(0.31, abs=0.01)
    assert d.simulate(-0.149, 0.269, seed=3) != upper  # seeded: another seed, other draws
    assert d.simulate(-0.149, 0.269) == upper


# ---------------------------------------------------------------------------------------------
# the t over bases, Holm, the verdict rule (section 4)


def test_the_t_interval_over_bases_by_hand():
    effects = pd.Series([-0.1, -0.2, -0.3], index=[101, 102, 103])
    e = study.estimate(effects, -1)
    # mean -0.2, sd 0.1, se 0.1 / sqrt(3); t(0.975, 2) = 4.302653
    half = 4.302653 * 0.1 / math.sqrt(3)
    assert (e.mean, e.low, e.high) == pytest.approx((-0.2, -0.2 - half, -0.2 + half), abs=1e-6)
    assert e.p == pytest.approx(2 * sps.t.sf(0.2 / (0.1 / math.sqrt(3)), 2), 1e-9)
    assert e.p == pytest.approx(0.0742, abs=1e-4)
    assert e.n == 3 and e.on_side == 3 and e.values == {101: -0.1, 102: -0.2, 103: -0.3}
    wide = study.estimate(effects, -1, level=0.99)
    assert wide.high - wide.low == pytest.approx(2 * 9.924843 * 0.1 / math.sqrt(3), 1e-5)
    one = study.estimate(effects.iloc[:1], -1)
    assert math.isnan(one.low) and math.isnan(one.p)


def test_holm_by_hand():
    # sorted 0.01, 0.03, 0.04: x3 = 0.03, x2 = 0.06, x1 = 0.04 -> max(0.06, 0.04) = 0.06
    out = study.holm({"a": 0.01, "b": 0.04, "c": 0.03, "d": math.nan})
    assert out["a"] == pytest.approx(0.03) and out["c"] == pytest.approx(0.06)
    assert out["b"] == pytest.approx(0.06) and math.isnan(out["d"])


@pytest.mark.parametrize("low, high, sign, holm_p, expected", [
    (-0.30, -0.10, -1, None, study.CONFIRMED),
    (-0.04, -0.01, -1, None, study.CONFIRMED_SMALL),  # wholly within 0.05 of 0
    (0.01, 0.20, 1, 0.01, study.CONFIRMED),
    (0.01, 0.20, 1, 0.20, study.INCONCLUSIVE),         # Holm fails in its family
    (0.10, 0.30, -1, None, study.REVERSED),
    (0.10, 0.30, -1, 0.04, study.REVERSED),
    (0.10, 0.30, -1, 0.06, study.INCONCLUSIVE),
    (-0.04, 0.03, -1, None, study.NO_EFFECT),
    (-0.04, 0.03, -1, 0.9, study.NO_EFFECT),            # no Holm condition for it
    (-0.20, 0.03, -1, None, study.INCONCLUSIVE),
    (math.nan, math.nan, -1, None, study.INCONCLUSIVE),
])
def test_every_branch_of_the_verdict_rule(low, high, sign, holm_p, expected):
    assert study.verdict(low, high, sign, SESOI, holm_p) == expected


# ---------------------------------------------------------------------------------------------
# synthetic study tables


def test_base_effects_mean_the_seeds_then_pair_within_base():
    runs = pd.DataFrame([
        {"base": 1, "method": "eabf", "arm": "jeffreys1", "seed": 1, "nll4": 3.0, "nll1": 2.0},
        {"base": 1, "method": "eabf", "arm": "jeffreys1", "seed": 1001, "nll4": 3.2,
         "nll1": 2.2},
        {"base": 1, "method": "eabf", "arm": "ce_both", "seed": 1, "nll4": 3.5, "nll1": 2.0},
        {"base": 2, "method": "eabf", "arm": "jeffreys1", "seed": 2, "nll4": 4.0, "nll1": 3.0},
        {"base": 2, "method": "eabf", "arm": "ce_both", "seed": 2, "nll4": 4.1, "nll1": 3.1},
        {"base": 3, "method": "eabf", "arm": "jeffreys1", "seed": 3, "nll4": 9.0, "nll1": 9.0},
        {"base": 2, "method": "yarn", "arm": "ce_both", "seed": 2, "nll4": 0.0, "nll1": 0.0},
    ])
    h1 = study.base_effects(runs, study.test("H1"))
    assert h1.to_dict() == pytest.approx({1: 3.1 - 3.5, 2: -0.1})  # base 3 lacks ce_both
    growth = study.base_effects(runs, study.test("H3"))  # (3.1 - 3.5) - (2.1 - 2.0)
    assert growth.to_dict() == pytest.approx({1: -0.5, 2: -0.1 - (-0.1)})


def test_additivity_subtracts_the_parts_against_one_comparator():
    rows = [{"base": 1, "method": "eabf", "arm": a, "seed": 1, "nll4": v}
            for a, v in (("ce_a", 4.0), ("sce01", 4.3), ("jeffreys01", 4.1),
                         ("entropy01", 4.15))]
    effect = study.base_effects(pd.DataFrame(rows), study.test("E.additivity"))
    assert effect.to_dict() == pytest.approx({1: 0.3 - 0.1 - 0.15})


# ---------------------------------------------------------------------------------------------
# gates, replacements, exclusions (section 6)


def test_a_failed_base_is_replaced_by_the_next_seed_after_its_stage():
    cfg = small_config()
    plan = study.base_plan(cfg, {2: False})
    assert plan.stages == [[1, 3, 4, 9]] and plan.trained == [1, 2, 3, 4, 9]
    assert plan.failed == [2] and plan.replacements == [9] and not plan.stopped
    plan = study.base_plan(cfg, {2: False, 9: False}, stages=2)  # a replacement fails too
    assert plan.stages == [[1, 3, 4, 10], [5, 6, 7, 8]] and plan.replacements == [9, 10]
    # replacements exhausted (2): a later failure leaves its stage a base short
    plan = study.base_plan(cfg, {2: False, 9: False, 6: False}, stages=2)
    assert plan.stages == [[1, 3, 4, 10], [5, 7, 8]] and not plan.stopped


def test_more_failures_than_allowed_among_the_first_bases_stop_the_study():
    cfg = small_config()
    plan = study.base_plan(cfg, {1: False, 2: False, 3: False})
    assert plan.stopped and "3 of the first 6" in plan.reason
    assert not study.base_plan(cfg, {1: False, 2: False}).stopped
    with pytest.raises(study.StudyStopped, match="the study stops"):
        study.stage_of_analysis(cfg, base_table([1, 2, 3, 4, 9, 10], failed=(1, 2, 3)))


def test_a_diverged_run_excludes_its_base_from_its_methods_tests_only():
    cfg = small_config(stage_seeds=[list(range(1, 9))])
    runs = synthetic(cfg, list(range(1, 9)))
    bad = (runs["base"] == 3) & (runs["method"] == "yarn") & (runs["arm"] == "sce01")
    runs.loc[bad, "ppl1"] = 130.0  # > 3 x 40
    runs.loc[(runs["base"] == 5) & (runs["arm"] == "entropy01") & (runs["method"] == "pi"),
             "finite"] = False
    out = study.diverged(runs, base_table(range(1, 9)), 3.0)
    assert list(zip(out["base"], out["method"], out["why"])) == [
        (3, "yarn", "perplexity at l_train above 3x its base model's"), (5, "pi", "non-finite")]
    a = study.analyse(cfg, runs, base_table(range(1, 9)), {m: True for m in cfg.methods}, 3.0)
    rows = {r.test.id: r for r in a.rows}
    assert rows["H5"].est.n == 7 and rows["H5"].excluded == [3]
    assert rows["H6"].est.n == 7 and rows["H6"].excluded == [5]
    assert rows["H1"].est.n == 8 and rows["H1"].excluded == []


# ---------------------------------------------------------------------------------------------
# the analysis: incomplete stages, the look, the premise, the families


def test_an_incomplete_stage_is_not_analysed():
    cfg = small_config()
    bases = base_table([1, 2, 3, 4])
    bases.loc[bases["base"] == 4, "complete"] = False
    with pytest.raises(study.StudyIncomplete, match="stage 1 of the study is incomplete: 1 of"):
        study.analyse(cfg, synthetic(cfg, [1, 2, 3]), bases, {}, 3.0)


def test_a_look_that_does_not_stop_reads_nothing_else():
    cfg = small_config()
    runs = synthetic(cfg, [1, 2, 3, 4], sd=0.3, shift=0.15)  # no effect of Jeffreys 1
    a = study.analyse(cfg, runs, base_table([1, 2, 3, 4]), {m: True for m in cfg.methods}, 3.0)
    assert a.look is not None and not a.look.stop and not a.judged and a.rows == []
    assert a.look.bound == pytest.approx(study.design(cfg).p[0])
    assert "goes on to its second stage" in a.look.sentence()


def test_a_look_that_stops_judges_h1_at_its_level_and_everything_on_its_bases():
    cfg = small_config()
    runs = synthetic(cfg, [1, 2, 3, 4], sd=0.002)
    a = study.analyse(cfg, runs, base_table([1, 2, 3, 4]), {m: True for m in cfg.methods}, 3.0)
    assert a.look.stop and a.judged and a.bases == [1, 2, 3, 4]
    rows = {r.test.id: r for r in a.rows}
    assert rows["H1"].est.level == pytest.approx(study.design(cfg).levels[0])
    assert rows["H2"].est.level == 0.95
    assert rows["H1"].verdict == study.CONFIRMED and math.isnan(rows["H1"].p_holm)
    assert rows["H4"].verdict == study.CONFIRMED  # entropy raises the NLL at 4x
    assert rows["H7"].verdict == study.REVERSED   # plain books: the other way here
    assert rows["E.dose"].verdict == study.ESTIMATE


def test_the_final_analysis_holm_and_a_failed_premise():
    cfg = small_config(stages=2)
    runs = synthetic(cfg, list(range(1, 9)), sd=0.2, shift=0.1)  # the look does not stop
    g3 = {"eabf": True, "yarn": False, "pi": True}
    a = study.analyse(cfg, runs, base_table(range(1, 9)), g3, 3.0)
    assert a.judged and not a.look.stop and a.bases == list(range(1, 9))
    rows = {r.test.id: r for r in a.rows}
    assert rows["H1"].est.level == pytest.approx(study.design(cfg).levels[1]) and \
        rows["H1"].est.n == 8
    assert rows["H5"].verdict == PREMISE_NOT_MET and rows["H5"].held
    assert math.isnan(rows["H5"].p_holm) and math.isnan(rows["P.yarn"].p_holm)
    family = ["H2", "H3", "H4", "H6", "H7"]  # H5 left the family
    expected = study.holm({k: rows[k].est.p for k in family})
    assert {k: rows[k].p_holm for k in family} == pytest.approx(expected)
    assert a.premise_failed == ["yarn"]
    table = a.table()
    assert {"estimate", "low", "high", "p", "p_holm", "verdict", "bases",
            "on_predicted_side", "signed_rank_p", "loo_min", "loo_max"} <= set(table.columns)


def test_sensitivity_analyses_by_hand():
    cfg = small_config()
    runs = synthetic(cfg, [1, 2, 3, 4], sd=0.01)
    t = study.test("H1")
    effects = study.base_effects(runs, t)
    out = study.sensitivity(runs, t, None)
    assert out["signed_rank_p"] == pytest.approx(sps.wilcoxon(effects.to_numpy()).pvalue)
    assert out["signed_rank_p"] == pytest.approx(0.125)  # 4 bases, all negative: 2 / 2^4
    loo = [effects.drop(b).mean() for b in effects.index]
    assert (out["loo_min"], out["loo_max"]) == (min(loo), max(loo))
    ce_a = study.base_effects(runs, t, comparator="ce_a")
    assert out["ce_a_estimate"] == pytest.approx(ce_a.mean())
    assert out["ce_a_estimate"] == pytest.approx(effects.mean() + 0.02, abs=0.03)
    pilot = synthetic(cfg, [0], seed=5)
    pilot = pilot[pilot["arm"].isin(["jeffreys1", "ce_both"])]
    with_pilot = study.sensitivity(runs, t, pilot)
    assert with_pilot["pilot_bases"] == [0]
    both = pd.concat([effects, study.base_effects(pilot, t)])
    assert with_pilot["pilot_estimate"] == pytest.approx(both.mean())
    assert study.sensitivity(runs, study.test("H4"), pilot)["pilot_bases"] == []


def test_the_pre_registrations_configuration_is_strict():
    cfg = StudyConfig()
    assert cfg.stage_seeds == [list(range(101, 117)), list(range(117, 133))]
    assert (cfg.replacement_start, cfg.max_replacements, cfg.first_bases, cfg.max_failures,
            cfg.second_seed_offset, cfg.sesoi, cfg.alpha) == (133, 4, 20, 4, 1000, 0.05, 0.05)
    arms = {a.name: a for a in cfg.arms}
    assert {t.arm for t in study.TESTS} | {t.comparator for t in study.TESTS} <= set(arms)
    assert sum(len(a.methods) + len(a.second_seed) for a in cfg.arms) == 20  # runs per base
    for bad, match in (({"stage_seeds": [[101, 102], [102, 103]]}, "must not repeat"),
                       ({"stages": 3}, "stages"),
                       ({"replacement_start": 116}, "replacement seeds"),
                       ({"outcomes": {"nll4": "perplexity.4.ppl", "nll1": "perplexity.1.nll",
                                      "copy1": "long_range.1.copy_nll"}}, "nll4"),
                       ({"methods": ["eabf"]}, "methods must be among")):
        with pytest.raises(ConfigError, match=match):
            StudyConfig.from_dict(bad)


def test_outcomes_and_finiteness_of_a_run():
    metrics = {"perplexity": {"128": {"nll": 3.0}, "512": {"nll": 3.5}},
               "long_range": {"128": {"copy_nll": 2.0}}}
    outcomes = StudyConfig().outcomes
    assert {k: study.outcome(metrics, w, 128) for k, w in outcomes.items()} == {
        "nll4": 3.5, "nll1": 3.0, "copy1": 2.0}
    assert study.finite_run(metrics, [{"loss": 1.0, "ce": 1.0}], outcomes, 128)
    assert not study.finite_run(metrics, [{"loss": math.inf, "ce": 1.0}], outcomes, 128)
    assert not study.finite_run({**metrics, "long_range": {}}, [], outcomes, 128)


def test_no_outcome_line_holds_a_typed_number():
    """Section 07's outcome lines are generated from its claims: the notebook's text and the
    literal parts of the section's sentences hold no number (a digit with a decimal point or a
    percent), and each claim's sentence carries its own numbers."""
    import ast
    import re

    import nbformat

    from lsa import paths
    from lsa.sections.study.claims import outcome_sentence, study_claims

    typed = re.compile(r"\d*\.\d+|\d+\s*%")
    nb = nbformat.read(paths.NOTEBOOKS / "07_mechanism_study.ipynb", as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            assert not typed.search(cell.source), cell.source
    folder = paths.ROOT / "lsa" / "sections" / "study"
    for path in folder.glob("*.py"):
        tree = ast.parse(path.read_text())
        specs = {id(n.format_spec) for n in ast.walk(tree)
                 if isinstance(n, ast.FormattedValue) and n.format_spec is not None}
        for node in ast.walk(tree):
            if isinstance(node, ast.JoinedStr) and id(node) not in specs:
                for part in node.values:
                    if isinstance(part, ast.Constant):
                        assert not typed.search(part.value), (path.name, part.value)
    cfg = small_config()
    a = study.analyse(cfg, synthetic(cfg, [1, 2, 3, 4], sd=0.002), base_table([1, 2, 3, 4]),
                      {m: True for m in cfg.methods}, 3.0)
    claims = {c["id"]: c for c in study_claims(a, cfg)}
    assert set(claims) == {"ST.H1", *(f"ST.H{i}" for i in range(2, 8)), "ST.P.eabf",
                           "ST.P.yarn", "ST.P.pi"}
    row = next(r for r in a.rows if r.test.id == "H2")
    assert claims["ST.H2"]["ours"] == outcome_sentence(row)
    assert f"{row.est.mean:.3g}" in claims["ST.H2"]["ours"]
    assert all(c["origin"] == "study" for c in claims.values())


def test_lsa_check_takes_the_studys_words_for_its_claims_and_only_for_them():
    """`lsa check` (``lsa.pipeline.verdict_problems``): a study claim reads the
    pre-registration's words, a paper claim the paper's; each refuses the other's."""
    from lsa.pipeline import verdict_problems

    ok = [{"id": "ST.H1", "origin": "study", "verdict": study.CONFIRMED},
          {"id": "ST.E1", "origin": "study", "verdict": study.ESTIMATE},
          {"id": "S5.eabf", "origin": "paper", "verdict": "disagrees"},
          {"id": "C1", "origin": "control", "verdict": PREMISE_NOT_MET}]
    assert verdict_problems("k", ok) == []
    wrong = [{"id": "ST.H2", "origin": "study", "verdict": "agrees"},
             {"id": "S5.pi", "origin": "paper", "verdict": study.REVERSED}]
    assert verdict_problems("k", wrong) == ["k: claim ST.H2 has verdict 'agrees'",
                                            "k: claim S5.pi has verdict 'reversed'"]


def test_the_exploratory_part_reads_the_locked_analysis_and_labels_itself():
    """Issue 74, item 6 (lsa.sections.study.figures): the moderators, the exploratory
    estimates (dose, additivity) and every test's signed-rank p, each the analysis' own number,
    and a page that labels them exploratory with their interval's level."""
    from lsa.sections.study.figures import exploratory_markdown, exploratory_part

    cfg = small_config(stages=2)
    runs = synthetic(cfg, list(range(1, 9)), sd=0.2, shift=0.1)
    a = study.analyse(cfg, runs, base_table(range(1, 9)), {"eabf": True, "yarn": True,
                                                           "pi": True}, 3.0)
    found = exploratory_part(a)
    assert found["moderators"] == a.moderators
    table = a.table().set_index("id")
    assert [e["id"] for e in found["estimates"]] == ["E.dose", "E.additivity"]
    for e in found["estimates"]:
        assert (e["estimate"], e["low"], e["high"], e["level"]) == tuple(
            table.loc[e["id"], ["estimate", "low", "high", "level"]])
    assert [r["id"] for r in found["signed_rank"]] == list(table.index)
    assert [r["signed_rank_p"] for r in found["signed_rank"]] == pytest.approx(
        list(table["signed_rank_p"]), nan_ok=True)
    page = exploratory_markdown(found)
    assert page.startswith("**Exploratory, as pre-registered (no verdict)**")
    assert "95.00%" in page and "| E.dose " in page
