"""The testbed's long-range structure (lsa.data.recurrence), the copy probes
(lsa.evaluate.longrange) and the premise gates (lsa.gates), on constructed inputs whose answers
are known: an induction oracle that copies from up to R tokens back."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from lsa import gates
from lsa.config import load_config
from lsa.data.recurrence import copy_probes, insert_recurrences
from lsa.data.tokens import TokenStream
from lsa.evaluate.longrange import copy_retrieval

# the gates each section declares (lsa/sections/<package>/section.yaml; held there by
# tests/workflow/test_structure.py)
SECTIONS = load_config(profile="smoke").sections
FINETUNING = SECTIONS["03_regularized_finetuning"].gates
CORRELATION = SECTIONS["02_misalignment_correlation"].gates
BABILONG = SECTIONS["05_babilong"].gates

V = 4000


def distinct_stream(n_books: int = 2, book_len: int = 1500, eos: int = V - 1) -> TokenStream:
    """Books of distinct tokens (no token occurs twice in the stream): only a copy repeats."""
    ids = np.random.default_rng(0).permutation(V - 1)[: n_books * book_len]
    pieces = []
    for b in range(n_books):
        pieces += [ids[b * book_len:(b + 1) * book_len], [eos]]
    return TokenStream(np.concatenate(pieces).astype(np.int64), "test", eos)


class InductionOracle(torch.nn.Module):
    """Predicts, after token x_t, the token that followed x_t's latest earlier occurrence when
    it lies at most ``reach`` tokens back (logit 10), else uniform: a model that uses its
    context up to ``reach`` and no further."""

    def __init__(self, reach: int):
        super().__init__()
        self.reach = reach
        self.dummy = torch.nn.Parameter(torch.zeros(1))

    def forward(self, input_ids, use_cache=None):
        b, n = input_ids.shape
        logits = torch.zeros(b, n, V)
        for row in range(b):
            last: dict[int, int] = {}
            x = input_ids[row].tolist()
            for t, tok in enumerate(x):
                j = last.get(tok)
                if j is not None and t - j <= self.reach and j + 1 < n:
                    logits[row, t, x[j + 1]] = 10.0
                last[tok] = t
        return SimpleNamespace(logits=logits)


def test_insert_recurrences_copies_earlier_spans_inside_each_book_and_keeps_the_text():
    rng = np.random.default_rng(1)
    eos = 999
    books = [rng.integers(0, 999, size=n) for n in (3000, 50, 2000)]
    ids = np.concatenate([np.append(b, eos) for b in books])
    made: list = []
    out = insert_recurrences(ids, eos, 0.3, 8, 200, seed=3, copies=made)
    assert len(made) > 100
    is_copy = np.zeros(len(out), bool)
    for pos, d in made:
        assert 8 <= d <= 200 - 8  # inside one window of max_distance
        assert np.array_equal(out[pos:pos + 8], out[pos - d:pos - d + 8])
        assert eos not in out[pos - d:pos + 8]  # source and copy inside one book
        is_copy[pos:pos + 8] = True
    assert np.array_equal(out[~is_copy], ids)  # the books' text, in order, is all still there
    assert 0.22 < is_copy.mean() < 0.38  # about the asked share of copied tokens
    # the distance varies (the chunks are shuffled): no fixed offset predicts the copies
    assert len({d for _, d in made}) >= 10
    assert np.array_equal(out, insert_recurrences(ids, eos, 0.3, 8, 200, seed=3))
    assert insert_recurrences(ids, eos, 0.0, 8, 200, seed=3) is ids
    # at 0.5 every whole block is followed by its copy: copies are half the tokens of whole blocks
    full: list = []
    half = insert_recurrences(ids, eos, 0.5, 8, 200, seed=3, copies=full)
    assert len(full) * 8 == sum((n // 96 - (n % 96 == 0)) * 96 for n in (3001, 51, 2001))
    assert len(half) == len(ids) + len(full) * 8
    with pytest.raises(ValueError, match="fraction"):
        insert_recurrences(ids, eos, 0.6, 8, 200, seed=3)
    with pytest.raises(ValueError, match="max_distance"):
        insert_recurrences(ids, eos, 0.3, 8, 15, seed=3)


def test_copy_probes_repeat_a_far_span_and_the_control_removes_it():
    stream = distinct_stream()
    p = copy_probes(stream, 256, 12, 16, seed=5)
    target = 256 - 16
    assert p.scored == slice(target + 1, 256)
    for copy, control, d in zip(p.copy, p.control, p.distance.tolist()):
        assert 128 <= d <= target
        src = target - d
        assert torch.equal(copy[target:], copy[src:src + 16])
        assert torch.equal(control[target:], copy[target:])
        assert (control != copy).sum() == 16 and not torch.equal(control[src:src + 16],
                                                                copy[src:src + 16])
    again = copy_probes(stream, 256, 12, 16, seed=5)
    assert torch.equal(again.copy, p.copy)  # every model is measured on the same probes
    with pytest.raises(ValueError, match="too short"):
        copy_probes(stream, 30, 2, 16, seed=0)


def test_copy_probes_score_the_same_logits_with_the_head_on_the_span_alone():
    """``logits_to_keep`` (the output head on the scored positions only) gives the NLL and the
    retrieval of the full logits, for a Llama and for it under a peft LoRA wrapper."""
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    from lsa.evaluate import longrange

    torch.manual_seed(0)
    llama = LlamaForCausalLM(LlamaConfig(vocab_size=V, hidden_size=32, num_hidden_layers=2,
                                         num_attention_heads=2, intermediate_size=64,
                                         max_position_embeddings=512)).eval()
    lora = get_peft_model(LlamaForCausalLM(llama.config).eval(),
                          LoraConfig(r=4, target_modules=["q_proj", "v_proj"]))
    probes = copy_probes(distinct_stream(), 256, 5, 16, seed=1)
    for model in (llama, lora):
        assert longrange.keeps_logits(model)
        kept = longrange._span_nll(model, probes.copy, probes.scored)
        with torch.no_grad():
            full = model(input_ids=probes.copy, use_cache=False).logits[
                :, probes.scored.start - 1:probes.scored.stop - 1]
        target = probes.copy[:, probes.scored]
        nll = torch.nn.functional.cross_entropy(full.transpose(1, 2), target,
                                                reduction="none").mean(dim=1)
        assert kept[0] == pytest.approx(nll.tolist(), rel=1e-5)
        assert kept[1] == (full.argmax(-1) == target).all(dim=1).tolist()
    assert not longrange.keeps_logits(InductionOracle(reach=10))


def test_copy_retrieval_sees_what_an_oracle_with_a_limited_reach_sees():
    stream = distinct_stream()
    uniform = math.log(V)
    near = copy_retrieval(InductionOracle(reach=10_000), stream, [128, 512], 6, 16, seed=0,
                          control=True)
    short = copy_retrieval(InductionOracle(reach=100), stream, [128, 512], 6, 16, seed=0,
                           control=True)
    hit = -math.log(math.exp(10) / (math.exp(10) + V - 1))  # the oracle's NLL when it copies
    for length in (128, 512):
        assert near[length]["copy_nll"] == pytest.approx(hit, rel=1e-3)
        assert near[length]["retrieval"] == 1.0
        assert near[length]["control_nll"] == pytest.approx(uniform, rel=1e-4)
        assert near[length]["gain"] == pytest.approx(uniform - hit, rel=1e-3)
    # reach 100: the far half of a 128 window (64-112 back) partly within reach; of 512, never
    assert short[512]["copy_nll"] == pytest.approx(uniform, rel=1e-4)
    assert short[512]["retrieval"] == 0.0
    assert short[128]["copy_nll"] < uniform


def _metrics(rows: dict[int, dict], **extra) -> dict:
    return {"long_range": {str(k): v for k, v in rows.items()}, **extra}


def test_gates_on_oracles_pass_and_fail_where_they_should():
    stream = distinct_stream()
    l0, l_train = 64, 128
    lengths = [64, 128, 256, 512]

    def measure(reach, control=False):
        return _metrics(copy_retrieval(InductionOracle(reach), stream, lengths, 8, 16, seed=0,
                                       control=control))

    base = measure(l0, control=True)          # uses its window, nothing beyond
    g1, g2 = gates.gate_g1(base, l0, 0.5), gates.gate_g2(base, l0, 0.5)
    hit = -math.log(math.exp(10) / (math.exp(10) + V - 1))
    assert g1.passed and g1.value == pytest.approx(math.log(V) - hit, rel=1e-3)
    assert g2.passed and g2.value == pytest.approx(math.log(V) - hit, rel=1e-3)
    gap = math.log(V) - hit                    # what the oracle's reach is worth, nats
    # a method that recovers at l_train and fails beyond: it passes both parts (two seeds)
    within = [measure(l_train), measure(l_train)]
    g3 = gates.gate_g3("pi", base, within, within, l0, l_train, 0.5, 0.5, 200, seed=0)
    assert g3.gate == "G3.pi" and g3.passed
    assert g3.value == pytest.approx(1.0, abs=1e-6)
    recovery, room, versus = g3.criteria
    assert room["value"] == pytest.approx(gap, rel=1e-3) and room["low"] >= 0.5
    assert versus["threshold"] is None and versus["value"] == pytest.approx(0.0, abs=1e-9)
    assert "no clear difference" in g3.detail   # raw fine-tuning is shown, never gated
    # a method that fixes every length recovers all but leaves nothing to fix: (b) fails
    fixed = [measure(10_000), measure(10_000)]
    g3_room = gates.gate_g3("clex", base, fixed, within, l0, l_train, 0.5, 0.5, 200, seed=0)
    assert g3_room.passed is False and g3_room.value == pytest.approx(1.0, abs=1e-6)
    assert g3_room.criteria[1]["value"] == pytest.approx(0.0, abs=1e-4)
    assert "lower" in g3_room.detail            # it beats raw fine-tuning at 2x, descriptively
    # one seed: no interval over seeds, no premise, whatever the probes say
    one = gates.gate_g3("pi", base, within[:1], [], l0, l_train, 0.5, 0.5, 200, seed=0)
    assert one.passed is False and "one training seed" in one.detail
    assert len(one.criteria) == 2               # no raw runs: nothing set beside it
    blind = measure(0, control=True)            # uses no context at all: G1 fails
    assert gates.gate_g1(blind, l0, 0.5).passed is False
    assert gates.gate_g1({}, l0, 0.5).passed is None  # not computable: said, not guessed


def test_a_failed_gate_turns_a_sections_verdicts_into_premise_not_met():
    ok = gates.Gate("G1", "q", 1, 0.9, 1.1, 0.5, True, "")
    bad = gates.Gate("G2", "q", 0.1, -0.1, 0.3, 0.5, False, "")
    claims = [{"id": "X", "verdict": "agrees", "evidence": "e"},
              {"id": "Y", "verdict": "not run", "evidence": ""}]
    held = gates.apply_premise(claims, [ok, bad], FINETUNING)
    assert [c["verdict"] for c in held] == ["premise not met", "not run"]
    assert "verdict if the premise held: agrees" in held[0]["evidence"]
    good = gates.Gate("G2", "q", 1, 0.9, 1.1, 0.5, True, "")
    assert gates.apply_premise(claims, [ok, good], CORRELATION) == claims
    assert gates.premise([ok], CORRELATION)[0] is False  # a gate not there
    table = gates.gates_table([ok, bad])
    assert list(table["outcome"]) == ["pass", "fail"]


def test_a_method_claims_rest_on_its_own_g3():
    g1 = gates.Gate("G1", "q", 1, 0.9, 1.1, 0.5, True, "")
    g2 = gates.Gate("G2", "q", 1, 0.9, 1.1, 0.5, True, "")
    eabf = gates.Gate("G3.eabf", "q", 2, 1.5, 2.5, 0.5, True, "")
    clex = gates.Gate("G3.clex", "q", 0.4, 0.2, 0.9, 0.5, False, "")
    found = [g1, g2, eabf, clex]
    claims = [{"id": "A", "verdict": "agrees", "method": "eabf"},
              {"id": "B", "verdict": "disagrees", "method": "clex"},
              {"id": "C", "verdict": "agrees"}]  # no method: every G3 must pass
    held = gates.apply_premise(claims, found, FINETUNING)
    assert [c["verdict"] for c in held] == ["agrees", "premise not met", "premise not met"]
    ok, text = gates.premise(found, FINETUNING)
    assert not ok and "premise met for eabf" in text and "not for clex" in text
    assert gates.premise(found, FINETUNING, "eabf") == (
        True, "premise met: G1, G2, G3.eabf passed")
    assert gates.needed_gates(found, BABILONG, "clex") == ["G1", "G2"]


def test_raw_fine_tuning_has_its_own_g3_and_no_other_claim_waits_on_it():
    """A claim about raw fine-tuning (method none: Section 5.3's parts) rests on G3.none, which
    is computed from the raw CE-only runs; a claim naming no method waits on the positional
    methods' G3 only (issue 61: no claim waits on a gate never computed)."""
    g1 = gates.Gate("G1", "q", 1, 0.9, 1.1, 0.5, True, "")
    g2 = gates.Gate("G2", "q", 1, 0.9, 1.1, 0.5, True, "")
    eabf = gates.Gate("G3.eabf", "q", 2, 1.5, 2.5, 0.5, True, "")
    raw = gates.Gate("G3.none", "q", 0.1, 0.0, 0.3, 0.5, False, "")
    found = [g1, g2, eabf, raw]
    assert gates.needed_gates(found, FINETUNING, "none") == ["G1", "G2", "G3.none"]
    assert gates.needed_gates(found, FINETUNING) == ["G1", "G2", "G3.eabf"]
    claims = [{"id": "A6.1", "verdict": "agrees", "method": "none"},
              {"id": "C", "verdict": "agrees"}]
    held = gates.apply_premise(claims, found, FINETUNING)
    assert [c["verdict"] for c in held] == ["premise not met", "agrees"]
    assert gates.premise(found, FINETUNING)[1].startswith("premise met for eabf")
