"""The fused, chunked objective: what lsa/misalign.py defines, computed faster and in less memory.

It computes exactly what lsa/misalign.py defines: ``fused_objective`` is ``misalign.objective``
(CE terms plus ``alpha`` times the divergence, SCE by default, averaged over pairs of
positions), and ``symmetric_cross_entropy`` is ``misalign.pair_divergence`` (values only).
The function of the logits is the same, with the same options. Only the order of the
floating-point operations differs, so results agree to rounding. The difference is cost: the
autograd form stores fp32 log-probabilities for every position and runs a second pass for the
backward. The training losses and the metric (lsa/alignment.py) call this module;
tests/unit/test_misalign.py checks values and gradients against the readable definition.

The definition stands below this kernel: the check of the options (``check_options``), the
compared positions (``Pairs``) and ``DEFAULT_CHUNK`` (the metric's positions per chunk) come
from lsa/misalign.py, which imports nothing from lsa but the options' names (lsa/options.py,
torch-free: ``DivergenceName``, ``ReduceTerms``, ``Detach``), which this kernel imports from
there too.

How it works. Every CE term and the divergence come from ONE pass over the logits, in chunks of
positions (rows), each chunk one fixed set of tensor operations whatever it holds (on a GPU a
launch each): per row the fp32 ``log p = log_softmax(x)`` and ``p = exp(log p)`` (``nll =
-log p[y]``), the divergence's dot products, and in the same pass the gradient of the loss with
respect to the logits, written into a buffer of the logits' dtype. The backward pass only
multiplies that buffer by the incoming gradient. Nothing in the forward or the backward waits
for the device (no ``.item()``, ``.cpu()`` or ``.tolist()``): where each position goes is worked
out on the host from the pairs' indices (``_layout``, cached), and every position's nll and
gradient are computed (a position no term weighs gets a zero gradient from its zero
coefficient).

A chunk holds whole pairs, A's rows then B's at the same absolute positions, for every pair of
rows at once, then positions outside the pairs; so each position's log-softmax serves both its
CE and the divergence. Chunks are sized by bytes: ``chunk_bytes`` (``CHUNK_BYTES``) of fp32
scratch, two rows of the vocabulary per position in a chunk with pairs (``log p`` and ``p``; the
gathered logits and the gradient's cast reuse them), one without (none for fp32 logits without
pairs: the gradient buffer serves); ``chunk_size`` caps the rows at that many fp32 rows of
scratch. Beyond the logits and their gradient (both in the logits' dtype, as autograd would hold
them) the objective holds that scratch and a few fp32 numbers per position, whatever the
sequence length.

Gradients with respect to the logits (``p = softmax(a)``, ``q = softmax(b)``, ``X(p, q) =
-sum p log q``, ``H(p) = -sum p log p``, ``KL(p||q) = X(p, q) - H(p)``), from
``d p_v / d a_j = p_v (delta_vj - p_j)`` and ``d log p_v / d a_j = delta_vj - p_j``:

- CE of target ``y``: ``d(-log p_y) / da = p - onehot(y)``;
- ``X(p, q)``: ``d/da = -p * (log q + X(p, q))``, ``d/db = q - p``; so for SCE
  ``dSCE/da = p * (1 + sum p log q) - (p * log q + q)`` (and ``dSCE/db`` with ``a, p <-> b, q``);
- ``KL(p||q)``: ``d/da = p * (log p - log q - KL(p||q))``, ``d/db = q - p``; so for Jeffreys
  ``dJ/da = p * (1 - KL(p||q)) + (p * (log p - log q) - q)``;
- ``H(p)``: ``d/da = -p * (log p + H(p))``; the entropy term:
  ``d(H(p) + H(q))/da = p * sum p log p - p * log p``.

Each is ``p * k + r`` with a per-row scalar ``k`` from the dot product the term sums and a rest
``r`` from the products that dot product sums (``_pair_dots``); with CE coefficient ``c`` and
divergence coefficient ``s`` a row's gradient is ``p * (c + s k) + s r - c onehot(y)``. A
detached side (``detach``) gets none of the divergence's gradient (its CE gradient stays);
``reduce_terms="mean"`` halves both terms and their gradients; an empty set of pairs adds a
zero term and no gradient.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch
from torch.autograd.function import once_differentiable

from lsa.misalign import DEFAULT_CHUNK, Pairs, check_options
from lsa.options import Detach, DivergenceName, ReduceTerms

#: fp32 scratch of one chunk of the objective by default, per device type. On a GPU every
#: operation is a launch: 2 GiB holds ``gpu-small``'s whole loss (16 x 1024 positions,
#: vocabulary 16384) in one chunk, with pairs (its CE alone takes 1 GiB; 1 GiB would hold as
#: much for both, at a second chunk for the pairs: tests/unit/test_fused_ops.py). On a CPU an
#: operation costs little and memory is short: 64 MiB, 512 positions of a 32000 vocabulary.
CHUNK_BYTES = {"cuda": 2**31, "cpu": 2**26}

# a side's term is SIGN times the dot product _pair_dots sums for it
_SIGN = {"sce": -1.0, "jeffreys": 1.0, "entropy": -1.0}

# ---------------------------------------------------------------------------------------------
# the divergence of a chunk's pairs


class _Rows(NamedTuple):
    """The first ``2h`` rows of a chunk's tensor (its pairs) and their halves, A's and B's."""

    both: torch.Tensor
    a: torch.Tensor
    b: torch.Tensor


