"""lsa/misalign.py, the readable definition of the long-short misalignment, lsa/fused.py, the
fused kernel that must compute the same numbers, and lsa/alignment.py, the losses and the
metric built on them: the definition is checked by hand and against its identities, then the
kernel against the definition (values and gradients)."""

import ast
import inspect
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from lsa import alignment as A
from lsa import fused as FU
from lsa import misalign as M
from lsa.data.tokens import TokenStream
from lsa.models import scratch_llama


def sce64(a, b):
    """The paper's SCE per position, from the definition in float64."""
    return M.pair_divergence(a.double(), b.double())


@pytest.fixture
def logits():
    g = torch.Generator().manual_seed(0)
    return torch.randn(3, 5, 40, generator=g) * 3, torch.randn(3, 5, 40, generator=g) * 3


# ---------------------------------------------------------------------------------------------
# the definition (lsa/misalign.py)


def test_definition_by_hand():
    """p = softmax([0, log 3]) = (1/4, 3/4), q = (3/4, 1/4): H(p, q) = -(1/4 log 3/4 + 3/4 log
    1/4) = H(q, p), KL(p||q) = KL(q||p) = 0.5 log 3, H(p) = H(q)."""
    a = torch.tensor([[0.0, math.log(3.0)]], dtype=torch.float64)
    b = torch.tensor([[math.log(3.0), 0.0]], dtype=torch.float64)
    cross = -(0.25 * math.log(0.75) + 0.75 * math.log(0.25))
    h = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))
    expected = {"sce": (cross, cross), "jeffreys": (0.5 * math.log(3), 0.5 * math.log(3)),
                "entropy": (h, h)}
    for divergence, (t_a, t_b) in expected.items():
        terms = M.divergence_terms(a, b, divergence)
        assert terms.shape == (2, 1) and terms.dtype == torch.float64
        assert terms[:, 0].tolist() == pytest.approx([t_a, t_b], rel=1e-12)
        value = M.pair_divergence(a, b, divergence=divergence)
        assert value.item() == pytest.approx(t_a + t_b, rel=1e-12)
        mean = M.pair_divergence(a, b, divergence=divergence, reduce_terms="mean")
        assert mean.item() == pytest.approx((t_a + t_b) / 2, rel=1e-12)
    assert M.pair_divergence(a, b).item() == pytest.approx(math.log(3) + 2 * h, rel=1e-12)


def test_definition_identities(logits):
    """SCE = entropy + Jeffreys; SCE is symmetric; SCE(p, p) = 2 H(p) and Jeffreys(p, p) = 0;
    it is what pair_measures reports."""
    a, b = (x.double() for x in logits)
    sce, jeff, ent = (M.pair_divergence(a, b, divergence=d) for d in M.DIVERGENCES)
    assert sce.shape == (3, 5)
    torch.testing.assert_close(sce, jeff + ent, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(sce, M.pair_divergence(b, a), rtol=1e-12, atol=1e-12)
    assert (jeff > 0).all()
    p = F.softmax(a, -1)
    torch.testing.assert_close(M.pair_divergence(a, a), -2 * (p * p.log()).sum(-1))
    assert M.pair_divergence(a, a, divergence="jeffreys").abs().max() < 1e-12
    torch.testing.assert_close(A.pair_measures(logits[0], logits[1])["sce"],
                               M.pair_divergence(*logits))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_definition_upcasts_low_precision(dtype, logits):
    a, b = (x.to(dtype) for x in logits)
    got = M.pair_divergence(a, b)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got.double(), sce64(a, b), rtol=1e-5, atol=1e-5)


def test_definition_detach_stops_one_sides_gradient(logits):
    for detach, frozen, free in (("long", 0, 1), ("short", 1, 0), ("none", None, None)):
        for divergence in M.DIVERGENCES:
            x = [t.clone().requires_grad_() for t in logits]
            M.pair_divergence(*x, divergence=divergence, detach=detach).sum().backward()
            if frozen is None:
                assert all(t.grad.abs().sum() > 0 for t in x)
            else:
                assert x[frozen].grad is None or not x[frozen].grad.any()
                assert x[free].grad.abs().sum() > 0


def test_definition_rejects_unknown_options(logits):
    with pytest.raises(ValueError, match="divergence = 'kl'"):
        M.pair_divergence(*logits, divergence="kl")
    with pytest.raises(ValueError, match="detach = 'both'"):
        M.divergence_terms(*logits, detach="both")
    with pytest.raises(ValueError, match="reduce_terms"):
        M.pair_divergence(*logits, reduce_terms="max")


