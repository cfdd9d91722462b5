import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from lsa import misalign as M
from lsa.data.tokens import TokenStream
from lsa.models import scratch_llama


def reference_sce(a, b):
    p, q = F.softmax(a.double(), -1), F.softmax(b.double(), -1)
    return -(p * q.log()).sum(-1) - (q * p.log()).sum(-1)


def reference_jeffreys(a, b):
    p, q = F.softmax(a.double(), -1), F.softmax(b.double(), -1)
    return (p * (p.log() - q.log())).sum(-1) + (q * (q.log() - p.log())).sum(-1)


@pytest.fixture
def logits():
    g = torch.Generator().manual_seed(0)
    return torch.randn(3, 5, 40, generator=g) * 3, torch.randn(3, 5, 40, generator=g) * 3


def test_sce_matches_float64_reference_and_is_symmetric(logits):
    a, b = logits
    got = M.symmetric_cross_entropy(a, b)
    assert got.shape == (3, 5) and got.dtype == torch.float32
    torch.testing.assert_close(got.double(), reference_sce(a, b), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got, M.symmetric_cross_entropy(b, a))


def test_sce_of_equal_distributions_is_twice_the_entropy(logits):
    a, _ = logits
    p = F.softmax(a.double(), -1)
    entropy = -(p * p.log()).sum(-1)
    torch.testing.assert_close(M.symmetric_cross_entropy(a, a).double(), 2 * entropy,
                               rtol=1e-5, atol=1e-5)
    assert (M.symmetric_cross_entropy(a, a, divergence="jeffreys").abs() < 1e-5).all()


def test_jeffreys_matches_reference_and_sce_decomposition(logits):
    a, b = logits
    jeff = M.symmetric_cross_entropy(a, b, divergence="jeffreys")
    torch.testing.assert_close(jeff.double(), reference_jeffreys(a, b), rtol=1e-5, atol=1e-5)
    # SCE = H(p) + H(q) + KL(p||q) + KL(q||p)
    p, q = F.softmax(a.double(), -1), F.softmax(b.double(), -1)
    h = -(p * p.log()).sum(-1) - (q * q.log()).sum(-1)
    torch.testing.assert_close(M.symmetric_cross_entropy(a, b).double(), h + jeff.double(),
                               rtol=1e-5, atol=1e-4)


def test_reduce_terms_mean_halves_the_sum(logits):
    a, b = logits
    torch.testing.assert_close(M.symmetric_cross_entropy(a, b, reduce_terms="mean") * 2,
                               M.symmetric_cross_entropy(a, b))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_and_extreme_logits_stay_finite(dtype, logits):
    a, b = logits
    got = M.symmetric_cross_entropy(a.to(dtype), b.to(dtype))
    assert got.dtype == torch.float32
    torch.testing.assert_close(got.double(), reference_sce(a.to(dtype).float(),
                                                           b.to(dtype).float()),
                               rtol=1e-4, atol=1e-4)
    extreme = torch.zeros(2, 40, dtype=dtype)
    extreme[0, 0], extreme[1, 1] = 1e4, -1e4
    values = M.symmetric_cross_entropy(extreme, extreme.flip(0))
    assert torch.isfinite(values).all()


def test_chunked_equals_unchunked_with_gradients(logits):
    a0, b0 = logits
    grads = []
    for chunk in (None, 4):
        a, b = a0.clone().requires_grad_(), b0.clone().requires_grad_()
        value = M.symmetric_cross_entropy(a, b, chunk_size=chunk).mean()
        value.backward()
        grads.append((value.detach(), a.grad, b.grad))
    for x, y in zip(*grads):
        torch.testing.assert_close(x, y)


@pytest.mark.parametrize("detach, frozen", [("long", 0), ("short", 1)])
def test_detach_stops_one_side(logits, detach, frozen):
    a, b = (t.clone().requires_grad_() for t in logits)
    M.symmetric_cross_entropy(a, b, detach=detach).sum().backward()
    sides = (a, b)
    assert sides[frozen].grad is None or (sides[frozen].grad == 0).all()
    assert sides[1 - frozen].grad.abs().sum() > 0