def _pair_rows(t: torch.Tensor, h: int) -> _Rows:
    both = t if t.shape[0] == 2 * h else t[:2 * h]
    return _Rows(both, *both.chunk(2))


def _pair_dots(L: _Rows, P: _Rows, divergence: str, out: _Rows) -> None:
    """``out`` = the dot products of the divergence's terms for a chunk's pairs, A's then B's,
    from their fp32 log-probabilities ``L`` and probabilities ``P``; a side's term is
    ``_SIGN[divergence]`` times its sum. ``L`` is overwritten with the products they sum:

    - ``"sce"``: ``[q * log p; p * log q]`` (each half holds the other side's product), whose
      sums are A's ``sum p log q`` and B's ``sum q log p``;
    - ``"jeffreys"``: ``[p * (log p - log q); q * (log q - log p)]``: KL(p||q), KL(q||p);
    - ``"entropy"``: ``[p * log p; q * log q]``: -H(p), -H(q).
    """
    if divergence == "sce":
        L.b.mul_(P.a)
        L.a.mul_(P.b)
        torch.sum(L.b, -1, keepdim=True, out=out.a)
        torch.sum(L.a, -1, keepdim=True, out=out.b)
        return
    if divergence == "jeffreys":
        L.a.sub_(L.b)
        torch.neg(L.a, out=L.b)
    L.both.mul_(P.both)
    torch.sum(L.both, -1, keepdim=True, out=out.both)


def symmetric_cross_entropy(logits_a: torch.Tensor, logits_b: torch.Tensor, *,
                            divergence: DivergenceName = "sce",
                            reduce_terms: ReduceTerms = "sum",
                            chunk_size: int | None = DEFAULT_CHUNK) -> torch.Tensor:
    """Per-position divergence between two ``(..., V)`` logit tensors; returns ``(...)`` in fp32.

    Values only, no gradient (training goes through ``fused_objective``). ``logits_a`` is the
    long-context side, ``logits_b`` the short one; ``chunk_size`` positions at a time (None:
    all). Computed in fp32 by ``log_softmax``, so bf16/fp16 logits and extreme values
    (``+-1e4``) stay finite.
    """
    if logits_a.shape != logits_b.shape:
        raise ValueError(f"logits shapes differ: {tuple(logits_a.shape)} vs "
                         f"{tuple(logits_b.shape)}")
    check_options(divergence, reduce_terms, "none")
    lead, vocab = logits_a.shape[:-1], logits_a.shape[-1]
    a, b = logits_a.detach().reshape(-1, vocab), logits_b.detach().reshape(-1, vocab)
    n = a.shape[0]
    step = max(1, n if not chunk_size or chunk_size >= n else chunk_size)
    buf = a.new_empty((2, 2 * min(step, n), vocab), dtype=torch.float32)
    out = a.new_empty(n, dtype=torch.float32)
    scale = _SIGN[divergence] * (0.5 if reduce_terms == "mean" else 1.0)
    for start in range(0, n, step):
        k = min(step, n - start)
        L, P = buf[0, :2 * k], buf[1, :2 * k]
        torch.log_softmax(a[start:start + k], -1, dtype=torch.float32, out=L[:k])
        torch.log_softmax(b[start:start + k], -1, dtype=torch.float32, out=L[k:])
        torch.exp(L, out=P)
        dots = _pair_rows(L.new_empty((2 * k, 1)), k)
        _pair_dots(_pair_rows(L, k), _pair_rows(P, k), divergence, dots)
        out[start:start + k] = (dots.a + dots.b).squeeze(-1) * scale
    return out.reshape(lead)


