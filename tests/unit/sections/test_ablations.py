"""Section 5.3 (lsa.sections.ablations: its analyse on fixture tables, its tables and claims)
and the ablation runs of the configuration."""

import dataclasses
import math
import typing

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from lsa.config import AblationConfig, AblationItem, ConfigError, load_config
from lsa.gates import Gate
from lsa.runs import ablation_specs, make_run, runs_of, runs_root
from lsa.runtable import RunTables
from lsa.sections import ablations, with_premise
from lsa.sections.ablations import claims, tables
from lsa.stats import interval_p, sign_verdict


def test_run_names_follow_the_settings():
    assert make_run("pi", 0.1, 2).name == "pi_a0.1_s2"
    assert make_run("pi", 1.0, 0, divergence="jeffreys").name == "pi_a1_s0_jeffreys"
    assert make_run("pi", 0.0, 0, divergence="entropy").name == "pi_a0_s0"  # CE is CE
    assert make_run("pi", 0.0, 1, ce_on="both").name == "pi_a0_s1_ceboth"
    assert make_run("pi", 0.1, 0, l_extra_setting=4).name == "pi_a0.1_s0_lx4"
    assert make_run("pi", 0.0, 0, steps=75).name == "pi_a0_s0_steps75"


def test_mini_runs_item_1_core_and_item_4_sharing_the_grid():
    pipe = load_config(profile="mini")
    runs = runs_of(pipe)
    names = set(runs.ablation)
    assert pipe.ablation.method == "eabf"  # config/config.yaml: the rule fixed before the runs
    for s in (0, 1, 2):
        assert {f"eabf_a0_s{s}", f"eabf_a0.1_s{s}", f"eabf_a0.1_s{s}_jeffreys",
                f"eabf_a1_s{s}_jeffreys", f"eabf_a0.1_s{s}_entropy",
                f"eabf_a0_s{s}_ceboth"} <= names
    shared = names & set(runs.grid)  # the grid has 3 seeds: CE and SCE 0.1 are its runs
    assert shared == {f"eabf_a{a}_s{s}" for a in ("0", "0.1") for s in (0, 1, 2)}
    assert len(names - shared) == 12


def test_mini_full_shares_minis_run_folders():
    mini, full = runs_of(load_config(profile="mini")), runs_of(load_config(profile="mini-full"))
    assert runs_root("mini-full") == runs_root("mini")
    for name, run in mini.finetune.items():
        assert full.finetune[name].id == run.id
    assert full.base.id == mini.base.id
    assert set(mini.ablation) < set(full.ablation)
    items = load_config(profile="mini-full").ablation.items
    assert set(items) == {item.key for item in ablations.ITEMS}


@pytest.mark.parametrize("data, words", [
    ({"jeffreys_alphas": [0.0]}, "jeffreys_alphas .* > 0"),
    ({"l_extra_settings": [5]}, "l_extra_settings"),
    ({"method": "none"}, "positional method"),
    ({"items": ["everything"]}, "items"),
])
def test_bad_ablation_settings_fail_with_the_key(data, words):
    with pytest.raises(ConfigError, match=words):
        AblationConfig.from_dict(data)


def test_item_runs_are_unique_and_in_order():
    cfg = AblationConfig(items=["divergence", "exposure", "compute", "parts"], seeds=[0],
                         compute_steps=[75])
    names = [s.name for s in ablation_specs(cfg)]
    assert len(names) == len(set(names))
    assert names[:4] == ["pi_a0_s0", "pi_a0.1_s0", "pi_a0.1_s0_jeffreys", "pi_a0.1_s0_entropy"]
    assert {"pi_a0_s0_ceboth", "pi_a0_s0_steps75", "none_a0_s0", "none_a0.1_s0"} <= set(names)


def table(values: dict[tuple[str, str, int], float]) -> pd.DataFrame:
    return pd.DataFrame([{"method": m, "setting": s, "seed": seed, "ppl_4x": v}
                         for (m, s, seed), v in values.items()])


def test_paired_effects_by_hand():
    runs = table({("pi", "CE", 0): 10.0, ("pi", "CE", 1): 12.0, ("pi", "CE", 2): 11.0,
                  ("pi", "Jeffreys 0.1", 0): 9.0, ("pi", "Jeffreys 0.1", 1): 10.0,
                  ("pi", "Jeffreys 0.1", 2): 10.0})
    eff = tables.effects(runs, [("pi", "Jeffreys 0.1", "pi", "CE")], ["ppl_4x"])
    row = eff.iloc[0]
    # differences -1, -2, -1: mean -4/3, sd 0.577, t(2) 4.303 -> half width 1.434
    assert row.delta == pytest.approx(-4 / 3)
    half = 4.302653 * np.std([-1, -2, -1], ddof=1) / math.sqrt(3)
    assert (row.low, row.high) == pytest.approx((-4 / 3 - half, -4 / 3 + half), rel=1e-5)
    assert sign_verdict(row.low, row.high, -1, row.seeds) == "inconclusive"  # [-2.77, 0.10]
    assert sign_verdict(-2.0, -0.5, -1, 3) == "agrees"
    assert sign_verdict(0.5, 2.0, -1, 3) == "disagrees"
    assert sign_verdict(-2.0, -0.5, -1, 1) == "inconclusive"  # one seed: no verdict
    assert sign_verdict(math.nan, math.nan, -1, 0) == "not run"


def given(cfg, column, steps=10, equal_steps=20.0):
    """What an item's claims read beside its effects (``ablations.ItemInputs``)."""
    return ablations.ItemInputs(cfg=cfg, column=column, runs=pd.DataFrame(), steps=steps,
                                equal_steps=equal_steps)


