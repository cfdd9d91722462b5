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
