"""The long-short misalignment: the paper's core (Sections 4.1-4.2).

For a text ``x`` and two suffix lengths, the misalignment is the symmetric cross-entropy between
the next-token distributions the model gives after the long and after the short context. The
efficient training form takes one sequence of ``l_train + l_extra`` tokens and runs

- window A = ``x[0 : l_train]``             (absolute positions ``[0, l_train)``)
- window B = ``x[l_extra : l_extra + l_train]`` (absolute positions
  ``[l_extra, l_extra + l_train)``)

as one batch of two. At an overlap position ``p`` in ``[l_extra, l_train)`` window A's logits at
index ``p`` and window B's at index ``p - l_extra`` both predict ``x[p + 1]``, from contexts whose
lengths differ by ``l_extra``. The overlap is empty when ``l_extra >= l_train``: the SCE term is
then exactly 0 (with a zero gradient) and ``n_overlap`` is 0.

Divergences (``divergence=``), each the sum (or mean) of two terms, A's and B's:

- ``"sce"``: ``SCE(p, q) = -sum p log q - sum q log p = H(p) + H(q) + KL(p||q) + KL(q||p)``. It
  equals ``2 H(p)``, not 0, when ``p = q``: as a loss it also lowers both entropies.
- ``"jeffreys"``: ``KL(p||q) + KL(q||p)``, zero when ``p = q``: the pure alignment part.
- ``"entropy"``: ``H(p) + H(q)``, the sharpening part alone (SCE = entropy + Jeffreys).

Options the paper leaves open, with our defaults: the two terms are summed (``reduce_terms=
"sum"``; ``"mean"`` halves them); no side is detached (``detach="none"``, or ``"long"`` /
``"short"``); the training term averages SCE over all overlap positions (``positions="all"``,
or ``"last"``, or ``"paper"``); the CE is window A's (``ce_on="a"``, or ``"both"``).

Position sets (``select_positions``). At overlap index ``i`` (absolute position
``p = l_extra + i``) window A's context is ``p + 1`` tokens and window B's ``i + 1``:

- ``"all"``: every overlap position, ``i`` in ``[0, l_train - l_extra)``;
- ``"last"``: the last one only (A's context ``l_train``, B's ``l_train - l_extra``);
- ``"paper"``: the positions where both contexts are at least ``l_train / 2`` tokens long, as
  the paper's metric draws both lengths from ``[l/2, l]``. B's context is the shorter, so this
  is ``i + 1 >= ceil(l_train / 2)``: ``i`` in ``[ceil(l/2) - 1, l_train - l_extra)``, which
  holds ``floor(l/2) + 1 - l_extra`` positions, one (A's context ``l``, B's ``l/2``) at
  ``l_extra = floor(l/2)``, none for larger ``l_extra``.

Every set is empty when the overlap is; ``"paper"`` also for ``l_extra > floor(l/2)`` (settings
3 at its top and 4). An empty set gives a zero training term with a zero gradient; the metric
redraws such an ``l_extra``.

The metric (Table 1, ``misalignment_metric``) defaults to ``positions="paper"``: averaged over
all overlap positions it is dominated by B's near-empty contexts (1, 2, ... tokens), which the
paper's definition excludes. ``misalignment_metrics`` gives several sets from one forward pass
per sample (the runs report ``"paper"`` as ``misalignment`` and ``"all"`` as
``misalignment_all``).

The fused objective (``fused_objective``, used by ``misalignment_loss`` and ``ce_loss``). Every
CE term and the divergence come from ONE pass over the logits, in chunks of positions: per row
the fp32 shifted logits ``d = x - max x``, ``e = exp d``, ``S = sum e`` (so ``p = e / S``,
``log p = d - log S``, ``nll = log S - d[y]``), then the values and, in the same pass, the
gradient of the loss with respect to the logits, written into a buffer of the logits' dtype.
The backward pass only scales that buffer by the incoming gradient. Nothing fp32 outlives its
chunk: beyond the logits and their gradient (both in the logits' dtype, as autograd would hold
them) the objective holds one chunk of ``chunk_size`` rows x vocabulary in fp32 (plus a
quarter chunk of scratch for pairs of bf16/fp16 logits), whatever the sequence length. A pair
(A's row at one position, B's at the same absolute position) shares its chunk, so each
position's log-softmax is computed once for both its CE and the divergence.

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

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch
from torch.autograd.function import once_differentiable

Divergence = Literal["sce", "jeffreys", "entropy"]
DIVERGENCES = ("sce", "jeffreys", "entropy")
Positions = Literal["all", "last", "paper"]
POSITIONS = ("all", "last", "paper")

#: rows (positions) per fp32 chunk of the objective; with a 32000 vocabulary one chunk is 64 MB
DEFAULT_CHUNK = 512

L_EXTRA_SETTINGS = {
    1: "U{1..l/2} (default)",
    2: "U{1..l/4}",
    3: "U{l/4..l/2}",
    4: "U{1..l}",
}


# ---------------------------------------------------------------------------------------------
# the divergence


def _check(divergence: str, reduce_terms: str, detach: str) -> None:
    if divergence not in DIVERGENCES:
        raise ValueError(f"divergence = {divergence!r}: must be one of "
                         f"{', '.join(map(repr, DIVERGENCES))}")
    if reduce_terms not in ("sum", "mean"):
        raise ValueError(f"reduce_terms = {reduce_terms!r}: must be 'sum' or 'mean'")
    if detach not in ("none", "long", "short"):
        raise ValueError(f"detach = {detach!r}: must be 'none', 'long' or 'short'")


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
                            divergence: Divergence = "sce",
                            reduce_terms: Literal["sum", "mean"] = "sum",
                            chunk_size: int | None = DEFAULT_CHUNK) -> torch.Tensor:
    """Per-position divergence between two ``(..., V)`` logit tensors; returns ``(...)`` in fp32.

    Values only, no gradient (training goes through ``fused_objective``). ``logits_a`` is the
    long-context side, ``logits_b`` the short one. Computed in fp32 from logits shifted by
    their maximum, so bf16/fp16 logits and extreme values (``+-1e4``) stay finite.
    """
    if logits_a.shape != logits_b.shape:
        raise ValueError(f"logits shapes differ: {tuple(logits_a.shape)} vs "
                         f"{tuple(logits_b.shape)}")
    _check(divergence, reduce_terms, "none")
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
# windows


def sample_l_extra(l_train: int, setting: int = 1,
                   generator: torch.Generator | None = None) -> int:
    """Draw ``l_extra`` for one step: setting 1 = U{1..l/2} (default), 2 = U{1..l/4},
    3 = U{l/4..l/2}, 4 = U{1..l} (bounds inclusive, ``l/k`` rounded down, at least 1)."""
    if l_train < 2:
        raise ValueError(f"l_train = {l_train}: must be >= 2")
    bounds = {1: (1, l_train // 2), 2: (1, l_train // 4), 3: (l_train // 4, l_train // 2),
              4: (1, l_train)}
    if setting not in bounds:
        raise ValueError(f"l_extra setting = {setting!r}: must be one of 1, 2, 3, 4 "
                         f"({'; '.join(f'{k}: {v}' for k, v in L_EXTRA_SETTINGS.items())})")
    low, high = bounds[setting]
    low, high = max(1, low), max(1, high)
    return int(torch.randint(low, high + 1, (1,), generator=generator).item())


@dataclass(frozen=True)
class Windows:
    """Windows A and B of one ``(..., l_train + l_extra)`` token tensor, and their overlap."""

    a: torch.Tensor  # (..., l_train), absolute positions [0, l_train)
    b: torch.Tensor  # (..., l_train), absolute positions [l_extra, l_extra + l_train)
    l_train: int
    l_extra: int

    @property
    def n_overlap(self) -> int:
        return max(0, self.l_train - self.l_extra)

    @property
    def overlap_a(self) -> slice:
        """Indices into window A's logits: absolute positions ``[l_extra, l_train)``."""
        return slice(min(self.l_extra, self.l_train), self.l_train)

    @property
    def overlap_b(self) -> slice:
        """Indices into window B's logits for the same absolute positions."""
        return slice(0, self.n_overlap)