def _eff(rows):
    base = {"baseline_mean": 10.0, "changed_mean": 9.0, "seeds": 3, "bases": 1, "n": 3,
            "method": "pi"}
    return pd.DataFrame([{**base, **r} for r in rows])


def test_closing_text_leads_with_the_same_cost_control_and_the_metric():
    eff = _eff([
        {"setting": "Jeffreys 1", "baseline": "pi CE (both windows)", "column": "nll_4x",
         "delta": -0.1, "low": -0.15, "high": -0.05},
        {"setting": "Jeffreys 1", "baseline": "pi CE", "column": "nll_4x",
         "delta": -0.2, "low": -0.3, "high": -0.1},
        {"setting": "Jeffreys 1", "baseline": "pi CE", "column": "misalignment",
         "delta": 0.04, "low": -0.09, "high": 0.18},
        {"setting": "SCE 0.1", "baseline": "pi CE (both windows)", "column": "nll_4x",
         "delta": 0.1, "low": -0.2, "high": 0.4},
        {"setting": "SCE 0.1", "baseline": "pi CE", "column": "nll_4x",
         "delta": 0.1, "low": 0.05, "high": 0.15}])
    text = ablations.closing_text(eff, "nll_4x")
    jeff = next(line for line in text.splitlines() if line.startswith("- **Jeffreys 1**"))
    assert jeff.index("against pi CE (both windows): helps") < jeff.index("against pi CE: helps")
    assert "L_misalign unclear" in jeff and "helps without lowering the paper's metric" in jeff
    assert "against pi CE: hurts" in text and "against pi CE (both windows): unclear" in text
    assert "Against the same-cost control, alignment without sharpening helps" in text
    assert "not run" in ablations.closing_text(None, "nll_4x")


def test_far_context_text_answers_whether_a_regularizer_ignores_far_context():
    eff = _eff([
        {"setting": "SCE 0.1", "baseline": "pi CE", "column": "nll_copy_1x",
         "delta": 0.3, "low": 0.1, "high": 0.5},       # uses the far context less
        {"setting": "SCE 0.1", "baseline": "pi CE", "column": "nll_4x",
         "delta": -0.3, "low": -0.5, "high": -0.1},    # not a copy column: not read
        {"setting": "Jeffreys 1", "baseline": "pi CE", "column": "nll_copy_1x",
         "delta": 0.1, "low": -0.2, "high": 0.4},
        {"setting": "Jeffreys 1", "baseline": "pi CE (both windows)", "column": "nll_copy_1x",
         "delta": 0.1, "low": 0.05, "high": 0.15}])   # the fair control does not decide it
    text = ablations.far_context_text(eff)
    assert "SCE 0.1 raise the copy NLL against CE-only" in text
    assert "Jeffreys 1 raise" not in text
    assert "Jeffreys and SCE differ there (SCE: raises; Jeffreys: unclear)" in text
    assert "nll_4x" not in text
    calm = eff.assign(low=-0.1, high=0.2)
    assert "No arm raises the copy NLL" in ablations.far_context_text(calm)
    assert "behave alike" in ablations.far_context_text(calm)
    assert "not answered" in ablations.far_context_text(None)
    # no verdict from the 2x probes alone, nor from one seed
    assert "not answered" in ablations.far_context_text(eff[eff["column"] != "nll_copy_1x"])
    assert "not answered" in ablations.far_context_text(eff.assign(seeds=1, n=1))
    runs = pd.DataFrame(columns=["nll_copy_1x", "nll_copy_4x", "nll_copy_2x", "nll_1x"])
    assert tables.far_columns(runs) == ["nll_copy_1x", "nll_copy_2x"]


def test_base_effects_pair_within_each_base_model_and_keep_its_variance():
    from lsa.config import AblationConfig

    cfg = AblationConfig(seeds=[0, 1], base_seeds=[1], alpha=0.1, robust_jeffreys_alpha=1.0)
    assert tables.core_pairs(cfg)[0] == ("SCE 0.1", "CE (both windows)")
    rows = []
    for base, shift in ((0, -1.0), (1, +3.0)):  # the SCE effect: -1 on base 0, +3 on base 1
        for seed in (0, 1):
            noise = 0.5 * seed  # shared within a (base, seed): it cancels in the pair
            for setting, v in (("CE (both windows)", 10.0), ("CE", 11.0), ("Jeffreys 1", 10.0),
                               ("SCE 0.1", 10.0 + shift)):
                rows.append({"method": "pi", "setting": setting, "seed": seed,
                             "base_seed": base, "nll_4x": v + noise + base})
    eff = tables.base_effects(pd.DataFrame(rows), cfg, ["nll_4x"])
    row = eff[(eff["setting"] == "SCE 0.1") & (eff["baseline"] == "CE (both windows)")].iloc[0]
    assert row.delta == pytest.approx(1.0) and row.pairs == 4 and row.bases == 2
    assert row.per_base == "base 0: -1, base 1: +3"
    # the t over the two base means (1 df): 1 +- 12.706 x sd(-1, 3) / sqrt(2) = 1 +- 25.41
    half = 12.706205 * math.sqrt(8) / math.sqrt(2)
    assert (row.low, row.high) == pytest.approx((1 - half, 1 + half))
    flat = eff[(eff["setting"] == "CE (both windows)") & (eff["baseline"] == "CE")].iloc[0]
    assert flat.delta == pytest.approx(-1.0) and (flat.low, flat.high) == pytest.approx((-1, -1))
    text = ablations.bases_text(eff)
    assert "SCE 0.1 vs CE (both windows)**, nll_4x: +1 [-24.4, +26.4]" in text
    assert "unclear, opposite signs between base models" in text
    assert "CE (both windows) vs CE**, nll_4x: -1 [-1, -1]" in text and "helps, the same sign" \
        in text
    assert "One base model" in ablations.bases_text(None)
    one = tables.base_effects(pd.DataFrame(rows)[lambda r: r["base_seed"] == 0], cfg,
                                ["nll_4x"])
    gains = pd.DataFrame([{"base": "base", "value": 1.2, "low": 1.1, "high": 1.3},
                          {"base": "base_s1", "value": 0.3, "low": 0.1, "high": 0.5}])
    text = ablations.bases_text(one, gains)
    assert "one base model only" in text and "same sign" not in text
    assert "base: 1.2 [1.1, 1.3] nats; base_s1: 0.3 [0.1, 0.5] nats" in text