def test_next_token_nll_and_objective_are_cross_entropy():
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(3, 7, 11, generator=g, requires_grad=True)
    tokens = torch.randint(0, 11, (3, 7), generator=g)
    nll = M.next_token_nll(logits, tokens)
    ref = F.cross_entropy(logits[:, :-1].reshape(-1, 11), tokens[:, 1:].reshape(-1),
                          reduction="none").reshape(3, 6)
    torch.testing.assert_close(nll, ref)
    # one token-mean CE term, and a divergence between rows 0 and 1 at shifted positions
    pairs = M.Pairs((0,), (1,), 2, 0, 4)
    loss, values = M.objective(logits, tokens, [torch.full((3, 6), 1 / 18)], [1.0], pairs,
                               alpha=0.5, detach="short")
    div = M.pair_divergence(logits[0, 2:6], logits[1, 0:4], detach="short").mean()
    torch.testing.assert_close(values, torch.stack([ref.mean(), div]).detach())
    torch.testing.assert_close(loss, ref.mean() + 0.5 * div)
    assert not values.requires_grad and loss.requires_grad


def _imports(module) -> set[str]:
    """Every module ``module``'s source imports (from ``import x`` or ``from x import y``)."""
    tree = ast.parse(inspect.getsource(module))
    return {n.module if isinstance(n, ast.ImportFrom) else a.name
            for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)
            for a in n.names} - {None}


def _lsa_imports(module) -> set[str]:
    return {name for name in _imports(module) if name.startswith("lsa")}


def test_the_definition_stands_below_the_kernel_and_the_losses_above_both():
    """lsa.misalign (the definition) imports nothing from lsa but the options' names
    (lsa.options, which imports nothing at all from lsa, nor torch); the kernel imports only the
    definition (``check_options``, ``Pairs``) and those names; the losses and the metric
    (lsa.alignment) use both."""
    from lsa import options

    assert _lsa_imports(options) == set()
    assert not {"torch", "numpy"} & {n.split(".")[0] for n in _imports(options)}
    assert _lsa_imports(M) == {"lsa.options"}
    assert _lsa_imports(FU) == {"lsa.misalign", "lsa.options"}
    assert {"lsa.misalign", "lsa.fused"} <= _lsa_imports(A)
    assert FU.Pairs is M.Pairs and FU.DEFAULT_CHUNK == M.DEFAULT_CHUNK


def test_the_options_are_named_once():
    """The objective's option types are one set of objects (lsa.options) wherever they are
    used: the configuration's fields, the definition, the kernel, the losses and the trainer
    carry the same Literals, and the tuples the definition checks against are their values."""
    import typing

    from lsa import config, options, train

    names = ("CeOn", "DivergenceName", "ReduceTerms", "Detach", "Positions")
    for module in (config, M, FU, A, train):
        for name in names:
            if hasattr(module, name):
                assert getattr(module, name) is getattr(options, name), (module.__name__, name)
    hints = {**typing.get_type_hints(config.RunConfig),
             **typing.get_type_hints(config.FinetuneConfig)}
    for field, name in (("ce_on", "CeOn"), ("divergence", "DivergenceName"),
                        ("reduce_terms", "ReduceTerms"), ("detach", "Detach"),
                        ("positions", "Positions")):
        assert hints[field] is getattr(options, name), field
        assert typing.get_type_hints(train.Objective)[field] is getattr(options, name), field
    for fn, field, name in ((M.pair_divergence, "divergence", "DivergenceName"),
                            (M.pair_divergence, "reduce_terms", "ReduceTerms"),
                            (M.pair_divergence, "detach", "Detach"),
                            (FU.fused_objective, "divergence", "DivergenceName"),
                            (FU.fused_objective, "reduce_terms", "ReduceTerms"),
                            (FU.fused_objective, "detach", "Detach"),
                            (A.misalignment_loss, "ce_on", "CeOn"),
                            (A.misalignment_loss, "positions", "Positions")):
        assert typing.get_type_hints(fn)[field] is getattr(options, name), (fn.__name__, field)
    assert M.DIVERGENCES == typing.get_args(options.DivergenceName)
    assert M.POSITIONS == typing.get_args(options.Positions)
    assert set(M.L_EXTRA_SETTINGS) == {1, 2, 3, 4}
    for name, values in (("ce_on", options.CE_ON), ("divergence", options.DIVERGENCES)):
        for value in values:  # every name the objective knows, a run may set
            config.RunConfig.from_dict({"name": "r", name: value})