def select_positions(l_train: int, l_extra: int, positions: str) -> tuple[slice, slice]:
    """``(indices into window A's logits, indices into window B's logits)`` of the overlap
    positions in the set ``positions`` (``"all"``, ``"last"``, ``"paper"``; see the module
    docstring); both empty when the set is."""
    if positions not in POSITIONS:
        raise ValueError(f"positions = {positions!r}: must be one of "
                         f"{', '.join(map(repr, POSITIONS))}")
    n = max(0, l_train - l_extra)
    first = {"all": 0, "last": n - 1, "paper": math.ceil(l_train / 2) - 1}[positions]
    first = min(max(first, 0), n)
    return slice(min(l_extra, l_train) + first, min(l_extra, l_train) + n), slice(first, n)


def overlap_windows(tokens: torch.Tensor, l_train: int, l_extra: int) -> Windows:
    """Cut windows A and B from ``tokens`` of length ``l_train + l_extra`` (last dimension)."""
    if l_extra < 1:
        raise ValueError(f"l_extra = {l_extra}: must be >= 1")
    if tokens.shape[-1] != l_train + l_extra:
        raise ValueError(f"tokens have length {tokens.shape[-1]}, expected l_train + l_extra = "
                         f"{l_train} + {l_extra} = {l_train + l_extra}")
    return Windows(tokens[..., :l_train], tokens[..., l_extra:l_extra + l_train], l_train,
                   l_extra)