def test_far_context_claims_come_after_the_items_claims_whose_ids_stay():
    from lsa.config import AblationConfig

    cfg = AblationConfig(items=["divergence"], seeds=[0, 1], sce_alphas=[0.1],
                         jeffreys_alphas=[1.0], entropy_alphas=[0.1])
    rows = [{"method": "pi", "setting": s, "baseline": "pi CE", "column": c, "delta": 0.1,
             "low": -0.1, "high": 0.3, "seeds": 2, "bases": 1, "n": 2, "baseline_mean": 1.0,
             "changed_mean": 1.1}
            for s in ("SCE 0.1", "Jeffreys 1", "entropy 0.1")
            for c in ("nll_4x", "ppl_4x", "misalignment", "jeffreys", "mean_entropy",
                      "nll_copy_1x", "nll_copy_2x")]
    with_far, without = claims.Claims(), claims.Claims()
    claims.divergence_claims(with_far, pd.DataFrame(rows), given(cfg, "nll_4x"))
    plain = pd.DataFrame([r for r in rows if not r["column"].startswith("nll_copy")])
    claims.divergence_claims(without, plain, given(cfg, "nll_4x"))
    ids = [c.id for c in with_far.claims]
    assert ids[:len(without.claims)] == [c.id for c in without.claims]
    assert ids[len(without.claims):] == [f"A1.F{i}" for i in range(1, 7)]


def test_one_claim_per_comparison_the_papers_direction_and_the_controls_apart():
    from lsa.config import AblationConfig

    cfg = AblationConfig(items=["divergence", "alpha_sweep", "exposure", "parts"], seeds=[0, 1],
                         sce_alphas=[0.1, 0.3, 1.0], jeffreys_alphas=[1.0], entropy_alphas=[0.1],
                         sweep_methods=["pi"], sweep_alphas=[0.0, 0.1, 1.0])
    pairs = (tables.divergence_pairs(cfg) + tables.sweep_pairs(cfg)
             + tables.exposure_pairs(cfg) + tables.parts_pairs(cfg))
    rows = [{"method": m, "setting": st, "baseline": f"{bm} {bs}", "column": col,
             "delta": -1.0, "low": -2.0, "high": -0.5}
            for m, st, bm, bs in pairs for col in ("nll_4x", "ppl_4x", "misalignment",
                                                     "jeffreys", "mean_entropy")]
    eff = _eff(rows)
    out = claims.Claims()
    claims.divergence_claims(out, eff, given(cfg, "nll_4x"))
    claims.sweep_claims(out, eff, given(cfg, "nll_4x"))
    claims.exposure_claims(out, eff, given(cfg, "nll_4x"))
    claims.parts_claims(out, eff, given(cfg, "nll_4x"))
    keys = [(c.claim, c.ours) for c in out.claims]
    assert len(out.seen) == len(out.claims) == len(set(out.seen.values()))
    by = {c.claim: c for c in out.claims}
    # SCE 0.1 against CE-only: the paper's claim, "lower"; SCE 1: the paper's "higher" (Table 4)
    low = by["CE + 0.1 x SCE lowers the longest-window NLL (pi)"]
    assert low.kind == "paper" and low.verdict == "agrees in direction; the paper gives no size"
    high = by["CE + 1 x SCE raises the longest-window NLL (pi)"]
    assert high.kind == "paper" and high.verdict == "disagrees"  # it lowered it here
    # no paper direction at 0.3, none for Jeffreys, none against the same-cost control
    for claim in out.claims:
        if "0.3 x SCE" in claim.claim or "Jeffreys" in claim.claim or "both windows" in \
                claim.claim:
            assert claim.kind == "control" and claim.verdict in ("helps", "lowers")
    # the sweep's SCE 0.1 / SCE 1 vs CE and parts' "combining" pair are item 1's: not again
    assert not any(c.claim.startswith("Combining both") for c in out.claims)
    assert not any(c.id.startswith("A2.") for c in out.claims)
    # the same-cost comparison comes before CE-only for every arm
    ids = [c.id for c in out.claims if c.claim.startswith("CE + 0.1 x SCE")]
    assert "both windows" in by[next(c.claim for c in out.claims if c.id == ids[0])].claim
    assert len(keys) == len(set(keys))


def test_multiplicity_counts_the_tests():
    made = [{"verdict": "agrees", "kind": "paper"}, {"verdict": "unclear", "kind": "control"},
            {"verdict": "not run", "kind": "paper"}]
    text = ablations.multiplicity_text(made)
    assert text.startswith("2 comparisons tested (1 of the paper's claims, 1 controls), 1 clear")


def test_equal_compute_is_counted_not_timed():
    """Two windows of l_train tokens, forward and backward: twice a CE step on window A; the
    distinct tokens of setting 1 (l_extra ~ U[1, l/2], mean 64.5 at l = 256)."""
    acc = tables.equal_compute_steps(60, 256)
    assert acc == {"equal sequences": 60.0,
                   "equal distinct tokens": pytest.approx(60 * (256 + 64.5) / 256),
                   "equal forward and backward tokens": 120.0}