@pytest.mark.parametrize("setting, low, high", [(1, 1, 32), (2, 1, 16), (3, 16, 32),
                                                (4, 1, 64)])
def test_l_extra_settings_sample_their_ranges(setting, low, high):
    g = torch.Generator().manual_seed(0)
    draws = [M.sample_l_extra(64, setting, g) for _ in range(3000)]
    assert min(draws) == low and max(draws) == high
    assert len(set(draws)) == high - low + 1  # every value in range occurs


def test_l_extra_bad_setting():
    with pytest.raises(ValueError, match="setting = 5"):
        M.sample_l_extra(64, 5)
    assert M.sample_l_extra(3, 2) == 1  # l/4 rounds to 0: at least 1


@pytest.fixture(scope="module")
def stream():
    rng = np.random.default_rng(0)
    return TokenStream(rng.integers(0, 50, size=5000).astype(np.uint16), "test")


@pytest.mark.parametrize("l_extra", [1, 5, 15])
def test_overlap_positions_predict_the_same_token(stream, l_extra):
    l_train = 16
    tokens = stream.sample(3, l_train + l_extra, torch.Generator().manual_seed(1))
    w = M.overlap_windows(tokens, l_train, l_extra)
    assert w.a.shape == w.b.shape == (3, l_train)
    idx_a = torch.arange(l_train)[w.overlap_a]
    idx_b = torch.arange(l_train)[w.overlap_b]
    assert len(idx_a) == len(idx_b) == w.n_overlap == l_train - l_extra
    for ia, ib in zip(idx_a.tolist(), idx_b.tolist()):
        p = ia  # absolute position
        assert ib == p - l_extra
        assert torch.equal(w.a[:, ia], w.b[:, ib])  # the same token at the same position
        # both predict x[p + 1]: A's input length at p is p+1 tokens, B's is p+1-l_extra
        target = tokens[:, p + 1]
        if ib + 1 < l_train:
            assert torch.equal(w.b[:, ib + 1], target)
        if ia + 1 < l_train:
            assert torch.equal(w.a[:, ia + 1], target)


def test_overlap_windows_validate():
    with pytest.raises(ValueError, match="expected l_train \\+ l_extra"):
        M.overlap_windows(torch.zeros(1, 10, dtype=torch.long), 8, 3)
    w = M.overlap_windows(torch.arange(16)[None], 8, 8)
    assert w.n_overlap == 0 and w.overlap_a == slice(8, 8)


@pytest.fixture(scope="module")
def model():
    return scratch_llama(vocab_size=50, hidden_size=16, n_layers=2, n_heads=2,
                         intermediate_size=32, base_window=32, seed=0).eval()