# ---------------------------------------------------------------------------------------------
# the fused objective


@dataclass(frozen=True)
class Pairs:
    """Positions compared by the divergence: row ``rows_a[i]`` of the logits at positions
    ``[start_a, start_a + length)`` against row ``rows_b[i]`` at ``[start_b, start_b +
    length)``, position by position (A's side is the long context)."""

    rows_a: tuple[int, ...]
    rows_b: tuple[int, ...]
    start_a: int
    start_b: int
    length: int

    @property
    def count(self) -> int:
        return len(self.rows_a) * self.length


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
                    divergence: Divergence = "sce", reduce_terms: Literal["sum", "mean"] = "sum",
                    detach: Literal["none", "long", "short"] = "none",
                    chunk_size: int | None = DEFAULT_CHUNK) -> tuple[torch.Tensor, torch.Tensor]:
    """``(loss, values)`` of CE terms and a divergence over ``(B, T, V)`` logits, in one pass.

    ``nll[b, t]`` is the CE of predicting ``tokens[b, t + 1]`` from ``logits[b, t]``. Term
    ``k`` is ``sum(ce_weights[k] * nll)`` (``ce_weights[k]`` of shape ``(B, T - 1)``: a token
    mean is weights ``1 / count``); the divergence is averaged over the positions of ``pairs``
    (0 when there are none). ``loss = sum_k ce_coefs[k] * term_k + alpha * divergence``;
    ``values`` (fp32, no gradient) holds the K terms and the divergence. The gradient with
    respect to ``logits`` is computed in the forward pass (closed forms in the module
    docstring) and only scaled in the backward pass, which therefore runs once. Options as in
    ``misalignment_loss``; ``chunk_size`` rows of fp32 at a time (None: all).
    """
    _check(divergence, reduce_terms, detach)
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


def _mean_weights(mask: torch.Tensor) -> torch.Tensor:
    """``mask`` as weights of a mean over its True entries (all zero when there are none)."""
    return mask.float() / mask.sum().clamp(min=1)