def test_the_compute_claim_takes_the_run_nearest_to_equal_counted_work():
    from lsa.config import AblationConfig

    cfg = AblationConfig(items=["compute"], seeds=[0, 1], compute_steps=[75, 120])
    eff = pd.DataFrame([{"method": "pi", "setting": arm, "baseline": "pi CE, 120 steps",
                         "column": "ppl_4x", "delta": d, "low": d - 4, "high": d + 4,
                         "seeds": 2, "bases": 1, "n": 2, "baseline_mean": 180.0,
                         "changed_mean": 180.0 + d,
                         "noise": 1.0} for arm, d in (("SCE 0.1", 11.0), ("Jeffreys 1", -6.0))])
    out = claims.Claims()
    claims.compute_claims(out, eff, given(cfg, "ppl_4x", steps=60, equal_steps=120.0))
    claim, jeffreys = out.claims
    assert claim.verdict == "disagrees" and "PPL 180 -> 191" in claim.ours
    assert "CE-only 120 steps, the run nearest to equal counted work" in str(claim)
    # twice the steps is the review's reading of the cost: an objection, with its own p
    assert (claim.id, claim.kind, claim.origin) == ("A5.1", "paper", "objection")
    assert claim.p == pytest.approx(interval_p(7.0, 15.0, 2))
    # Jeffreys (also two windows per step) meets the same equal-compute run, as a control
    assert jeffreys.id == "A5.2" and jeffreys.kind == "control" and jeffreys.verdict == "helps"
    assert ("pi", "Jeffreys 1", "pi", "CE, 120 steps") in tables.compute_pairs(cfg)
    # with item 1 run, each of its two-window arms meets the equal-compute run as well, once
    both = AblationConfig(items=["divergence", "compute"], seeds=[0, 1], compute_steps=[120],
                          sce_alphas=[0.1, 1.0], jeffreys_alphas=[1.0], entropy_alphas=[0.1])
    assert tables.compute_arms(both) == [("sce", 0.1), ("jeffreys", 1.0), ("sce", 1.0),
                                           ("entropy", 0.1)]
    pairs = tables.compute_pairs(both)[3:]  # after the paper's three budgets
    assert [st for _, st, _, _ in pairs[:4]] == ["SCE 0.1", "Jeffreys 1", "SCE 1", "entropy 0.1"]
    rows = [{"method": "pi", "setting": st, "baseline": f"{bm} {bs}", "column": "ppl_4x",
             "delta": -1.0, "low": -2.0, "high": -0.5} for _, st, bm, bs in pairs[:4]]
    out = claims.Claims()
    claims.compute_claims(out, _eff(rows), given(both, "ppl_4x", steps=60, equal_steps=120.0))
    assert [c.id for c in out.claims] == ["A5.1", "A5.2", "A5.3", "A5.4"]
    assert [c.origin for c in out.claims] == ["objection", "control", "control", "control"]
    assert out.claims[3].claim.startswith("CE + 0.1 x entropy against CE-only at equal")


def test_an_item_not_run_says_so():
    claim = claims.not_run(2, "2. The alpha sweep (Table 4)")
    assert claim["verdict"] == "not run" and claim["id"] == "A2.0"


def test_a_comparison_section_5_claims_is_a_control_here():
    """CE + 0.1 SCE vs CE-only for a method Section 5 runs at alpha 0.1 is the paper's claim
    there (Tables 2-3); notebook 04 keeps it as a check, so the paper's claim counts once."""
    from lsa.config import AblationConfig

    cfg = AblationConfig(items=["divergence"], seeds=[0, 1], sce_alphas=[0.1, 1.0],
                         jeffreys_alphas=[1.0], entropy_alphas=[0.1])
    rows = [{"method": m, "setting": st, "baseline": f"{bm} {bs}", "column": col,
             "delta": -1.0, "low": -2.0, "high": -0.5}
            for m, st, bm, bs in tables.divergence_pairs(cfg)
            for col in ("nll_4x", "ppl_4x", "misalignment", "jeffreys", "mean_entropy")]
    alone, shared = claims.Claims(), claims.Claims({("pi", 0.1), ("clex", 0.1)})
    for out in (alone, shared):
        claims.divergence_claims(out, _eff(rows), given(cfg, "nll_4x"))
    kinds = {c.id: (c.kind, c.verdict) for c in alone.claims}
    again = {c.id: c for c in shared.claims}
    assert [c.id for c in alone.claims] == list(again)  # the ids do not move
    low = next(c for c in alone.claims if c.claim.startswith("CE + 0.1 x SCE lowers"))
    assert kinds[low.id] == ("paper", "agrees in direction; the paper gives no size")
    assert again[low.id].kind == "control" and again[low.id].verdict == "helps"
    assert "Section 5" in again[low.id].claim and "counted there" in again[low.id].evidence
    # SCE 1 is Table 4's claim (no Section 5 run at alpha 1): still the paper's
    high = next(c for c in shared.claims if c.claim.startswith("CE + 1 x SCE raises"))
    assert high.kind == "paper"
    mis = next(c for c in shared.claims if c.claim == "CE + 0.1 x SCE: its effect on "
               "misalignment (pi)")
    assert "counted there" in mis.evidence and mis.kind == "control"
    assert sum(c.kind == "paper" for c in shared.claims) == sum(
        c.kind == "paper" for c in alone.claims) - 1


