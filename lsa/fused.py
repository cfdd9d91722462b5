"""The fused, chunked objective: what lsa/misalign.py defines, computed faster and in less memory.

It computes exactly what lsa/misalign.py defines: ``fused_objective`` is ``misalign.objective``
(CE terms plus ``alpha`` times the divergence, SCE by default, averaged over pairs of
positions), and ``symmetric_cross_entropy`` is ``misalign.pair_divergence`` (values only).
The function of the logits is the same, with the same options. Only the order of the
floating-point operations differs, so results agree to rounding. The difference is cost: the
autograd form stores fp32 log-probabilities for every position and runs a second pass for the
backward. The training losses and the metric (lsa/alignment.py) call this module;
tests/test_misalign.py checks values and gradients against the readable definition.

The definition stands below this kernel: the check of the options (``check_options``), the
compared positions (``Pairs``) and ``DEFAULT_CHUNK`` come from lsa/misalign.py, which imports
nothing from lsa but the options' names (lsa/options.py, torch-free: ``DivergenceName``,
``ReduceTerms``, ``Detach``), which this kernel imports from there too.

How it works. Every CE term and the divergence come from ONE pass over the logits, in chunks of
positions: per row the fp32 shifted logits ``d = x - max x``, ``e = exp d``, ``S = sum e`` (so
``p = e / S``, ``log p = d - log S``, ``nll = log S - d[y]``), then the values and, in the same
pass, the gradient of the loss with respect to the logits, written into a buffer of the logits'
dtype. The backward pass only scales that buffer by the incoming gradient. Nothing fp32
outlives its chunk: beyond the logits and their gradient (both in the logits' dtype, as
autograd would hold them) the objective holds one chunk of ``chunk_size`` rows x vocabulary in
fp32 (plus a quarter chunk of scratch for pairs of bf16/fp16 logits), whatever the sequence
length. A pair (A's row at one position, B's at the same absolute position) shares its chunk,
so each position's log-softmax is computed once for both its CE and the divergence.

Gradients with respect to the logits (``p = softmax(a)``, ``q = softmax(b)``, ``X(p, q) =
-sum p log q``, ``H(p) = -sum p log p``, ``KL(p||q) = X(p, q) - H(p)``), from
``d p_v / d a_j = p_v (delta_vj - p_j)`` and ``d log p_v / d a_j = delta_vj - p_j``:

- CE of target ``y``: ``d(-log p_y) / da = p - onehot(y)``;
- ``X(p, q)``: ``d/da = -p * (log q + X(p, q))``, ``d/db = q - p``; so for SCE
  ``dSCE/da = p * (1 - X(p, q) - log q) - q`` (and ``dSCE/db`` with ``a, p <-> b, q``);
- ``H(p)``: ``d/da = -p * (log p + H(p))``;
- ``KL(p||q)``: ``d/da = p * (log p - log q - KL(p||q))``, ``d/db = q - p``; so for Jeffreys
  ``dJ/da = p * (1 + log p - log q - KL(p||q)) - q``;
- entropy term: ``d(H(p) + H(q))/da = -p * (log p + H(p))``.

Each has the form ``p * (K + s (u d_a + v d_b)) + w q`` (``d`` the shifted logits; ``K``,
``w`` per-row scalars; ``u, v`` in {-1, 0, 1}), evaluated with ``log p = d_a - log S_a``
folded into ``K`` (``_pair_grad``). A detached side (``detach``) gets none of the
divergence's gradient (its CE gradient stays); ``reduce_terms="mean"`` halves both terms and
their gradients; an empty set of pairs adds a zero term and no gradient.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch.autograd.function import once_differentiable

from lsa.misalign import DEFAULT_CHUNK, Pairs, check_options
from lsa.options import Detach, DivergenceName, ReduceTerms

# ---------------------------------------------------------------------------------------------
# the divergence, values only


@dataclass
class _Side:
    """One side of a chunk of pairs, per row: ``d = x - max x`` and ``e = exp d`` (fp32 chunk
    buffers), ``total = sum e`` (so ``p = e / total`` and ``log p = d - log_total``), and the
    dot products its term and gradient need: ``cross = sum p log q`` (``q`` the other side's
    distribution) and ``own = sum p log p = -H(p)``."""

    d: torch.Tensor
    e: torch.Tensor
    total: torch.Tensor
    log_total: torch.Tensor
    cross: torch.Tensor | None = None
    own: torch.Tensor | None = None

    def term(self, divergence: str) -> torch.Tensor:
        """This side's term: ``X(p, q) = -cross`` (SCE), ``KL(p||q) = own - cross``
        (Jeffreys) or ``H(p) = -own`` (entropy)."""
        if divergence == "sce":
            return -self.cross
        if divergence == "jeffreys":
            return self.own - self.cross
        return -self.own


def _side(x: torch.Tensor, d: torch.Tensor, e: torch.Tensor) -> _Side:
    """Fill the fp32 buffers ``d``, ``e`` from logits rows ``x`` (any dtype)."""
    torch.sub(x, x.amax(-1, keepdim=True).float(), out=d)
    torch.exp(d, out=e)
    total = e.sum(-1, keepdim=True)
    return _Side(d, e, total, total.log())


def _pair(divergence: str, x_a, x_b, d_a, e_a, d_b, e_b, scratch_a, scratch_b
          ) -> tuple[_Side, _Side]:
    """Both sides of a chunk of pairs with the dot products ``divergence`` needs, each side's
    through its fp32 scratch buffer (faster than vecdot on CPU; may be where its gradient
    goes next)."""
    a, b = _side(x_a, d_a, e_a), _side(x_b, d_b, e_b)
    for me, other, scratch in ((a, b, scratch_a), (b, a, scratch_b)):
        if divergence in ("sce", "jeffreys"):
            dot = torch.mul(me.e, other.d, out=scratch).sum(-1, keepdim=True)
            me.cross = dot / me.total - other.log_total
        if divergence in ("jeffreys", "entropy"):
            dot = torch.mul(me.e, me.d, out=scratch).sum(-1, keepdim=True)
            me.own = dot / me.total - me.log_total
    return a, b


def symmetric_cross_entropy(logits_a: torch.Tensor, logits_b: torch.Tensor, *,
                            divergence: DivergenceName = "sce",
                            reduce_terms: ReduceTerms = "sum",
                            chunk_size: int | None = DEFAULT_CHUNK) -> torch.Tensor:
    """Per-position divergence between two ``(..., V)`` logit tensors; returns ``(...)`` in fp32.

    Values only, no gradient (training goes through ``fused_objective``). ``logits_a`` is the
    long-context side, ``logits_b`` the short one. Computed in fp32 from logits shifted by
    their maximum, so bf16/fp16 logits and extreme values (``+-1e4``) stay finite.
    """
    if logits_a.shape != logits_b.shape:
        raise ValueError(f"logits shapes differ: {tuple(logits_a.shape)} vs "
                         f"{tuple(logits_b.shape)}")
    check_options(divergence, reduce_terms, "none")
    lead, vocab = logits_a.shape[:-1], logits_a.shape[-1]
    a, b = logits_a.detach().reshape(-1, vocab), logits_b.detach().reshape(-1, vocab)
    n = a.shape[0]
    step = max(1, n if not chunk_size or chunk_size >= n else chunk_size)
    buf = a.new_empty((5, min(step, n), vocab), dtype=torch.float32)
    out = a.new_empty(n, dtype=torch.float32)
    for start in range(0, n, step):
        ca, cb = a[start:start + step], b[start:start + step]
        k = ca.shape[0]
        side_a, side_b = _pair(divergence, ca, cb, *(t[:k] for t in buf), buf[4, :k])
        terms = side_a.term(divergence) + side_b.term(divergence)
        out[start:start + k] = (terms if reduce_terms == "sum" else terms / 2).squeeze(-1)
    return out.reshape(lead)


# ---------------------------------------------------------------------------------------------
# the objective: CE terms and the divergence, with the gradient from the same pass


@dataclass
class _Plan:
    targets: torch.Tensor     # (B, T, 1) next token of each position (last column: unused)
    weights: torch.Tensor     # (K, B, T) weight of each position's nll in each CE term
    row_coef: torch.Tensor    # (B, T, 1) the CE part of d loss / d nll
    pairs: Pairs | None
    divergence: str
    half: bool                # reduce_terms == "mean"
    scale_a: float            # d loss / d (A's divergence term) per pair position (0: detached)
    scale_b: float
    chunk: int


def _pair_grad(out: torch.Tensor, me: _Side, other: _Side, s: float, c: torch.Tensor,
               y: torch.Tensor, divergence: str) -> None:
    """``out`` = d loss / d logits of side ``me`` of a chunk of pairs: CE coefficients ``c``
    (``(n, 1)``, targets ``y``) and divergence coefficient ``s`` (0: detached or not
    optimised); ``p`` is ``me``'s distribution, ``q`` the other's (module docstring)."""
    inv = 1 / me.total
    if not s:
        torch.mul(me.e, c * inv, out=out)                               # c p
    elif divergence == "sce":                                           # + s (p (1 + sum p log q
        k = c + s * (1 + me.cross + other.log_total)                    #      - log q) - q)
        torch.mul(other.d, -s * inv, out=out).add_(k * inv)
        out.mul_(me.e).addcmul_(other.e, -s / other.total)
    elif divergence == "jeffreys":                                      # + s (p (1 + log p/q
        k = c + s * (1 - (me.own - me.cross) - me.log_total + other.log_total)  # - KL) - q)
        torch.sub(me.d, other.d, out=out).mul_(s * inv).add_(k * inv)
        out.mul_(me.e).addcmul_(other.e, -s / other.total)
    else:                                                               # - s p (log p + H(p))
        torch.mul(me.d, -s * inv, out=out).add_((c + s * (me.log_total + me.own)) * inv)
        out.mul_(me.e)
    out.scatter_add_(-1, y, -c)                                         # - c onehot(y)


def _evaluate(logits: torch.Tensor, plan: _Plan, need_grad: bool
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """One pass over ``logits`` ``(B, T, V)``: per-position nll ``(B, T)`` and the divergence's
    sum over the pairs (fp32), and d loss / d logits (in the logits' dtype; fp32 for fp16) when
    asked."""
    B, T, V = logits.shape
    x = logits.detach()
    # the gradient is kept in the logits' dtype, except fp16: unscaled (the loss scale comes in
    # backward) its small entries would underflow, so fp16 logits keep an fp32 gradient
    grad_dtype = torch.float32 if x.dtype == torch.float16 else x.dtype
    grad = torch.empty(x.shape, dtype=grad_dtype, device=x.device) if need_grad else None
    direct = need_grad and grad_dtype == torch.float32  # write gradients straight into ``grad``
    nll = x.new_zeros((B, T), dtype=torch.float32)
    div_sum = x.new_zeros((), dtype=torch.float32)
    pairs = plan.pairs if plan.pairs is not None and plan.pairs.count else None
    chunk = plan.chunk
    h = max(1, chunk // 4)  # pairs per chunk: d and e of both sides fill one chunk of rows
    buf = x.new_empty((max(chunk, 4 * h), V), dtype=torch.float32)
    # fp32 gradients go straight into ``grad``, which also serves as the pairs' scratch
    scratch = x.new_empty((h, V), dtype=torch.float32) if pairs and not direct else None
    # which positions need their nll, and which a gradient (one host sync per call)
    valued = (plan.weights != 0).any(0).cpu()
    graded = (plan.row_coef.squeeze(-1) != 0).cpu() if need_grad else torch.zeros_like(valued)
    paired: dict[int, tuple[int, int]] = {}
    if pairs:
        paired = {**{r: (pairs.start_a, pairs.length) for r in pairs.rows_a},
                  **{r: (pairs.start_b, pairs.length) for r in pairs.rows_b}}
        for ra, rb in zip(pairs.rows_a, pairs.rows_b):
            for i in range(0, pairs.length, h):
                k = min(h, pairs.length - i)
                ia = slice(pairs.start_a + i, pairs.start_a + i + k)
                ib = slice(pairs.start_b + i, pairs.start_b + i + k)
                scratch_a, scratch_b = ((grad[ra, ia], grad[rb, ib]) if direct
                                        else (scratch[:k], scratch[:k]))
                side_a, side_b = _pair(plan.divergence, x[ra, ia], x[rb, ib],
                                       *(buf[j * h:j * h + k] for j in range(4)), scratch_a,
                                       scratch_b)
                div_sum += (side_a.term(plan.divergence) + side_b.term(plan.divergence)).sum()
                for me, other, row, idx, s in ((side_a, side_b, ra, ia, plan.scale_a),
                                               (side_b, side_a, rb, ib, plan.scale_b)):
                    y = plan.targets[row, idx]
                    nll[row, idx] = (me.log_total - me.d.gather(-1, y)).squeeze(-1)
                    if need_grad:
                        out = grad[row, idx] if direct else scratch[:k]
                        _pair_grad(out, me, other, s, plan.row_coef[row, idx], y,
                                   plan.divergence)
                        if not direct:
                            grad[row, idx] = out
    for row in range(B):  # every position outside the pairs: CE only
        start, length = paired.get(row, (T, 0))
        for lo, hi in ((0, start), (start + length, T)):
            if hi <= lo:
                continue
            with_grad = bool(graded[row, lo:hi].any())
            if need_grad and not with_grad:
                grad[row, lo:hi].zero_()
            if not with_grad and not valued[row, lo:hi].any():
                continue
            for i in range(lo, hi, chunk):
                idx = slice(i, min(i + chunk, hi))
                e = buf[:idx.stop - i]
                y = plan.targets[row, idx]
                torch.sub(x[row, idx], x[row, idx].amax(-1, keepdim=True).float(), out=e)
                shifted_y = e.gather(-1, y)
                e.exp_()
                total = e.sum(-1, keepdim=True)
                nll[row, idx] = (total.log() - shifted_y).squeeze(-1)
                if with_grad:
                    c = plan.row_coef[row, idx]
                    out = grad[row, idx] if direct else e
                    torch.mul(e, c / total, out=out).scatter_add_(-1, y, -c)
                    if not direct:
                        grad[row, idx] = out
    return nll, div_sum, grad


class _FusedObjective(torch.autograd.Function):
    """The loss from ``_evaluate``; its gradient is computed in the forward pass and kept (in
    the logits' dtype, in place of the logits autograd would otherwise keep)."""

    @staticmethod
    def forward(ctx, logits, plan: _Plan, coefs: torch.Tensor, div_coef: float):
        with torch.autocast(logits.device.type, enabled=False):
            nll, div_sum, grad = _evaluate(logits, plan, need_grad=True)
        values = _values(nll, div_sum, plan)
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
        if grad_loss.item() != 1.0:
            grad.mul_(grad_loss.to(grad.dtype))
        return grad, None, None, None


def _values(nll: torch.Tensor, div_sum: torch.Tensor, plan: _Plan) -> torch.Tensor:
    ce = (plan.weights * nll).sum((1, 2))
    count = plan.pairs.count if plan.pairs is not None else 0
    div = div_sum / count * (0.5 if plan.half else 1.0) if count else div_sum
    return torch.cat([ce, div.reshape(1)])


def _loss(values: torch.Tensor, coefs: torch.Tensor, div_coef: float) -> torch.Tensor:
    return (values[:-1] * coefs).sum() + div_coef * values[-1]


def fused_objective(logits: torch.Tensor, tokens: torch.Tensor,
                    ce_weights: Sequence[torch.Tensor], ce_coefs: Sequence[float],
                    pairs: Pairs | None = None, *, alpha: float = 0.0,
                    divergence: DivergenceName = "sce", reduce_terms: ReduceTerms = "sum",
                    detach: Detach = "none",
                    chunk_size: int | None = DEFAULT_CHUNK) -> tuple[torch.Tensor, torch.Tensor]:
    """``(loss, values)`` of CE terms and a divergence over ``(B, T, V)`` logits, in one pass.

    ``nll[b, t]`` is the CE of predicting ``tokens[b, t + 1]`` from ``logits[b, t]``. Term
    ``k`` is ``sum(ce_weights[k] * nll)`` (``ce_weights[k]`` of shape ``(B, T - 1)``: a token
    mean is weights ``1 / count``); the divergence is averaged over the positions of ``pairs``
    (0 when there are none). ``loss = sum_k ce_coefs[k] * term_k + alpha * divergence``;
    ``values`` (fp32, no gradient) holds the K terms and the divergence. The gradient with
    respect to ``logits`` is computed in the forward pass (closed forms in the module
    docstring) and only scaled in the backward pass, which therefore runs once. Arguments and
    options as in ``lsa.misalign.objective``, the definition this computes; ``chunk_size`` rows
    of fp32 at a time (None: all).
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
    plan = _Plan(targets, weights, (weights * coefs[:, None, None]).sum(0).unsqueeze(-1), pairs,
                 divergence, reduce_terms == "mean", 0.0 if detach == "long" else scale,
                 0.0 if detach == "short" else scale, max(1, chunk_size or B * T))
    if torch.is_grad_enabled() and logits.requires_grad:
        return _FusedObjective.apply(logits, plan, coefs, alpha)
    nll, div_sum, _ = _evaluate(logits, plan, need_grad=False)
    values = _values(nll, div_sum, plan)
    return _loss(values, coefs, alpha), values