def ce_loss(logits: torch.Tensor, tokens: torch.Tensor, *,
            answer_mask: torch.Tensor | None = None, answer_weight: float = 0.0,
            chunk_size: int | None = DEFAULT_CHUNK
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """``(loss, ce, answer_ce)`` of one batch of windows: the token-mean next-token CE of
    ``(B, T, V)`` logits on ``(B, T)`` tokens (as ``model(tokens, labels=tokens).loss``), plus
    ``answer_weight`` times the mean CE of the tokens marked in ``answer_mask`` (``(B, T)``,
    True at answer tokens; zero when none is marked): ``loss = ce + answer_weight *
    answer_ce``; ``ce`` and ``answer_ce`` carry no gradient. Fused and chunked
    (``fused_objective``)."""
    weights = [_mean_weights(torch.ones_like(tokens[:, 1:], dtype=torch.bool))]
    if answer_mask is not None:
        weights.append(_mean_weights(answer_mask[:, 1:]))
    coefs = [1.0, answer_weight][:len(weights)]
    loss, values = fused_objective(logits, tokens, weights, coefs, chunk_size=chunk_size)
    return loss, values[0], values[1] if answer_mask is not None else None


# ---------------------------------------------------------------------------------------------
# the regularized objective


@dataclass
class MisalignOutput:
    """Parts of the regularized objective for one batch; only ``loss`` carries a gradient."""

    loss: torch.Tensor        # ce + alpha * misalign
    ce: torch.Tensor          # the CE term used in the loss (window A, B or both; + answers)
    ce_a: torch.Tensor        # token-mean CE of window A
    ce_b: torch.Tensor        # token-mean CE of window B
    misalign: torch.Tensor    # divergence averaged over the position set (0 when empty)
    n_overlap: int
    l_extra: int
    answer_ce: torch.Tensor | None = None  # CE of the answer tokens (window B), when given


def misalignment_loss(model, tokens: torch.Tensor, l_train: int, l_extra: int, *,
                      alpha: float = 0.1, divergence: Divergence = "sce",
                      reduce_terms: Literal["sum", "mean"] = "sum",
                      detach: Literal["none", "long", "short"] = "none",
                      positions: Positions = "all",
                      ce_on: Literal["a", "b", "both"] = "a",
                      chunk_size: int | None = DEFAULT_CHUNK,
                      measure_misalign: bool = True,
                      answer_mask: torch.Tensor | None = None,
                      answer_weight: float = 0.0) -> MisalignOutput:
    """``CE + alpha * L_misalign`` for ``tokens`` of shape ``(N, l_train + l_extra)``, from ONE
    forward pass of the batch ``[A; B]`` (shape ``(2N, l_train)``).

    Both windows start at position id 0 (each is its own sequence, as at inference). With
    ``alpha = 0`` the divergence is still measured (without gradient) for the training curves,
    unless ``measure_misalign=False`` (then it is NaN). ``answer_mask`` (same shape as
    ``tokens``, True at answer tokens, which lie in window B) adds ``answer_weight`` times the
    answers' CE to the CE term (BABILong fine-tuning). The CE terms and the divergence come
    from one fused pass over the logits (``fused_objective``); only ``loss`` carries a
    gradient, and its backward pass runs once.
    """
    if alpha < 0:
        raise ValueError(f"alpha = {alpha}: must be >= 0")
    if ce_on not in ("a", "b", "both"):
        raise ValueError(f"ce_on = {ce_on!r}: must be 'a', 'b' or 'both'")
    w = overlap_windows(tokens, l_train, l_extra)
    sel_a, sel_b = select_positions(l_train, l_extra, positions)
    n = tokens.shape[0]
    both = torch.cat([w.a, w.b], dim=0)
    logits = model(input_ids=both).logits
    rows_a = torch.zeros_like(both[:, 1:], dtype=torch.bool)
    rows_a[:n] = True
    weights = [_mean_weights(rows_a), _mean_weights(~rows_a)]
    coefs = {"a": [1.0, 0.0], "b": [0.0, 1.0], "both": [0.5, 0.5]}[ce_on]
    if answer_mask is not None:
        answers = torch.zeros_like(rows_a)
        answers[n:] = answer_mask[:, l_extra:l_extra + l_train][:, 1:]
        weights.append(_mean_weights(answers))
        coefs.append(answer_weight)
    measured = bool(alpha) or measure_misalign
    pairs = Pairs(tuple(range(n)), tuple(range(n, 2 * n)), sel_a.start, sel_b.start,
                  sel_b.stop - sel_b.start) if measured else None
    loss, values = fused_objective(logits, both, weights, coefs, pairs, alpha=alpha,
                                   divergence=divergence, reduce_terms=reduce_terms,
                                   detach=detach, chunk_size=chunk_size)
    ce = (values[:-1] * torch.tensor(coefs, device=values.device)).sum()
    misalign = values[-1] if measured else torch.tensor(float("nan"))
    return MisalignOutput(loss, ce, values[0], values[1], misalign, w.n_overlap, l_extra,
                          values[2] if answer_mask is not None else None)


# ---------------------------------------------------------------------------------------------
# the metric (Table 1)


@dataclass
class MetricResult:
    mean: float
    stderr: float
    n: int
    values: list[float]


def _overlap_batches(model, stream, l_train: int, n_samples: int, positions: tuple[str, ...],
                     setting: int, seed: int, batch_size: int, device):
    """The metric's samples: ``(l_extra, logits of A's overlap, logits of B's overlap, the
    sets' slices into the overlap)`` per batch, from ``(seed)`` alone. A draw of ``l_extra``
    that leaves a requested set empty is redrawn."""
    gen = torch.Generator().manual_seed(seed)
    done = 0
    while done < n_samples:
        l_extra = sample_l_extra(l_train, setting, gen)
        sets = {name: select_positions(l_train, l_extra, name)[1] for name in positions}
        if any(sl.start == sl.stop for sl in sets.values()):
            continue  # nothing to compare (e.g. setting 4 at l_extra = l)
        count = min(batch_size, n_samples - done)
        tokens = stream.sample(count, l_train + l_extra, gen).to(device)
        w = overlap_windows(tokens, l_train, l_extra)
        logits = model(input_ids=torch.cat([w.a, w.b], dim=0)).logits
        yield l_extra, logits[:count, w.overlap_a], logits[count:, w.overlap_b], sets
        done += count


@torch.no_grad()
def misalignment_metrics(model, stream, l_train: int, n_samples: int = 64, *,
                         positions: tuple[str, ...] = ("paper", "all"), setting: int = 1,
                         divergence: Divergence = "sce", seed: int = 0, batch_size: int = 8,
                         chunk_size: int | None = DEFAULT_CHUNK,
                         device: str | torch.device | None = None) -> dict[str, MetricResult]:
    """``E_{x, l_extra}`` of the divergence over each set of overlap positions in ``positions``
    (no gradient): the long-short misalignment of a trained model, one ``MetricResult`` (mean
    over samples, its standard error) per set. One forward pass of windows A and B per sample
    and one divergence over its whole overlap serve every set. ``stream`` is a
    ``TokenStream`` (anything with ``sample(n, length, generator)``).

    A draw of ``l_extra`` that leaves any requested set empty is redrawn, so that every set
    averages the same samples (with ``"paper"`` and settings 3-4, the ``"all"`` value is then
    over ``l_extra <= l/2`` only; setting 1, the runs' default, never redraws).
    """
    if not positions:
        raise ValueError("positions: name at least one set")
    model_was_training = model.training
    model.eval()
    device = device or next(model.parameters()).device
    values: dict[str, list[float]] = {name: [] for name in positions}
    for _, la, lb, sets in _overlap_batches(model, stream, l_train, n_samples, positions,
                                            setting, seed, batch_size, device):
        div = symmetric_cross_entropy(la, lb, divergence=divergence, chunk_size=chunk_size)
        for name, sl in sets.items():
            values[name].extend(div[:, sl].mean(dim=-1).tolist())
    model.train(model_was_training)
    return {name: _summary(v) for name, v in values.items()}


#: what ``alignment_measures`` reports per pair of next-token distributions p (long context)
#: and q (short): SCE = H(p) + H(q) + KL(p||q) + KL(q||p) = entropy + jeffreys
MEASURES = ("sce", "jeffreys", "entropy", "l2", "tv", "top1_change")


def pair_measures(logits_a: torch.Tensor, logits_b: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per position of two ``(..., V)`` logit tensors: ``sce``, ``jeffreys`` (KL(p||q) +
    KL(q||p)), ``entropy`` (H(p) + H(q)), ``l2`` (``||p - q||_2``, the distance of the paper's
    theory), ``tv`` (``||p - q||_1 / 2``: the probability mass that moves) and
    ``top1_change`` (1 where the most likely tokens differ), in fp32."""
    lp, lq = logits_a.float().log_softmax(-1), logits_b.float().log_softmax(-1)
    p, q = lp.exp(), lq.exp()
    h_p, h_q = -(p * lp).sum(-1), -(q * lq).sum(-1)
    x_pq, x_qp = -(p * lq).sum(-1), -(q * lp).sum(-1)
    return {"sce": x_pq + x_qp, "jeffreys": (x_pq - h_p) + (x_qp - h_q), "entropy": h_p + h_q,
            "l2": (p - q).norm(dim=-1), "tv": (p - q).abs().sum(-1) / 2,
            "top1_change": (logits_a.argmax(-1) != logits_b.argmax(-1)).float()}


@dataclass
class AlignmentResult:
    """The metric's samples measured every way (``alignment_measures``)."""

    paper: dict[str, MetricResult]   # each of MEASURES over the paper's positions
    all: MetricResult                # SCE over every overlap position (misalignment_all)
    by_sample: list[dict[str, float]]  # l_extra, and each measure at the last position


@torch.no_grad()
def alignment_measures(model, stream, l_train: int, n_samples: int = 64, *, seed: int = 0,
                       setting: int = 1, batch_size: int = 8,
                       chunk_size: int | None = DEFAULT_CHUNK,
                       device: str | torch.device | None = None) -> AlignmentResult:
    """The misalignment metric and its parts from one forward pass per sample (the samples of
    ``misalignment_metrics`` with the same ``seed``, so ``paper["sce"]`` is the paper's
    ``L_misalign`` and ``all`` is ``misalignment_all``): every measure of ``pair_measures``
    averaged over the paper's positions (both contexts >= l_train / 2), and per sample the
    measures at the last position, where A's context is ``l_train`` tokens and B's
    ``l_train - l_extra`` (the theorem's question: how often the top-1 token changes when the
    context is cut by ``l_extra``)."""
    model_was_training = model.training
    model.eval()
    device = device or next(model.parameters()).device
    paper: dict[str, list[float]] = {m: [] for m in MEASURES}
    every: list[float] = []
    by_sample: list[dict[str, float]] = []
    for l_extra, la, lb, sets in _overlap_batches(model, stream, l_train, n_samples,
                                                  ("paper", "all"), setting, seed, batch_size,
                                                  device):
        n = la.shape[1]
        step = max(1, n if not chunk_size else min(n, max(1, chunk_size // la.shape[0])))
        parts = [pair_measures(la[:, i:i + step], lb[:, i:i + step]) for i in range(0, n, step)]
        values = {m: torch.cat([part[m] for part in parts], dim=1) for m in MEASURES}
        for m in MEASURES:
            paper[m].extend(values[m][:, sets["paper"]].mean(dim=-1).tolist())
        every.extend(values["sce"][:, sets["all"]].mean(dim=-1).tolist())
        for row in range(la.shape[0]):
            by_sample.append({"l_extra": l_extra,
                              **{m: float(values[m][row, -1]) for m in MEASURES}})
    model.train(model_was_training)
    return AlignmentResult({m: _summary(v) for m, v in paper.items()}, _summary(every),
                           by_sample)


def _summary(values: list[float]) -> MetricResult:
    mean = sum(values) / len(values)
    var = sum((v - mean) ** 2 for v in values) / max(1, len(values) - 1)
    return MetricResult(mean, math.sqrt(var / len(values)), len(values), values)


def misalignment_metric(model, stream, l_train: int, n_samples: int = 64, *,
                        positions: Positions = "paper", **kwargs) -> MetricResult:
    """The misalignment metric over one set of positions (default the paper's: both contexts
    at least ``l_train / 2`` tokens); ``kwargs`` as ``misalignment_metrics``."""
    return misalignment_metrics(model, stream, l_train, n_samples, positions=(positions,),
                                **kwargs)[positions]