def test_every_two_window_comparison_meets_its_same_cost_control():
    from lsa.config import AblationConfig

    cfg = AblationConfig(items=["alpha_sweep", "parts"], seeds=[0, 1],
                         sweep_methods=["clex", "pi"], sweep_alphas=[0.0, 0.5])
    names = {s.name for s in ablation_specs(cfg)}  # the controls are run, for each method
    assert {"clex_a0_s0_ceboth", "pi_a0_s1_ceboth", "none_a0_s0_ceboth"} <= names
    pairs = tables.sweep_pairs(cfg)
    assert pairs == [("clex", "SCE 0.5", "clex", "CE (both windows)"),
                     ("clex", "SCE 0.5", "clex", "CE"),
                     ("pi", "SCE 0.5", "pi", "CE (both windows)"), ("pi", "SCE 0.5", "pi", "CE")]
    assert tables.parts_pairs(cfg)[0] == ("none", "SCE 0.1", "none", "CE (both windows)")
    rows = [{"method": m, "setting": st, "baseline": f"{bm} {bs}", "column": "nll_4x",
             "delta": -1.0, "low": -2.0, "high": -0.5}
            for m, st, bm, bs in pairs + tables.parts_pairs(cfg)]
    out = claims.Claims()
    claims.sweep_claims(out, _eff(rows), given(cfg, "nll_4x"))
    claims.parts_claims(out, _eff(rows), given(cfg, "nll_4x"))
    assert [c.id for c in out.claims] == ["A2.1", "A2.2", "A2.3", "A2.4",
                                          "A6.4", "A6.1", "A6.2", "A6.3"]
    fair = [c for c in out.claims if "both windows" in c.claim]
    assert [c.id for c in fair] == ["A2.1", "A2.3", "A6.4"]
    assert all(c.kind == "control" and "same cost" in c.evidence for c in fair)
    assert out.claims[5].kind == "paper"  # A6.1: the paper's claim, against CE-only


def test_the_far_context_question_per_method_against_the_same_cost_control():
    from lsa.config import AblationConfig

    cfg = AblationConfig(items=["exposure"], method="eabf", seeds=[0, 1, 2],
                         control_methods=["clex", "eabf"])
    assert tables.far_context_methods(cfg) == ["eabf", "clex"]  # the ablation method first
    assert tables.far_context_pairs(cfg) == [
        ("eabf", "SCE 0.1", "eabf", "CE (both windows)"), ("eabf", "SCE 0.1", "eabf", "CE"),
        ("clex", "SCE 0.1", "clex", "CE (both windows)"), ("clex", "SCE 0.1", "clex", "CE")]
    rows = []
    for seed, (up, flat) in enumerate(((0.30, 0.05), (0.20, -0.05), (0.25, 0.02))):
        for m, shift in (("eabf", up), ("clex", flat)):
            for setting, v in (("CE", 2.0), ("CE (both windows)", 2.0), ("SCE 0.1", 2.0 + shift)):
                rows.append({"method": m, "setting": setting, "seed": seed,
                             "nll_copy_1x": v + 0.1 * seed, "nll_copy_2x": v})
    eff = tables.effects(pd.DataFrame(rows), tables.far_context_pairs(cfg),
                           ["nll_copy_1x", "nll_copy_2x"])
    row = eff[(eff["method"] == "eabf") & (eff["baseline"] == "eabf CE (both windows)")
              & (eff["column"] == "nll_copy_1x")].iloc[0]
    assert row.delta == pytest.approx(0.25) and row.seeds == 3  # the mean of +0.30 +0.20 +0.25
    out = claims.Claims()
    claims.far_context_claims(out, eff, cfg)
    by_id = {c.id: c for c in out.claims}
    assert list(by_id) == ["A4.F1", "A4.F2", "A4.F3", "A4.F4"]
    assert by_id["A4.F1"].verdict == "raises" and by_id["A4.F1"].method == "eabf"
    assert by_id["A4.F3"].verdict == "unclear" and by_id["A4.F3"].method == "clex"
    assert by_id["A4.F1"].kind == "control"
    text = ablations.far_context_text(None, eff)
    assert "for eabf: there it teaches the model" in text
    assert "**clex**: SCE 0.1 against CE on both windows: unclear" in text
    assert ablations.far_context_by_method(None) == ""


def test_control_methods_add_each_methods_same_cost_control_to_the_plan():
    from lsa.config import load_config
    from lsa.runs import ablation_specs

    pipe = load_config(profile="smoke", overrides={"profiles": {"smoke": {"ablation": {
        "items": ["exposure"], "seeds": [0, 1], "control_methods": ["yarn"]}}}})
    names = {s.name for s in ablation_specs(pipe.ablation)}
    assert {"yarn_a0_s1", "yarn_a0_s1_ceboth", "yarn_a0.1_s1"} <= names
    assert {f"{pipe.ablation.method}_a0_s0_ceboth"} <= names


# ---------------------------------------------------------------------------------------------
# analyse, on run tables built by hand (no runs)


def _pipe(**ablation):
    """The smoke configuration with these ablation settings; Section 5 claims no SCE alpha
    (``finetune.alphas`` [0]), so SCE 0.1 against CE-only is the paper's claim here."""
    pipe = load_config(profile="smoke")
    return dataclasses.replace(
        pipe, ablation=dataclasses.replace(pipe.ablation, **ablation),
        finetune=dataclasses.replace(pipe.finetune, alphas=[0.0]))


def _tables(pipe, nll_4x, gains=None):
    """``RunTables`` of ablation runs, one per (method, setting, seed[, base seed]) of
    ``nll_4x`` (the judged column; every other column the same for every run)."""
    rows = []
    for key, nll in nll_4x.items():
        method, setting, seed, base = (*key, pipe.pretrain.seed)[:4]
        rows.append({"method": method, "setting": setting, "seed": seed, "base_seed": base,
                     "ppl_1x": 10.0, "nll_1x": math.log(10.0), "ppl_4x": math.exp(nll),
                     "nll_4x": nll, "ppl_growth": 1.5, "misalignment": 0.5, "jeffreys": 0.3,
                     "entropy": 4.0})
    gains = pd.DataFrame(gains or [], columns=["base", "value", "low", "high"])
    return RunTables(ablation=pd.DataFrame(rows), base_gains=gains)


