"""Section 5.3 (lsa.ablation) and the ablation runs of the configuration."""

import math

import numpy as np
import pandas as pd
import pytest

from lsa import ablation
from lsa.config import AblationConfig, ConfigError, load_config
from lsa.runs import ablation_specs, make_run, runs_of, runs_root
from lsa.stats import sign_verdict


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
    assert {f"pi_a0_s{s}" for s in (0, 1, 2)} <= names
    for s in (0, 1, 2):
        assert {f"pi_a0.1_s{s}", f"pi_a0.1_s{s}_jeffreys", f"pi_a1_s{s}_jeffreys",
                f"pi_a0.1_s{s}_entropy", f"pi_a0_s{s}_ceboth"} <= names
    shared = names & set(runs.grid)
    assert shared == {"pi_a0_s0", "pi_a0_s1", "pi_a0.1_s0", "pi_a0.1_s1"}
    assert len(names - shared) == 14


def test_mini_full_shares_minis_run_folders():
    mini, full = runs_of(load_config(profile="mini")), runs_of(load_config(profile="mini-full"))
    assert runs_root("mini-full") == runs_root("mini")
    for name, run in mini.finetune.items():
        assert full.finetune[name].id == run.id
    assert full.base.id == mini.base.id
    assert set(mini.ablation) < set(full.ablation)
    items = load_config(profile="mini-full").ablation.items
    assert set(items) == set(ablation.ITEMS)


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
    eff = ablation.effects(runs, [("pi", "Jeffreys 0.1", "pi", "CE")], ["ppl_4x"])
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


def test_closing_text_says_what_the_intervals_say():
    eff = pd.DataFrame([
        {"method": "pi", "setting": "Jeffreys 1", "baseline": "pi CE", "column": "ppl_4x",
         "baseline_mean": 10.0, "changed_mean": 9.0, "delta": -1.0, "low": -1.5, "high": -0.5,
         "seeds": 3},
        {"method": "pi", "setting": "SCE 0.1", "baseline": "pi CE", "column": "ppl_4x",
         "baseline_mean": 10.0, "changed_mean": 11.0, "delta": 1.0, "low": 0.5, "high": 1.5,
         "seeds": 3}])
    text = ablation.closing_text(eff, "ppl_4x")
    assert "**Jeffreys 1** lowers it" in text and "**SCE 0.1** raises it" in text
    assert "Alignment without sharpening helps" in text
    assert "not run" in ablation.closing_text(None, "ppl_4x")


def test_equal_compute_is_counted_not_timed():
    """Two windows of l_train tokens, forward and backward: twice a CE step on window A; the
    distinct tokens of setting 1 (l_extra ~ U[1, l/2], mean 64.5 at l = 256)."""
    acc = ablation.equal_compute_steps(60, 256)
    assert acc == {"equal sequences": 60.0,
                   "equal distinct tokens": pytest.approx(60 * (256 + 64.5) / 256),
                   "equal forward and backward tokens": 120.0}


def test_the_compute_claim_takes_the_run_nearest_to_equal_counted_work():
    from lsa.config import AblationConfig

    cfg = AblationConfig(items=["compute"], seeds=[0, 1], compute_steps=[75, 120])
    eff = pd.DataFrame([{"method": "pi", "setting": "SCE 0.1", "baseline": "pi CE, 120 steps",
                         "column": "ppl_4x", "delta": 11.0, "low": 7.0, "high": 15.0,
                         "seeds": 2, "baseline_mean": 180.0, "changed_mean": 191.0,
                         "noise": 1.0}])
    (claim,) = ablation.compute_claims(eff, cfg, "ppl_4x", 60, 120.0)
    assert claim.verdict == "disagrees" and "PPL 180 -> 191" in claim.ours
    assert "CE-only 120 steps, the run nearest to equal counted work" in str(claim)


def test_an_item_not_run_says_so():
    claim = ablation.not_run("alpha_sweep")
    assert claim["verdict"] == "not run" and claim["id"] == "A2.0"