@pytest.mark.parametrize("ce_on", ["a", "both"])
def test_one_batched_forward_equals_two_separate_forwards(model, stream, ce_on):
    l_train, l_extra = 12, 5
    tokens = stream.sample(2, l_train + l_extra, torch.Generator().manual_seed(2))
    out = M.misalignment_loss(model, tokens, l_train, l_extra, alpha=0.3, ce_on=ce_on,
                              chunk_size=3)
    a, b = tokens[:, :l_train], tokens[:, l_extra:]
    with torch.no_grad():
        la, lb = model(input_ids=a).logits, model(input_ids=b).logits
    ce_a = model(input_ids=a, labels=a).loss
    ce_b = model(input_ids=b, labels=b).loss
    sce = reference_sce(la[:, l_extra:], lb[:, : l_train - l_extra]).mean()
    torch.testing.assert_close(out.ce_a, ce_a.detach(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out.ce_b, ce_b.detach(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out.misalign.double(), sce, rtol=1e-4, atol=1e-5)
    ce = ce_a if ce_on == "a" else (ce_a + ce_b) / 2
    torch.testing.assert_close(out.loss.detach().double(), (ce + 0.3 * sce).detach().double(),
                               rtol=1e-4, atol=1e-5)
    assert out.n_overlap == 7


def test_last_position_only(model, stream):
    l_train, l_extra = 12, 4
    tokens = stream.sample(2, l_train + l_extra, torch.Generator().manual_seed(3))
    out = M.misalignment_loss(model, tokens, l_train, l_extra, positions="last")
    with torch.no_grad():
        la = model(input_ids=tokens[:, :l_train]).logits
        lb = model(input_ids=tokens[:, l_extra:]).logits
    ref = reference_sce(la[:, -1], lb[:, l_train - l_extra - 1]).mean()
    torch.testing.assert_close(out.misalign.double(), ref, rtol=1e-4, atol=1e-5)


def test_empty_overlap_gives_zero_term_and_a_working_backward(model, stream):
    l_train = 8
    tokens = stream.sample(2, 2 * l_train, torch.Generator().manual_seed(4))
    out = M.misalignment_loss(model, tokens, l_train, l_train, alpha=0.5)
    assert out.n_overlap == 0 and out.misalign.item() == 0.0
    assert out.loss.item() == pytest.approx(out.ce.item())
    out.loss.backward()
    assert any(p.grad is not None for p in model.parameters())
    model.zero_grad()


def test_l_extra_one_overlaps_all_but_one(model, stream):
    tokens = stream.sample(1, 9, torch.Generator().manual_seed(5))
    assert M.misalignment_loss(model, tokens, 8, 1).n_overlap == 7


class ContextFree(torch.nn.Module):
    """Logits that depend on the current token only: perfectly aligned across lengths."""

    def __init__(self):
        super().__init__()
        self.table = torch.nn.Embedding(50, 50)

    def forward(self, input_ids):
        return type("Out", (), {"logits": self.table(input_ids)})


def test_metric_of_a_context_free_model(stream):
    torch.manual_seed(0)
    model = ContextFree()
    jeff = M.misalignment_metric(model, stream, l_train=16, n_samples=10, divergence="jeffreys")
    assert jeff.n == 10 and abs(jeff.mean) < 1e-5
    sce = M.misalignment_metric(model, stream, l_train=16, n_samples=10, seed=3)
    assert sce.mean > 0 and sce.stderr >= 0


def test_metric_is_deterministic_and_positive(model, stream):
    a = M.misalignment_metric(model, stream, l_train=16, n_samples=6, seed=1, batch_size=4)
    b = M.misalignment_metric(model, stream, l_train=16, n_samples=6, seed=1, batch_size=4)
    assert a.values == b.values and a.n == 6
    assert a.stderr == pytest.approx(np.std(a.values, ddof=1) / math.sqrt(6))


# ---------------------------------------------------------------------------------------------
# which overlap positions count: "all", "last", "paper" (both contexts >= l_train / 2 tokens)


@pytest.mark.parametrize("l_train, l_extra, positions, absolute", [
    # l = 16: A's context at absolute p is p + 1 tokens, B's is p + 1 - l_extra
    (16, 5, "all", list(range(5, 16))),
    (16, 5, "last", [15]),
    (16, 5, "paper", [12, 13, 14, 15]),       # B's context 8..11 >= 8, A's 13..16
    (16, 1, "paper", [8, 9, 10, 11, 12, 13, 14, 15]),  # B's context 8..15
    (16, 8, "paper", [15]),                   # B's context 8 = l/2, A's 16 = l: one position
    (16, 9, "paper", []),                     # B's context at most 7 < 8
    (16, 16, "all", []), (16, 16, "last", []), (16, 16, "paper", []),  # no overlap at all
    (15, 7, "paper", [14]),                   # l/2 = 7.5: B's context must be >= 8
    (15, 8, "paper", []),                     # B's context at most 7 < 7.5
    (15, 1, "paper", list(range(8, 15))),     # B's context 8..14
    (2, 1, "paper", [1]),                     # B's context 1 = l/2
])
def test_position_sets_by_hand(l_train, l_extra, positions, absolute):
    w = M.overlap_windows(torch.arange(l_train + l_extra)[None], l_train, l_extra)
    sel_a, sel_b = M.select_positions(l_train, l_extra, positions)
    assert torch.arange(l_train)[sel_a].tolist() == absolute
    assert (torch.arange(l_train)[sel_b] + l_extra).tolist() == absolute
    # the same tokens at the same absolute positions in both windows
    assert torch.equal(w.a[:, sel_a], w.b[:, sel_b])


def test_position_set_rejects_unknown_names():
    with pytest.raises(ValueError, match="positions = 'first'"):
        M.select_positions(8, 4, "first")


def _reference_metric(model, stream, l_train, n_samples, seed, setting, batch_size, keep):
    """The metric, rebuilt from the generator's draws with separate forwards per window and
    the float64 SCE, per position set; draws whose "paper" set is empty are redrawn."""
    gen = torch.Generator().manual_seed(seed)
    values = {name: [] for name in keep}
    count_done = 0
    while count_done < n_samples:
        l_extra = M.sample_l_extra(l_train, setting, gen)
        first_b = math.ceil(l_train / 2) - 1  # B's index where its context reaches l/2 tokens
        if "paper" in keep and first_b >= l_train - l_extra or l_extra >= l_train:
            continue
        count = min(batch_size, n_samples - count_done)
        tokens = stream.sample(count, l_train + l_extra, gen)
        with torch.no_grad():
            la = model(input_ids=tokens[:, :l_train]).logits[:, l_extra:]
            lb = model(input_ids=tokens[:, l_extra:]).logits[:, :l_train - l_extra]
        sce = reference_sce(la, lb)  # (count, overlap)
        sets = {"all": slice(None), "last": slice(-1, None), "paper": slice(first_b, None)}
        for name in keep:
            values[name].extend(sce[:, sets[name]].mean(-1).tolist())
        count_done += count
    return values


@pytest.mark.parametrize("setting", [1, 4])
def test_metric_position_sets_match_a_hand_rebuilt_reference(model, stream, setting):
    l_train = 16
    got = M.misalignment_metrics(model, stream, l_train, n_samples=7, seed=2, setting=setting,
                                 batch_size=3, positions=("paper", "all", "last"))
    ref = _reference_metric(model, stream, l_train, 7, 2, setting, 3, ("paper", "all", "last"))
    for name in ("paper", "all", "last"):
        assert got[name].n == 7
        np.testing.assert_allclose(got[name].values, ref[name], rtol=1e-4, atol=1e-5)
    # contexts from l/2 up are less dominated by the near-empty ones: the values differ
    assert got["paper"].values != got["all"].values
    single = M.misalignment_metric(model, stream, l_train, n_samples=7, seed=2, setting=setting,
                                   batch_size=3)
    assert single.values == got["paper"].values  # the default is the paper's definition


def test_metric_all_positions_keeps_the_old_draws(model, stream):
    """Asked for "all" alone, the metric averages every overlap position of the same draws as
    before this option existed (setting 1 never redraws)."""
    got = M.misalignment_metric(model, stream, 16, n_samples=5, seed=4, positions="all")
    ref = _reference_metric(model, stream, 16, 5, 4, 1, 8, ("all",))
    np.testing.assert_allclose(got.values, ref["all"], rtol=1e-4, atol=1e-5)


def test_loss_over_the_papers_positions(model, stream):
    l_train, l_extra = 12, 3
    tokens = stream.sample(2, l_train + l_extra, torch.Generator().manual_seed(6))
    out = M.misalignment_loss(model, tokens, l_train, l_extra, positions="paper")
    with torch.no_grad():
        la = model(input_ids=tokens[:, :l_train]).logits
        lb = model(input_ids=tokens[:, l_extra:]).logits
    # B's contexts of at least 6 tokens: B's indices 5..8, A's 8..11
    ref = reference_sce(la[:, 8:12], lb[:, 5:9]).mean()
    torch.testing.assert_close(out.misalign.double(), ref, rtol=1e-4, atol=1e-5)
    # l_extra = 7 > l/2: overlap of 5 positions, none with both contexts >= 6 tokens
    tokens = stream.sample(2, l_train + 7, torch.Generator().manual_seed(7))
    out = M.misalignment_loss(model, tokens, l_train, 7, alpha=0.5, positions="paper")
    assert out.n_overlap == 5 and out.misalign.item() == 0.0
    assert out.loss.item() == pytest.approx(out.ce.item())