#: CE, Jeffreys 1 (-0.3, -0.2, -0.25 nats) and SCE 0.1 (+0.15, +0.08, +0.12) by seed
CRAFTED = {**{("pi", "CE", s): v for s, v in enumerate((3.0, 3.2, 3.1))},
           **{("pi", "Jeffreys 1", s): v for s, v in enumerate((2.7, 3.0, 2.85))},
           **{("pi", "SCE 0.1", s): v for s, v in enumerate((3.15, 3.28, 3.22))}}


def test_analyse_pairs_each_arm_with_its_baseline_by_seed_and_judges_the_interval():
    pipe = _pipe(items=["divergence"], seeds=[0, 1, 2], sce_alphas=[0.1], jeffreys_alphas=[1.0],
                 entropy_alphas=[0.1])
    result = ablations.analyse(pipe, _tables(pipe, CRAFTED), [])
    eff = result.effects["divergence"]
    jeff = eff[(eff["setting"] == "Jeffreys 1") & (eff["column"] == "nll_4x")].iloc[0]
    # differences -0.3, -0.2, -0.25: mean -0.25, sd 0.05, t(2) 4.3027 -> half width 0.1242
    half = 4.302653 * 0.05 / math.sqrt(3)
    assert jeff.delta == pytest.approx(-0.25) and jeff.seeds == 3
    assert (jeff.low, jeff.high) == pytest.approx((-0.25 - half, -0.25 + half), rel=1e-5)
    by_claim = {c["claim"]: c for c in result.claims}
    control = by_claim["CE + 1 x Jeffreys against pi CE (longest-window NLL)"]
    assert control["kind"] == "control" and control["verdict"] == "helps"
    assert control["ours"].startswith("NLL 3.1 -> 2.85, paired diff -0.25 [-0.374, -0.126]")
    # SCE 0.1 raised the NLL in every seed (+0.117 [+0.029, +0.204]): against the paper's "lower"
    sce = by_claim["CE + 0.1 x SCE lowers the longest-window NLL (pi)"]
    assert sce["kind"] == "paper" and sce["verdict"] == "disagrees" and sce["id"] == "A1.1"
    assert "+0.117 [+0.0294, +0.204]" in sce["ours"]
    # the metric did not move (the same in every run): unclear
    assert by_claim["CE + 1 x Jeffreys: its effect on misalignment (pi)"]["verdict"] == "unclear"
    assert "Jeffreys 1**: against pi CE: helps" in result.metrics["closing"]
    assert result.premise_method == "pi" and result.long_nll == "nll_4x"
    assert result.long == "ppl_4x" and result.compute is None


def test_the_item_records_are_the_configurations_items_and_say_when_not_run():
    assert tuple(item.key for item in ablations.ITEMS) == typing.get_args(AblationItem)
    assert [item.label[0] for item in ablations.ITEMS] == ["1", "2", "3", "4", "5", "6"]
    pipe = _pipe(items=["parts"])
    result = ablations.analyse(pipe, _tables(pipe, CRAFTED), [])
    assert [(c["id"], c["claim"], c["verdict"]) for c in result.claims[:5]] == [
        (f"A{n}.0", item.label, "not run") for n, item in enumerate(ablations.ITEMS[:5], start=1)]
    assert [c["id"] for c in result.claims[5:]] == ["A6.4", "A6.1", "A6.2", "A6.3"]
    assert list(result.effects) == ["parts"]
    assert list(result.saved_tables()) == ["runs", "effects_parts"]
    assert result.metrics["closing"] == "Item 1 was not run in this profile: nothing to conclude."


def test_analyse_saves_each_items_effects_under_its_name_in_the_items_order():
    pipe = _pipe(items=["parts", "divergence", "compute", "exposure"], seeds=[0, 1, 2],
                 base_seeds=[1])
    base1 = {("pi", s, seed, 1): v for s, v in (("CE", 3.0), ("CE (both windows)", 2.9),
                                                ("SCE 0.1", 3.1), ("Jeffreys 1", 2.8))
             for seed in (0, 1, 2)}
    gains = [{"base": "base", "value": 0.5, "low": 0.2, "high": 0.8},
             {"base": "base_s1", "value": 0.25, "low": -0.1, "high": 0.6}]
    result = ablations.analyse(pipe, _tables(pipe, {**CRAFTED, **base1}, gains), [])
    found = [Gate("G1", "q", 1.0, 0.5, 1.5, 0.1, True, "")]
    result = with_premise(result, found, [])
    assert list(result.saved_tables()) == [
        "gates", "runs", "effects_divergence", "effects_exposure", "effects_compute",
        "effects_parts", "effects_far_context", "bases", "runs_every_base", "compute_paper",
        "claims_paper",
        "claims_controls"]
    assert result.compute == tables.equal_compute_steps(10, 128)
    assert len(result.runs) == len(CRAFTED) and len(result.runs_every_base) == len(CRAFTED) + 12
    assert "base: 0.5 [0.2, 0.8] nats; base_s1: 0.25 [-0.1, 0.6] nats" in result.metrics["bases"]


def test_the_premise_hook_says_the_texts_are_no_verdict_and_splits_the_claims():
    pipe = _pipe(items=["divergence"], seeds=[0, 1, 2], sce_alphas=[0.1], jeffreys_alphas=[1.0],
                 entropy_alphas=[0.1])
    required = pipe.sections["04_ablations"].gates
    for passed in (True, False):
        found = [Gate(g, "q", 1.0, 0.5, 1.5, 0.1, passed if g == "G1" else True, "")
                 for g in ("G1", "G2", "G3.pi")]
        result = with_premise(ablations.analyse(pipe, _tables(pipe, CRAFTED), []), found,
                              required)
        prefixed = [result.metrics[k].startswith("**Premise not met**")
                    for k in ("closing", "far_context", "bases")]
        assert prefixed == [not passed] * 3 and result.metrics["premise_met"] is passed
        verdicts = {c["verdict"] for c in result.claims if c["verdict"] != "not run"}
        assert (verdicts == {"premise not met"}) is not passed
        assert len(result.claims_paper) + len(result.claims_controls) == len(result.claims)
        assert list(result.claims_paper["verdict"]) == (
            ["not run"] * 5 + ["disagrees" if passed else "premise not met"])