# ---------------------------------------------------------------------------------------------
# windows, position sets, the loss and the metric


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
    out = A.misalignment_loss(model, tokens, l_train, l_extra, alpha=0.3, ce_on=ce_on,
                              chunk_size=3)
    a, b = tokens[:, :l_train], tokens[:, l_extra:]
    with torch.no_grad():
        la, lb = model(input_ids=a).logits, model(input_ids=b).logits
    ce_a = model(input_ids=a, labels=a).loss
    ce_b = model(input_ids=b, labels=b).loss
    sce = sce64(la[:, l_extra:], lb[:, : l_train - l_extra]).mean()
    torch.testing.assert_close(out.ce_a, ce_a.detach(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out.ce_b, ce_b.detach(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out.misalign.double(), sce, rtol=1e-4, atol=1e-5)
    ce = ce_a if ce_on == "a" else (ce_a + ce_b) / 2
    torch.testing.assert_close(out.loss.detach().double(), (ce + 0.3 * sce).detach().double(),
                               rtol=1e-4, atol=1e-5)
    assert out.n_overlap == 7


def _window_logits(model, tokens, l_train, l_extra):
    """The logits of window A (the first l_train tokens) and window B (from l_extra on)."""
    with torch.no_grad():
        return (model(input_ids=tokens[:, :l_train]).logits,
                model(input_ids=tokens[:, l_extra:]).logits)


def test_last_position_only(model, stream):
    l_train, l_extra = 12, 4
    tokens = stream.sample(2, l_train + l_extra, torch.Generator().manual_seed(3))
    out = A.misalignment_loss(model, tokens, l_train, l_extra, positions="last")
    la, lb = _window_logits(model, tokens, l_train, l_extra)
    ref = sce64(la[:, -1], lb[:, l_train - l_extra - 1]).mean()
    torch.testing.assert_close(out.misalign.double(), ref, rtol=1e-4, atol=1e-5)


def test_empty_overlap_gives_zero_term_and_a_working_backward(model, stream):
    l_train = 8
    tokens = stream.sample(2, 2 * l_train, torch.Generator().manual_seed(4))
    out = A.misalignment_loss(model, tokens, l_train, l_train, alpha=0.5)
    assert out.n_overlap == 0 and out.misalign.item() == 0.0
    assert out.loss.item() == pytest.approx(out.ce.item())
    out.loss.backward()
    assert any(p.grad is not None for p in model.parameters())
    model.zero_grad()


def test_l_extra_one_overlaps_all_but_one(model, stream):
    tokens = stream.sample(1, 9, torch.Generator().manual_seed(5))
    assert A.misalignment_loss(model, tokens, 8, 1).n_overlap == 7


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
    jeff = A.misalignment_metric(model, stream, l_train=16, n_samples=10, divergence="jeffreys")
    assert jeff.n == 10 and abs(jeff.mean) < 1e-5
    sce = A.misalignment_metric(model, stream, l_train=16, n_samples=10, seed=3)
    assert sce.mean > 0 and sce.stderr >= 0


def test_metric_is_deterministic_and_positive(model, stream):
    a = A.misalignment_metric(model, stream, l_train=16, n_samples=6, seed=1, batch_size=4)
    b = A.misalignment_metric(model, stream, l_train=16, n_samples=6, seed=1, batch_size=4)
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
        sce = sce64(la, lb)  # (count, overlap)
        sets = {"all": slice(None), "last": slice(-1, None), "paper": slice(first_b, None)}
        for name in keep:
            values[name].extend(sce[:, sets[name]].mean(-1).tolist())
        count_done += count
    return values


@pytest.mark.parametrize("setting", [1, 4])
def test_metric_position_sets_match_a_hand_rebuilt_reference(model, stream, setting):
    l_train = 16
    got = A.misalignment_metrics(model, stream, l_train, n_samples=7, seed=2, setting=setting,
                                 batch_size=3, positions=("paper", "all", "last"))
    ref = _reference_metric(model, stream, l_train, 7, 2, setting, 3, ("paper", "all", "last"))
    for name in ("paper", "all", "last"):
        assert got[name].n == 7
        np.testing.assert_allclose(got[name].values, ref[name], rtol=1e-4, atol=1e-5)
    # contexts from l/2 up are less dominated by the near-empty ones: the values differ
    assert got["paper"].values != got["all"].values
    single = A.misalignment_metric(model, stream, l_train, n_samples=7, seed=2, setting=setting,
                                   batch_size=3)
    assert single.values == got["paper"].values  # the default is the paper's definition


def test_metric_all_positions_keeps_the_old_draws(model, stream):
    """Asked for "all" alone, the metric averages every overlap position of the same draws as
    before this option existed (setting 1 never redraws)."""
    got = A.misalignment_metric(model, stream, 16, n_samples=5, seed=4, positions="all")
    ref = _reference_metric(model, stream, 16, 5, 4, 1, 8, ("all",))
    np.testing.assert_allclose(got.values, ref["all"], rtol=1e-4, atol=1e-5)


def test_loss_over_the_papers_positions(model, stream):
    l_train, l_extra = 12, 3
    tokens = stream.sample(2, l_train + l_extra, torch.Generator().manual_seed(6))
    out = A.misalignment_loss(model, tokens, l_train, l_extra, positions="paper")
    la, lb = _window_logits(model, tokens, l_train, l_extra)
    # B's contexts of at least 6 tokens: B's indices 5..8, A's 8..11
    ref = sce64(la[:, 8:12], lb[:, 5:9]).mean()
    torch.testing.assert_close(out.misalign.double(), ref, rtol=1e-4, atol=1e-5)
    # l_extra = 7 > l/2: overlap of 5 positions, none with both contexts >= 6 tokens
    tokens = stream.sample(2, l_train + 7, torch.Generator().manual_seed(7))
    out = A.misalignment_loss(model, tokens, l_train, 7, alpha=0.5, positions="paper")
    assert out.n_overlap == 5 and out.misalign.item() == 0.0
    assert out.loss.item() == pytest.approx(out.ce.item())


# ---------------------------------------------------------------------------------------------
# the fused kernel (lsa/fused.py) against the definition: values and gradients


def test_fused_sce_matches_the_definition_and_is_symmetric(logits):
    a, b = logits
    got = FU.symmetric_cross_entropy(a, b)
    assert got.shape == (3, 5) and got.dtype == torch.float32
    torch.testing.assert_close(got.double(), sce64(a, b), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got, FU.symmetric_cross_entropy(b, a))
    p = F.softmax(a.double(), -1)
    torch.testing.assert_close(FU.symmetric_cross_entropy(a, a).double(),
                               -2 * (p * p.log()).sum(-1), rtol=1e-5, atol=1e-5)
    assert (FU.symmetric_cross_entropy(a, a, divergence="jeffreys").abs() < 1e-5).all()


@pytest.mark.parametrize("divergence", ["sce", "jeffreys", "entropy"])
@pytest.mark.parametrize("reduce_terms", ["sum", "mean"])
def test_fused_divergence_chunked_equals_the_definition(logits, divergence, reduce_terms):
    a, b = logits
    kw = dict(divergence=divergence, reduce_terms=reduce_terms)
    full = FU.symmetric_cross_entropy(a, b, chunk_size=None, **kw)
    torch.testing.assert_close(FU.symmetric_cross_entropy(a, b, chunk_size=4, **kw),
                               full)  # 15 rows
    torch.testing.assert_close(full.double(), M.pair_divergence(a.double(), b.double(), **kw),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_fused_divergence_low_precision_and_extreme_logits(dtype, logits):
    a, b = (x.to(dtype) for x in logits)
    got = FU.symmetric_cross_entropy(a, b)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got.double(), sce64(a, b), rtol=1e-4, atol=1e-4)
    extreme = torch.zeros(2, 40, dtype=dtype)
    extreme[0, 0], extreme[1, 1] = 1e4, -1e4
    values = FU.symmetric_cross_entropy(extreme, extreme.flip(0))
    assert torch.isfinite(values).all()
    torch.testing.assert_close(values.double(), sce64(extreme, extreme.flip(0)), rtol=1e-5,
                               atol=1e-3)


def objective_case(dtype=torch.float32, T=9, V=13, seed=0):
    g = torch.Generator().manual_seed(seed)
    logits = (torch.randn(4, T, V, generator=g) * 3).to(dtype)
    tokens = torch.randint(0, V, (4, T), generator=g)
    w_a = torch.zeros(4, T - 1)
    w_a[:2] = 1 / (2 * (T - 1))
    w_b = torch.zeros(4, T - 1)
    w_b[2:] = 1 / (2 * (T - 1))
    w_ans = torch.zeros(4, T - 1)
    w_ans[2, 3], w_ans[3, 5] = 0.5, 0.5
    pairs = M.Pairs(rows_a=(0, 1), rows_b=(2, 3), start_a=3, start_b=0, length=T - 3)
    return logits, tokens, [w_a, w_b, w_ans], [1.0, 0.25, 0.5], pairs


def fused_and_definition(logits, tokens, weights, coefs, pairs, chunk, **kw):
    """The fused objective on ``logits`` and the definition (``M.objective``) on the same
    values in float64, each backpropagated from ``3 * loss`` (a grad_output other than 1)."""
    x = logits.clone().requires_grad_()
    loss, values = FU.fused_objective(x, tokens, weights, coefs, pairs, chunk_size=chunk, **kw)
    (loss * 3).backward()
    y = logits.double().requires_grad_()
    ref_loss, ref_values = M.objective(y, tokens, weights, coefs, pairs, **kw)
    (ref_loss * 3).backward()
    return (loss, values, x.grad), (ref_loss, ref_values, y.grad)


def assert_matches(got, ref, rtol_grad, atol_grad):
    assert got[0].dtype == got[1].dtype == torch.float32 and ref[0].dtype == torch.float64
    torch.testing.assert_close(got[0].double(), ref[0].detach(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got[1].double(), ref[1], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got[2].double(), ref[2], rtol=rtol_grad, atol=atol_grad)


@pytest.mark.parametrize("divergence", ["sce", "jeffreys", "entropy"])
@pytest.mark.parametrize("detach", ["none", "long", "short"])
@pytest.mark.parametrize("reduce_terms", ["sum", "mean"])
def test_fused_objective_matches_the_definition_fp32(divergence, detach, reduce_terms):
    case = objective_case()
    for chunk in (None, 1, 3, 5, 7, 64):  # 3, 5, 7 divide neither T nor the overlap
        got, ref = fused_and_definition(*case, chunk, alpha=0.7, divergence=divergence,
                                        reduce_terms=reduce_terms, detach=detach)
        assert got[1].shape == (4,) and got[2].dtype == torch.float32
        assert ref[2].abs().max() > 1e-3  # a gradient worth comparing
        assert_matches(got, ref, rtol_grad=1e-4, atol_grad=1e-6)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("divergence", ["sce", "jeffreys", "entropy"])
def test_fused_objective_matches_the_definition_low_precision(dtype, divergence):
    """bf16/fp16 logits: fp32 inside the chunk, so the values are those of the definition on
    the same (rounded) logits; the gradient comes back in the logits' dtype, rounded once."""
    logits, *rest = objective_case(dtype)
    got, ref = fused_and_definition(logits, *rest, 3, alpha=0.7, divergence=divergence)
    assert got[2].dtype == dtype
    eps = torch.finfo(dtype).eps
    assert_matches(got, ref, rtol_grad=2 * eps, atol_grad=1e-5)


def test_fused_objective_detach_zeroes_one_sides_divergence_gradient():
    logits, tokens, weights, coefs, pairs = objective_case()
    ce_only = fused_and_definition(logits, tokens, weights, coefs, None, 4, alpha=0.7)[0][2]
    for detach, rows in (("long", (0, 1)), ("short", (2, 3))):
        grad = fused_and_definition(logits, tokens, weights, coefs, pairs, 4, alpha=0.7,
                                    detach=detach)[0][2]
        torch.testing.assert_close(grad[list(rows)], ce_only[list(rows)])  # CE's only
        other = [r for r in range(4) if r not in rows]
        assert not torch.allclose(grad[other], ce_only[other])


def test_fused_objective_empty_overlap_is_a_zero_term_with_zero_gradient():
    logits, tokens, weights, coefs, _ = objective_case()
    empty = M.Pairs(rows_a=(0, 1), rows_b=(2, 3), start_a=9, start_b=0, length=0)
    got, ref = fused_and_definition(logits, tokens, weights, coefs, empty, 4, alpha=0.7)
    ce_only, _ = fused_and_definition(logits, tokens, weights, coefs, None, 4, alpha=0.7)
    assert got[1][-1].item() == 0.0 and ref[1][-1].item() == 0.0
    torch.testing.assert_close(got[0], ce_only[0])
    torch.testing.assert_close(got[2], ce_only[2])


def test_fused_objective_without_gradient_gives_the_same_values():
    logits, *rest = objective_case()
    with torch.no_grad():
        loss, values = FU.fused_objective(logits, *rest, chunk_size=4, alpha=0.7)
    ref_loss, ref_values = M.objective(logits, *rest, alpha=0.7)
    torch.testing.assert_close(loss, ref_loss)
    torch.testing.assert_close(values, ref_values)


def test_fused_objective_backward_twice_is_refused():
    logits, *rest = objective_case()
    x = logits.clone().requires_grad_()
    loss, _ = FU.fused_objective(x, *rest, chunk_size=4, alpha=0.7)
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="once"):
        loss.backward()


@pytest.mark.parametrize("pairs", [M.Pairs((0, 1), (1, 2), 0, 0, 3),   # row 1 on both sides
                                   M.Pairs((0,), (2, 3), 0, 0, 3),      # unequal sides
                                   M.Pairs((0,), (2,), 5, 0, 5)])       # past the end
def test_fused_objective_rejects_bad_pairs(pairs):
    logits, tokens, weights, coefs, _ = objective_case()
    with pytest.raises(ValueError, match="distinct rows"):
        FU.fused_objective(logits, tokens, weights, coefs, pairs)


def unfused_misalignment_loss(model, tokens, l_train, l_extra, alpha, ce_on, detach, positions,
                              divergence, answer_mask, answer_weight):
    """The objective spelled out independently of the weights and pairs that
    misalignment_loss builds: F.cross_entropy per window, the definition's divergence, the
    answers' CE on window B."""
    n = tokens.shape[0]
    a, b = tokens[:, :l_train], tokens[:, l_extra:]
    logits = model(input_ids=torch.cat([a, b])).logits
    la, lb = logits[:n], logits[n:]
    V = logits.shape[-1]
    ce_a = F.cross_entropy(la[:, :-1].reshape(-1, V), a[:, 1:].reshape(-1))
    ce_b = F.cross_entropy(lb[:, :-1].reshape(-1, V), b[:, 1:].reshape(-1))
    ce = {"a": ce_a, "b": ce_b, "both": (ce_a + ce_b) / 2}[ce_on]
    if answer_mask is not None:
        target = answer_mask[:, l_extra:][:, 1:]
        ce = ce + answer_weight * F.cross_entropy(lb[:, :-1][target], b[:, 1:][target])
    sel_a, sel_b = M.select_positions(l_train, l_extra, positions)
    div = M.pair_divergence(la[:, sel_a], lb[:, sel_b], divergence=divergence,
                            detach=detach).mean()
    return ce + alpha * div, ce, div


@pytest.mark.parametrize("ce_on, detach, positions, divergence, answers", [
    ("a", "none", "all", "sce", False),
    ("both", "long", "paper", "sce", False),
    ("b", "short", "last", "jeffreys", True),
    ("a", "none", "all", "entropy", True),
])
def test_misalignment_loss_fused_and_readable_match_the_spelled_out_objective(
        model, stream, ce_on, detach, positions, divergence, answers):
    l_train, l_extra = 12, 5
    tokens = stream.sample(2, l_train + l_extra, torch.Generator().manual_seed(8))
    mask = None
    if answers:
        mask = torch.zeros_like(tokens, dtype=torch.bool)
        mask[0, 14], mask[1, 15:17] = True, True
    kw = dict(alpha=0.3, ce_on=ce_on, detach=detach, positions=positions,
              divergence=divergence)
    model.zero_grad()  # the model is shared: start clean even after a failed case
    loss, ce, div = unfused_misalignment_loss(model, tokens, l_train, l_extra,
                                              answer_mask=mask, answer_weight=0.7, **kw)
    loss.backward()
    ref = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    for fused in (True, False):
        out = A.misalignment_loss(model, tokens, l_train, l_extra, chunk_size=5,
                                  answer_mask=mask, answer_weight=0.7, fused=fused, **kw)
        out.loss.backward()
        torch.testing.assert_close(out.loss.detach(), loss.detach(), rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(out.ce, ce.detach(), rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(out.misalign, div.detach(), rtol=1e-5, atol=1e-6)
        assert (out.answer_ce is not None) == answers
        for g, p in zip(ref, model.parameters()):
            torch.testing.assert_close(p.grad, g, rtol=1e-4, atol=1e-6)
        model.zero_grad()


def test_misalignment_loss_fused_matches_readable_with_bf16_logits(stream):
    """Low precision end to end: bf16 logits (a parameter), the fused loss against the
    readable one on the same logits, values and the bf16 gradient."""
    l_train, l_extra, V = 16, 5, 64
    tokens = torch.randint(0, V, (2, l_train + l_extra), generator=torch.Generator().manual_seed(9))
    grads, outs = [], []
    for fused in (True, False):
        model = FixedLogits(4, l_train, V)
        out = A.misalignment_loss(model, tokens, l_train, l_extra, alpha=0.5, ce_on="both",
                                  chunk_size=6, fused=fused)
        out.loss.backward()
        outs.append(out)
        grads.append(model.table.grad)
    (got, ref), eps = outs, torch.finfo(torch.bfloat16).eps
    for name in ("loss", "ce", "ce_a", "ce_b", "misalign"):
        torch.testing.assert_close(getattr(got, name).detach(), getattr(ref, name).detach(),
                                   rtol=1e-5, atol=1e-5)
    assert got.misalign > 0 and grads[0].dtype == grads[1].dtype == torch.bfloat16
    torch.testing.assert_close(grads[0].float(), grads[1].float(), rtol=2 * eps, atol=1e-5)


def test_ce_loss_fused_and_readable_match_cross_entropy_with_answers():
    logits, tokens, *_ = objective_case(T=10)
    mask = torch.zeros_like(tokens, dtype=torch.bool)
    mask[1, 4:6] = mask[3, 9] = True
    y = logits.clone().requires_grad_()
    V = logits.shape[-1]
    ref_ce = F.cross_entropy(y[:, :-1].reshape(-1, V), tokens[:, 1:].reshape(-1))
    ref_ans = F.cross_entropy(y[:, :-1][mask[:, 1:]], tokens[:, 1:][mask[:, 1:]])
    (ref_ce + 0.4 * ref_ans).backward()
    for fused in (True, False):
        x = logits.clone().requires_grad_()
        loss, ce, ans = A.ce_loss(x, tokens, answer_mask=mask, answer_weight=0.4, chunk_size=3,
                                  fused=fused)
        loss.backward()
        torch.testing.assert_close(ce, ref_ce.detach())
        torch.testing.assert_close(ans, ref_ans.detach())
        torch.testing.assert_close(loss.detach(), (ref_ce + 0.4 * ref_ans).detach())
        torch.testing.assert_close(x.grad, y.grad)
        assert A.ce_loss(logits, tokens, fused=fused)[2] is None
        none_marked = A.ce_loss(logits, tokens, answer_mask=torch.zeros_like(mask),
                                answer_weight=1, fused=fused)
        assert none_marked[2].item() == 0.0


# ---------------------------------------------------------------------------------------------
# the fused kernel's memory: one chunk of fp32, whatever the sequence length


class LiveFloat32(torch.utils._python_dispatch.TorchDispatchMode):
    """Peak bytes of fp32 storage alive at once, among the storages created inside the mode
    (a storage counts until its last view is gone)."""

    def __init__(self):
        super().__init__()
        self.live, self.peak, self.seen = 0, 0, set()

    def _free(self, key, nbytes):
        self.live -= nbytes
        self.seen.discard(key)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        import weakref

        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if not isinstance(t, torch.Tensor) or t.dtype != torch.float32:
                continue
            storage = t.untyped_storage()
            key = storage.data_ptr()
            if key in self.seen:
                continue
            self.seen.add(key)
            self.live += storage.nbytes()
            self.peak = max(self.peak, self.live)
            weakref.finalize(storage, self._free, key, storage.nbytes())
        return out


def vector_bytes(B, T, K):
    """fp32 per-position vectors of the objective: K weight rows, their product with the
    coefficients, the CE coefficient, the nll (4 bytes each)."""
    return 4 * B * T * (2 * K + 2)


def test_fused_objective_holds_one_chunk_of_fp32_whatever_the_length():
    """bf16 logits: the fp32 alive at once (forward and backward) is one chunk of rows x
    vocabulary (and a quarter for the pairs' scratch) plus per-position vectors; nothing of
    the size positions x vocabulary, at any sequence length."""
    V, chunk = 512, 8
    for T in (64, 256):
        logits, tokens, weights, coefs, pairs = objective_case(torch.bfloat16, T=T, V=V)
        x = logits.clone().requires_grad_()
        with LiveFloat32() as mode:
            loss, _ = FU.fused_objective(x, tokens, weights, coefs, pairs, chunk_size=chunk,
                                        alpha=0.5)
            loss.backward()
        assert mode.peak <= 1.25 * chunk * V * 4 + vector_bytes(4, T, 3), (T, mode.peak)


class FixedLogits(torch.nn.Module):
    """A 'model' whose bf16 logits are a parameter: every fp32 tensor is the objective's."""

    def __init__(self, rows, T, V):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.table = torch.nn.Parameter((torch.randn(rows, T, V, generator=g) * 3).bfloat16())

    def forward(self, input_ids):
        return type("Out", (), {"logits": self.table * 1})


def test_misalignment_loss_with_bf16_logits_holds_one_chunk_of_fp32(stream):
    V, chunk = 512, 8
    for l_train in (64, 256):
        model = FixedLogits(4, l_train, V)
        tokens = torch.randint(0, V, (2, l_train + 16), generator=torch.Generator().manual_seed(0))
        with LiveFloat32() as mode:
            out = A.misalignment_loss(model, tokens, l_train, 16, alpha=0.5, ce_on="both",
                                      chunk_size=chunk)
            out.loss.backward()
        # the windows' weight masks come on top of the objective's vectors
        bound = 1.25 * chunk * V * 4 + vector_bytes(4, l_train, 2) + 4 * 4 * l_train * 2
        assert mode.peak <= bound, (l_train, mode.peak)


def test_pair_measures_by_hand():
    """p = softmax([0, log 3]) = (1/4, 3/4), q = (3/4, 1/4): KL(p||q) = KL(q||p) =
    (3/4 - 1/4) log 3 = 0.5 log 3; H(p) = H(q) = -(1/4 log 1/4 + 3/4 log 3/4)."""
    a = torch.tensor([[0.0, math.log(3.0)]])
    b = torch.tensor([[math.log(3.0), 0.0]])
    got = A.pair_measures(a, b)
    h = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))
    assert got["jeffreys"].item() == pytest.approx(math.log(3.0), rel=1e-5)
    assert got["entropy"].item() == pytest.approx(2 * h, rel=1e-5)
    assert got["sce"].item() == pytest.approx(math.log(3.0) + 2 * h, rel=1e-5)
    assert got["l2"].item() == pytest.approx(math.sqrt(2) * 0.5, rel=1e-5)
    assert got["tv"].item() == pytest.approx(0.5, rel=1e-5)
    assert got["top1_change"].item() == 1.0
    same = A.pair_measures(a, a)
    assert same["jeffreys"].item() == pytest.approx(0, abs=1e-6)
    assert same["l2"].item() == 0 and same["top1_change"].item() == 0
    assert same["sce"].item() == pytest.approx(2 * h, rel=1e-5)  # SCE(p, p) = 2 H(p)


def test_alignment_measures_are_the_metric_and_its_parts(model, stream):
    """One pass gives the paper's metric (the same draws as misalignment_metrics), the metric
    over every position, and the parts: SCE = Jeffreys + entropy, sample by sample."""
    l_train = 16
    res = A.alignment_measures(model, stream, l_train, n_samples=7, seed=2, batch_size=3,
                               chunk_size=5)
    ref = A.misalignment_metrics(model, stream, l_train, n_samples=7, seed=2, batch_size=3)
    np.testing.assert_allclose(res.paper["sce"].values, ref["paper"].values, rtol=1e-4)
    np.testing.assert_allclose(res.all.values, ref["all"].values, rtol=1e-4)
    np.testing.assert_allclose(res.paper["sce"].values,
                               np.add(res.paper["jeffreys"].values, res.paper["entropy"].values),
                               rtol=1e-4)
    assert len(res.by_sample) == 7 and all(1 <= s["l_extra"] <= l_train // 2
                                           for s in res.by_sample)
    assert all(s["top1_change"] in (0.0, 1.0) and 0 <= s["tv"] <= 1 for s in res.by_sample)