# ---------------------------------------------------------------------------------------------
# the objective: CE terms and the divergence, with the gradient from the same pass


@dataclass
class _Plan:
    targets: torch.Tensor     # (B, T, 1) next token of each position (last column: unused)
    weights: torch.Tensor     # (K, B, T) weight of each position's nll in each CE term
    row_coef: torch.Tensor    # (B, T, 1) the CE part of d loss / d nll
    pairs: Pairs | None       # None, or pairs with at least one position
    divergence: str
    half: bool                # reduce_terms == "mean"
    scale_a: float            # d loss / d (A's divergence term) per pair position (0: detached)
    scale_b: float
    chunk_bytes: int          # fp32 scratch per chunk


@functools.lru_cache(maxsize=64)
def _layout(B: int, T: int, pairs: Pairs | None, rows: int
            ) -> tuple[np.ndarray | None, np.ndarray | None, tuple[tuple[int, int, int], ...]]:
    """Where the chunks take the ``B * T`` positions from: ``(order, side, chunks)``. ``order``
    holds the flat positions ``b * T + t`` in the chunks' order (None: in place), ``side`` the
    side of each (1: A, 2: B, 0: in no pair), and per chunk ``(start, h, stop)``:
    ``order[start:stop]`` is ``h`` of A's pair positions, their ``h`` partners of B, then
    positions outside the pairs. At most ``rows`` positions per chunk (3 at least with pairs: a
    pair and one more)."""
    n_pos = B * T
    if pairs is None:
        return None, None, tuple((lo, 0, min(lo + rows, n_pos)) for lo in range(0, n_pos, rows))
    span = np.arange(pairs.length)
    a = (np.asarray(pairs.rows_a)[:, None] * T + pairs.start_a + span).ravel()
    b = (np.asarray(pairs.rows_b)[:, None] * T + pairs.start_b + span).ravel()
    rest = np.setdiff1d(np.arange(n_pos), np.concatenate([a, b]), assume_unique=True)
    rows = max(3, rows)
    count = -(-n_pos // rows)
    while 2 * -(-len(a) // count) + -(-len(rest) // count) > rows:
        count += 1
    order, side, chunks, start = [], [], [], 0
    for p, r in zip(np.array_split(np.arange(len(a)), count), np.array_split(rest, count)):
        order += [a[p], b[p], r]
        side += [np.full(len(p), 1, np.int8), np.full(len(p), 2, np.int8),
                 np.zeros(len(r), np.int8)]
        chunks.append((start, len(p), start + 2 * len(p) + len(r)))
        start = chunks[-1][2]
    return np.concatenate(order), np.concatenate(side), tuple(chunks)


#: per divergence, ``(alpha, beta)`` of the gradient's per-row scalar ``k = alpha + beta *
#: dot`` (module docstring): SCE ``1 + sum p log q``, Jeffreys ``1 - KL``, entropy ``sum p log p``
_K = {"sce": (1.0, 1.0), "jeffreys": (1.0, -1.0), "entropy": (0.0, 1.0)}


def _chunk(x: torch.Tensor, index: torch.Tensor | None, gathered: torch.Tensor | None,
           L: torch.Tensor, P: torch.Tensor, y: torch.Tensor, picked: torch.Tensor, h: int,
           divergence: str, dots: torch.Tensor | None = None, coef: torch.Tensor | None = None,
           scale: torch.Tensor | None = None) -> None:
    """One chunk of rows, one set of operations: ``picked`` = log p of each row's target, the
    first ``2h`` rows of ``dots`` = the dot products of its ``h`` pairs (``_pair_dots``), and
    with ``coef`` (the rows' CE coefficients; ``scale``, their divergence coefficients, None:
    no divergence gradient) ``P`` = d loss / d logits of the rows. ``x`` is the chunk's logits
    (``index`` None) or all of them, the chunk's rows at ``index``, gathered into ``gathered``
    (None: a new tensor); ``L``, ``P`` its fp32 buffers (``P`` may be ``L`` without pairs: the
    probabilities then replace the log-probabilities)."""
    if index is not None:
        x = torch.index_select(x, 0, index, out=gathered)
    torch.log_softmax(x, -1, dtype=torch.float32, out=L)
    torch.gather(L, -1, y, out=picked)
    if coef is None and not h:
        return
    torch.exp(L, out=P)
    if h:
        pair_L, pair_P = _pair_rows(L, h), _pair_rows(P, h)
        _pair_dots(pair_L, pair_P, divergence, _pair_rows(dots, h))
    if coef is None:
        return
    if scale is None or not h:
        P.mul_(coef)
    else:  # p * (c + s k) + s r, with k = alpha + beta * dot (the rows out of pairs: c p)
        alpha, beta = _K[divergence]
        k = torch.addcmul(coef, scale, dots, value=beta)
        _pair_rest(pair_L, pair_P, P, k.add_(scale, alpha=alpha) if alpha else k,
                   _pair_rows(scale, h), divergence)
    P.scatter_add_(-1, y, coef.neg())


def _pair_rest(L: _Rows, P: _Rows, P_all: torch.Tensor, k: torch.Tensor, scale: _Rows,
               divergence: str) -> None:
    """``P_all`` = ``P_all * k`` plus, on its pair rows ``P``, ``s r`` (module docstring) from
    the products ``_pair_dots`` left in ``L``."""
    if divergence == "sce":       # r = -(p log q + q); each half of L holds the other side's
        L.both.add_(P.both)
        P_all.mul_(k)
        P.a.addcmul_(scale.a, L.b, value=-1)
        P.b.addcmul_(scale.b, L.a, value=-1)
        return
    if divergence == "jeffreys":  # r = p (log p - log q) - q
        L.a.sub_(P.b)
        L.b.sub_(P.a)
    P_all.mul_(k)                 # entropy: r = -p log p
    P.both.addcmul_(scale.both, L.both, value=1 if divergence == "jeffreys" else -1)


def _as(buf: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The first bytes of contiguous fp32 ``buf`` ``(n, V)`` as contiguous ``(n, V)`` rows of
    ``dtype`` (at most 4 bytes an element)."""
    return buf if dtype == buf.dtype else buf.view(dtype).view(-1, buf.shape[1])[:buf.shape[0]]


def _to(array: np.ndarray, device: torch.device) -> torch.Tensor:
    """A host array on ``device`` without waiting for the device (pinned, asynchronous)."""
    out = torch.from_numpy(array)
    return out.pin_memory().to(device, non_blocking=True) if device.type == "cuda" else out


def _evaluate(logits: torch.Tensor, plan: _Plan, need_grad: bool
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """One pass over ``logits`` ``(B, T, V)``: per-position nll ``(B, T)``, the sum of the
    pairs' dot products (fp32; the divergence is ``_SIGN`` times it, averaged), and d loss / d
    logits (in the logits' dtype; fp32 for fp16) when asked."""
    B, T, V = logits.shape
    N = B * T
    x = logits.detach().reshape(N, V)
    # the gradient is kept in the logits' dtype, except fp16: unscaled (the loss scale comes in
    # backward) its small entries would underflow, so fp16 logits keep an fp32 gradient
    grad_dtype = torch.float32 if x.dtype == torch.float16 else x.dtype
    grad = torch.empty(x.shape, dtype=grad_dtype, device=x.device) if need_grad else None
    rows = max(1, plan.chunk_bytes // (4 * V * (1 + bool(plan.pairs))))
    order, side, chunks = _layout(B, T, plan.pairs, rows)
    index = None if order is None else _to(order, x.device)
    picked = x.new_empty((N, 1), dtype=torch.float32)  # log p of the targets, chunk order
    dots = _chunks(x, grad, index, side, chunks, picked, plan)
    nll = picked.view(N).neg_()
    if index is not None:
        nll = torch.empty_like(nll).index_copy_(0, index, nll)
    dot_sum = x.new_zeros((), dtype=torch.float32) if dots is None else dots.sum()
    return nll.view(B, T), dot_sum, None if grad is None else grad.view(B, T, V)


def _chunks(x: torch.Tensor, grad: torch.Tensor | None, index: torch.Tensor | None,
            side: np.ndarray | None, chunks, picked: torch.Tensor, plan: _Plan
            ) -> torch.Tensor | None:
    """The chunks of ``_evaluate`` (``_layout``: ``index``, ``side``, ``chunks``) over the
    ``(N, V)`` logits ``x``: ``picked``, ``grad`` (when given) and the dot products of the pairs
    in chunk order (``(N, 1)``, 0 out of the pairs; None without pairs)."""
    N, V = x.shape
    pairs = index is not None
    y, coef = plan.targets.reshape(N, 1), None if grad is None else plan.row_coef.reshape(N, 1)
    dots = scale = None
    if pairs:
        y, coef = y.index_select(0, index), coef if coef is None else coef.index_select(0, index)
        dots = x.new_zeros((N, 1), dtype=torch.float32)
        if coef is not None and (plan.scale_a or plan.scale_b):
            scale = _to(np.array([0.0, plan.scale_a, plan.scale_b], np.float32)[side, None],
                        x.device)
    # fp32 logits without pairs: the gradient buffer is the scratch
    direct = grad is not None and not pairs and grad.dtype == torch.float32
    size = max(stop - start for start, _, stop in chunks)
    buf = None if direct else x.new_empty((1 + pairs, size, V), dtype=torch.float32)
    Ls, Ps = (grad, grad) if direct else (buf[0], buf[-1])
    # with pairs the logits' rows are gathered into P's memory (free until the exp) and a
    # low-precision gradient is cast into L's (free after it)
    xs = _as(Ps, x.dtype) if pairs and x.element_size() <= 4 else None
    gs = _as(Ls, grad.dtype) if pairs and grad is not None and grad.element_size() < 4 else None
    for start, h, stop in chunks:
        def rows(t, lo=start, hi=stop):  # a chunk's rows (all: the tensor itself)
            return t if t is None or (lo, hi) == (0, t.shape[0]) else t[lo:hi]

        L, P = (rows(grad),) * 2 if direct else (rows(Ls, 0, stop - start),
                                                 rows(Ps, 0, stop - start))
        part = rows(index)
        _chunk(x if pairs else rows(x), part, rows(xs, 0, stop - start), L, P, rows(y),
             rows(picked), h, plan.divergence, *map(rows, (dots, coef, scale)))
        if grad is not None and pairs:
            grad.index_copy_(0, part, P if grad.dtype == P.dtype else P.to(grad.dtype)
                             if gs is None else rows(gs, 0, stop - start).copy_(P))
        elif grad is not None and not direct:
            rows(grad).copy_(P)
    return dots


class _FusedObjective(torch.autograd.Function):
    """The loss from ``_evaluate``; its gradient is computed in the forward pass and kept (in
    the logits' dtype, in place of the logits autograd would otherwise keep)."""

    @staticmethod
    def forward(ctx, logits, plan: _Plan, coefs: torch.Tensor, div_coef: float):
        with torch.autocast(logits.device.type, enabled=False):
            nll, dot_sum, grad = _evaluate(logits, plan, need_grad=True)
        values = _values(nll, dot_sum, plan)
        ctx.grad = grad
        ctx.mark_non_differentiable(values)
        return _loss(values, coefs, div_coef), values

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_loss, _grad_values):
        grad, ctx.grad = ctx.grad, None
        if grad is None:
            raise RuntimeError("the fused objective's backward runs once (its gradient is "
                               "scaled in place); do not retain its graph for a second pass")
        # scaled unconditionally: comparing grad_loss with 1 would wait for the device
        return grad.mul_(grad_loss.to(grad.dtype)), None, None, None


def _values(nll: torch.Tensor, dot_sum: torch.Tensor, plan: _Plan) -> torch.Tensor:
    ce = (plan.weights * nll).sum((1, 2))
    count = plan.pairs.count if plan.pairs is not None else 0
    div = dot_sum * (_SIGN[plan.divergence] * (0.5 if plan.half else 1.0) / count) if count \
        else dot_sum
    return torch.cat([ce, div.reshape(1)])


def _loss(values: torch.Tensor, coefs: torch.Tensor, div_coef: float) -> torch.Tensor:
    return (values[:-1] * coefs).sum() + div_coef * values[-1]


def fused_objective(logits: torch.Tensor, tokens: torch.Tensor,
                    ce_weights: Sequence[torch.Tensor], ce_coefs: Sequence[float],
                    pairs: Pairs | None = None, *, alpha: float = 0.0,
                    divergence: DivergenceName = "sce", reduce_terms: ReduceTerms = "sum",
                    detach: Detach = "none", chunk_size: int | None = None,
                    chunk_bytes: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(loss, values)`` of CE terms and a divergence over ``(B, T, V)`` logits, in one pass.

    ``nll[b, t]`` is the CE of predicting ``tokens[b, t + 1]`` from ``logits[b, t]``. Term
    ``k`` is ``sum(ce_weights[k] * nll)`` (``ce_weights[k]`` of shape ``(B, T - 1)``: a token
    mean is weights ``1 / count``); the divergence is averaged over the positions of ``pairs``
    (0 when there are none). ``loss = sum_k ce_coefs[k] * term_k + alpha * divergence``;
    ``values`` (fp32, no gradient) holds the K terms and the divergence. The gradient with
    respect to ``logits`` is computed in the forward pass (closed forms in the module
    docstring) and only scaled in the backward pass, which therefore runs once. Arguments and
    options as in ``lsa.misalign.objective``, the definition this computes; ``chunk_bytes`` of
    fp32 scratch per chunk (None: ``CHUNK_BYTES`` of the logits' device), at most
    ``chunk_size`` rows of the vocabulary (None: no cap).
    """
    check_options(divergence, reduce_terms, detach)
    if alpha < 0:
        raise ValueError(f"alpha = {alpha}: must be >= 0")
    if len(ce_weights) != len(ce_coefs):
        raise ValueError(f"{len(ce_weights)} CE weight tensors for {len(ce_coefs)} coefficients")
    B, T, V = logits.shape
    if tokens.shape != (B, T):
        raise ValueError(f"tokens {tuple(tokens.shape)} do not match logits {(B, T, V)}")
    if pairs is not None:
        rows = list(pairs.rows_a) + list(pairs.rows_b)
        if (len(pairs.rows_a) != len(pairs.rows_b) or len(set(rows)) != len(rows)
                or not all(0 <= r < B for r in rows) or pairs.length < 0
                or min(pairs.start_a, pairs.start_b) < 0
                or max(pairs.start_a, pairs.start_b) + pairs.length > T):
            raise ValueError(f"{pairs}: needs as many distinct rows on each side, each row once, "
                             f"and positions within the {T} of the logits")
    dev = logits.device
    weights = logits.new_zeros((len(ce_weights), B, T), dtype=torch.float32)
    for k, w in enumerate(ce_weights):
        weights[k, :, :-1] = w
    coefs = torch.tensor([float(c) for c in ce_coefs], dtype=torch.float32, device=dev)
    targets = torch.cat([tokens[:, 1:], tokens[:, :1]], dim=1).to(dev).unsqueeze(-1)
    count = pairs.count if pairs is not None else 0
    scale = alpha / count * (0.5 if reduce_terms == "mean" else 1.0) if count else 0.0
    chunk_bytes = chunk_bytes or CHUNK_BYTES.get(dev.type, CHUNK_BYTES["cuda"])
    if chunk_size is not None:
        chunk_bytes = min(chunk_bytes, 4 * V * chunk_size)
    plan = _Plan(targets, weights, (weights * coefs[:, None, None]).sum(0).unsqueeze(-1),
                 pairs if count else None, divergence, reduce_terms == "mean",
                 0.0 if detach == "long" else scale, 0.0 if detach == "short" else scale,
                 chunk_bytes)
    if torch.is_grad_enabled() and logits.requires_grad:
        return _FusedObjective.apply(logits, plan, coefs, alpha)
    nll, dot_sum, _ = _evaluate(logits, plan, need_grad=False)
    values = _values(nll, dot_sum, plan)
    return _loss(values, coefs, alpha), values