def test_effects_take_the_base_models_as_a_random_factor_where_both_settings_ran_on_them():
    """Pairs by (base model, seed): where both settings ran on two base models the interval is
    the t over the base means (1 df), the row counts bases and seeds; a comparison that ran on
    one base model keeps its t over seeds, as before."""
    rows = []
    for base, shift in ((0, -1.0), (1, +3.0)):
        for seed in (0, 1):
            for setting, v in (("CE", 10.0), ("SCE 0.1", 10.0 + shift + 0.1 * seed)):
                rows.append({"method": "eabf", "setting": setting, "seed": seed,
                             "base_seed": base, "nll_4x": v})
    rows += [{"method": "eabf", "setting": "Jeffreys 1", "seed": s, "base_seed": 0,
              "nll_4x": 9.0 + 0.5 * s} for s in (0, 1)]
    eff = tables.effects(pd.DataFrame(rows), [("eabf", "SCE 0.1", "eabf", "CE"),
                                              ("eabf", "Jeffreys 1", "eabf", "CE")], ["nll_4x"])
    sce, jeff = eff.iloc[0], eff.iloc[1]
    means = [-1.0 + 0.05, 3.0 + 0.05]                     # each base's mean over its seeds
    half = 12.706205 * np.std(means, ddof=1) / math.sqrt(2)
    assert (sce.bases, sce.seeds, sce.n) == (2, 2, 2)
    assert (sce.delta, sce.low, sce.high) == pytest.approx((1.05, 1.05 - half, 1.05 + half))
    assert (jeff.bases, jeff.seeds, jeff.n) == (1, 2, 2)  # one base: the seeds' t interval
    from lsa.stats import paired_interval

    ci = paired_interval([9.0, 9.5], [10.0, 10.0])
    assert (jeff.low, jeff.high) == pytest.approx((ci.low, ci.high))
    assert "2 base models (t over their means) x 2 seeds" in claims.effect_text(sce)


def test_the_l_extra_settings_are_the_rebuttals_three_claims_on_the_papers_arm():
    """SCE 0.1: setting 2 "comparable" (the 95 % interval inside +-m, m = ln(5.82 / 5.77), the
    paper's own effect on LongQLoRA), 3 "slightly inferior" and 4 "significantly worse" by
    direction (the NLL higher); the paper's on LongQLoRA, extensions elsewhere; Jeffreys'
    rows stay controls."""
    margin = math.log(5.82 / 5.77)  # 0.00863 nats: docs/methods.md, fixed before the rows
    assert claims.equivalence_margin() == pytest.approx(margin)
    for method, origin in (("longqlora", "paper"), ("eabf", "extension")):
        cfg = AblationConfig(items=["l_extra"], method=method, seeds=[0, 1, 2],
                             l_extra_jeffreys_alphas=[1.0])
        by_setting = {2: (-0.004, 0.006), 3: (0.01, 0.05), 4: (-0.02, 0.01)}
        rows = [{"method": method, "setting": st, "baseline": f"{bm} {bs}", "column": "nll_4x",
                 "low": by_setting[int(st[-1])][0], "high": by_setting[int(st[-1])][1],
                 "delta": sum(by_setting[int(st[-1])]) / 2, "n": 3}
                for _, st, bm, bs in tables.l_extra_pairs(cfg)]
        out = claims.Claims()
        claims.l_extra_claims(out, _eff(rows), given(cfg, "nll_4x"))
        two, three, four, *jeffreys = out.claims
        assert [c.id for c in out.claims] == [f"A3.{i}" for i in range(1, 7)]
        assert [c.origin for c in (two, three, four)] == [origin] * 3
        assert two.verdict == "agrees" and "comparable" in two.claim  # [-0.004, 0.006] in +-m
        assert two.paper.startswith('"comparable"') and math.isnan(two.direction)
        # TOST: centre 0.001, se = 0.005 / t(2); p = 2 P(T2 > (m - 0.001) / se) < 0.05
        se = 0.005 / stats.t.ppf(0.975, 2)
        assert two.p == pytest.approx(2 * stats.t.sf((margin - 0.001) / se, 2)) and two.p < 0.05
        assert three.verdict == "agrees in direction; the paper gives no size"
        assert "slightly inferior" in three.paper and three.direction == 1
        assert four.verdict == "underpowered" and "significantly worse" in four.paper
        assert all(c.kind == "control" and "Jeffreys" in c.claim for c in jeffreys)


@pytest.mark.parametrize("low, high, verdict, below", [
    (-0.004, 0.006, "agrees", True), (-0.012, 0.002, "underpowered", False),
    (0.009, 0.02, "disagrees", False)])
def test_comparable_is_judged_by_tost_and_its_p_matches_the_interval(low, high, verdict, below):
    """The equivalence p is below 0.05 exactly when the 95 % interval lies inside +-margin."""
    row = pd.Series({"low": low, "high": high, "delta": (low + high) / 2, "n": 3})
    made = claims.equivalence(row, 0.0086)
    assert made["verdict"] == verdict and (made["p"] < 0.05) == below
    assert claims.equivalence_p(0.0, 0.0086 * 2, 0.0086, 3) == pytest.approx(1.0)  # centre on m
    assert claims.equivalence_p(0.0, 0.0086, 0.0086, 3) == pytest.approx(0.05)  # touches +m


