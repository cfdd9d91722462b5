"""``python -m lsa bench real-lm`` (lsa/reallm.py) on its scratch stand-in: what a cell trains
and counts, by hand; the evaluation's lengths; the page."""

from __future__ import annotations

import pytest

from lsa import reallm


def per_layer_lora(d: int, ffn: int, r: int = 64) -> int:
    """LoRA's parameters on one Llama layer with every linear layer adapted: r (in + out)
    each; q, k, v, o are d x d here (as many key-value heads as heads), gate and up d -> ffn,
    down ffn -> d."""
    return r * (4 * 2 * d + 2 * (d + ffn) + (ffn + d))


def test_a_cell_trains_the_windows_its_objective_reads_and_lora_only_its_adapters():
    s = reallm.SCRATCH
    d, ffn, layers = s["hidden_size"], s["intermediate_size"], s["n_layers"]
    full = (s["vocab_size"] * d                                   # embedding, tied head
            + layers * (4 * d * d + 3 * d * ffn + 2 * d) + d)     # + norms
    window = 16
    a = reallm.train_child("scratch", window, "full", "ce_a", steps=1)
    both = reallm.train_child("scratch", window, "full", "ce_both", steps=1)
    sce = reallm.train_child("scratch", window, "lora", "sce_0.1", steps=1)
    assert a["trained_tokens"] == window                  # CE on window A alone
    assert both["trained_tokens"] == sce["trained_tokens"] == window + window // 2
    assert a["trainable"] == full
    assert sce["trainable"] == layers * per_layer_lora(d, ffn)
    assert a["ms_per_token"] == pytest.approx(1000 * a["seconds_per_step"] / window)


def test_the_evaluation_times_each_length_and_the_page_lists_every_cell():
    found = reallm.eval_child("scratch", [8, 32])
    assert list(found["seconds_per_sequence"]) == ["8", "32"]
    assert all(v > 0 for v in found["seconds_per_sequence"].values())
    cell = {"window": 16, "mode": "full", "objective": "ce_a", "seconds_per_step": 0.5,
            "trained_tokens": 16, "ms_per_token": 31.25, "peak_rss_mb": 400.0,
            "trainable": 1000}
    page = reallm.markdown("scratch", {"train": [cell], "evaluation": found}, 1, 2)
    assert "| 16 | full | ce_a | 16 | 0.50 | 31.25 | 400 | 1,000 |" in page
    assert "| 32 |" in page


def test_a_designs_cost_is_its_arms_steps_and_evaluations_by_hand():
    """docs/real_lm.md's costs (lsa.reallm.design_cost): two arms x steps x seeds at their
    seconds per step, then every run's and the base model's evaluation at 1x, 2x and 4x."""
    from lsa import reallm

    bench = {"train": [{"window": 8, "mode": "full", "objective": "ce_both",
                        "seconds_per_step": 2.0},
                       {"window": 8, "mode": "full", "objective": "sce_0.1",
                        "seconds_per_step": 3.0},
                       {"window": 8, "mode": "lora", "objective": "ce_both",
                        "seconds_per_step": 1.0}],
             "seconds_per_sequence": {8: 1.0, 16: 2.0, 32: 4.0}}
    cost = reallm.design_cost(bench, 8, "full", steps=10, seeds=3)
    assert cost["train_h"] * 3600 == (2.0 + 3.0) * 10 * 3
    assert cost["eval_h"] * 3600 == reallm.EVAL_SEQUENCES * (1 + 2 + 4) * (2 * 3 + 1)
    assert cost["total_h"] == pytest.approx(cost["train_h"] + cost["eval_h"], rel=1e-12)
    with pytest.raises(KeyError, match="did not measure"):
        reallm.design_cost(bench, 8, "lora", steps=10, seeds=3)


def test_the_power_table_grows_with_the_spread_and_matches_statsmodels():
    from statsmodels.stats.power import TTestPower

    from lsa import reallm

    rows = [line.split("|")[1:3] for line in reallm.power_markdown().splitlines()[2:]]
    seeds = [int(n) for _, n in rows]
    assert seeds == sorted(seeds) and len(seeds) == len(reallm.SPREADS)
    for sd, n in zip(reallm.SPREADS, seeds):
        power = TTestPower().power(effect_size=reallm.SESOI / sd, nobs=n, alpha=0.05)
        below = TTestPower().power(effect_size=reallm.SESOI / sd, nobs=n - 1, alpha=0.05)
        assert power >= 0.8 and (n == 2 or below < 0.8)
    assert abs(reallm.SESOI - 0.01678) < 1e-5  # ln(6.01 / 5.91), the paper's EABF effect


def test_the_length_profile_scores_every_length_on_the_same_tokens_and_probes_the_copy(
        out_root, capsys):
    """Stage 0's length profile (``bench real-lm --length-profile``) on the scratch stand-in:
    each length's NLL over the same span of tokens, the copy probe with its control at the
    shortest length, written as JSON and a page whose measured part is its bench block."""
    import json

    from lsa.__main__ import main
    from lsa.evaluate.perplexity import perplexity
    from lsa.reallm import PROFILE_CHUNKS, load, test_stream

    assert main(["bench", "real-lm", "--model", "scratch", "--length-profile", "64,128",
                 "--threads", "1"]) == 0
    out = out_root / "results" / "bench" / "real-lm-scratch-lengths.json"
    found = json.loads(out.read_text())
    assert list(found["nll"]) == ["64", "128"]
    assert found["nll"]["64"]["tokens"] == PROFILE_CHUNKS * 128 - 2 * PROFILE_CHUNKS * 1  # L-1 each
    again = perplexity(load("scratch").eval(), test_stream("scratch"), [64, 128],
                       max_chunks=PROFILE_CHUNKS)
    assert found["nll"]["128"]["nll"] == again[128]["nll"]  # seeded model, same tokens
    copy = found["copy"]["64"]
    assert copy["gain"] == pytest.approx(copy["control_nll"] - copy["copy_nll"], abs=1e-9)
    page = out.with_suffix(".md").read_text()
    assert "<!-- generated: bench-real-lm-lengths -->" in page and "| 128 |" in page