def test_the_papers_equal_compute_at_its_fractions_of_ces_steps():
    """47/50, 95/100 and 190/200 of the budgets, the nearest step, a tie down (30 x 0.95 =
    28.5 -> 28), fixed in the configuration; mini-full's three budgets of its 60 steps."""
    cfg = AblationConfig(items=["compute"], seeds=[0], paper_compute_budgets=[15, 30, 60])
    assert cfg.paper_compute_steps() == [(15, 14), (30, 28), (60, 57)]
    assert AblationConfig(paper_compute_budgets=[50, 100, 200]).paper_compute_steps() == [
        (50, 47), (100, 95), (200, 190)]  # the paper's own
    full = load_config(profile="mini-full").ablation
    assert full.paper_compute_steps() == [(15, 14), (30, 28), (60, 57)]
    with pytest.raises(ConfigError, match="one fraction per budget"):
        AblationConfig.from_dict({"paper_compute_budgets": [15, 30]})
    with pytest.raises(ConfigError, match="in \\(0, 1\\]"):
        AblationConfig.from_dict({"paper_compute_fractions": ["47/50", "3/2", "1"]})
    assert {s.name for s in ablation_specs(cfg)} >= {
        "pi_a0_s0_steps15", "pi_a0.1_s0_steps14", "pi_a0_s0_steps30", "pi_a0.1_s0_steps28",
        "pi_a0_s0_steps60", "pi_a0.1_s0_steps57"}
    assert tables.compute_pairs(cfg)[:3] == [("pi", f"SCE 0.1, {r} steps", "pi", f"CE, {n} steps")
                                             for n, r in ((15, 14), (30, 28), (60, 57))]


def test_the_step_time_ratio_pairs_the_runs_own_timings():
    """Time per step (train_summary's wall time over its steps), regularized over CE, paired
    by (base, seed): 2.0 s / 10 steps against 0.5 s / 5 steps, 2x; then 1.5x."""
    runs = pd.DataFrame([
        {"method": "pi", "setting": "SCE 0.1, 10 steps", "base_seed": 0, "seed": 0,
         "train_wall_s": 2.0, "steps": 10},
        {"method": "pi", "setting": "CE, 5 steps", "base_seed": 0, "seed": 0,
         "train_wall_s": 0.5, "steps": 5},
        {"method": "pi", "setting": "SCE 0.1, 10 steps", "base_seed": 1, "seed": 0,
         "train_wall_s": 3.0, "steps": 10},
        {"method": "pi", "setting": "CE, 5 steps", "base_seed": 1, "seed": 0,
         "train_wall_s": 1.0, "steps": 5},
        {"method": "pi", "setting": "CE, 5 steps", "base_seed": 1, "seed": 1,  # unpaired
         "train_wall_s": 9.0, "steps": 5}])
    mean, low, high, pairs = tables.step_time_ratio(runs, "pi", "SCE 0.1, 10 steps",
                                                    "CE, 5 steps")
    assert (mean, low, high, pairs) == pytest.approx((1.75, 1.5, 2.0, 2))
    cfg = AblationConfig(items=["compute"], paper_compute_budgets=[5, 10, 20],
                         paper_compute_fractions=["1", "1", "1"])
    table = tables.paper_compute_table(runs.replace("SCE 0.1, 10 steps", "SCE 0.1, 5 steps"),
                                       cfg)
    assert list(table["ce_steps"]) == [5, 10, 20] and list(table["pairs"]) == [2, 0, 0]
    assert table["time_ratio"][0] == pytest.approx((0.2 / 0.1 + 0.3 / 0.2) / 2)
    eff = _eff([{"setting": "SCE 0.1, 5 steps", "baseline": "pi CE, 5 steps",
                 "column": "nll_4x", "delta": -0.2, "low": -0.3, "high": -0.1}])
    out = claims.Claims()
    inputs = dataclasses.replace(given(cfg, "nll_4x"), compute_paper=table)
    claims.compute_claims(out, eff, inputs)
    first = out.claims[0]
    assert (first.id, first.kind, first.origin) == ("A5.P1", "paper", "paper")
    assert first.verdict == "agrees in direction; the paper gives no size"
    assert "CE-only 5 steps" in first.evidence and "regularized / CE: 1.75" in first.evidence
    assert [c.verdict for c in out.claims[1:3]] == ["not run", "not run"]


def test_mini_full_runs_the_l_extra_arms_and_the_papers_budgets_on_every_base(monkeypatch):
    """The new runs of mini-full (issue 61); mini plans none of them, and the published
    mini-full holds every run its configuration plans."""
    # published from the built-in bAbI generator: with $LSA_DATA_DIR's bAbI files (as in CI)
    # the BABILong runs, and the probes of them, are another configuration
    monkeypatch.delenv("LSA_DATA_DIR", raising=False)
    full = runs_of(load_config(profile="mini-full"))
    names = set(full.ablation)
    for b in ("", "_b1", "_b2"):
        for s in (0, 1, 2):
            assert {f"eabf_a0.1_s{s}_lx{x}{b}" for x in (2, 3, 4)} <= names
            assert {f"eabf_a1_s{s}_jeffreys_lx{x}{b}" for x in (2, 3, 4)} <= names
            assert {f"eabf_a0_s{s}_steps{n}{b}" for n in (15, 30, 60)} <= names
            assert {f"eabf_a0.1_s{s}_steps{r}{b}" for r in (14, 28, 57)} <= names
    mini = runs_of(load_config(profile="mini"))
    assert not any("_lx" in n or "steps" in n for n in mini.ablation)
    import json

    from lsa import published

    held = {name.split("/")[1] for name in json.loads(
        (published.folder("mini-full") / published.MANIFEST).read_text())["files"]
        if name.startswith("runs/")}
    assert {r.id for r in full.used_by(["finetune", "ablation", "probe", "gates"])} <= held
