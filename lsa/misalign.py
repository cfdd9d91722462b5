"""The long-short misalignment, the core of the paper (Sections 4.1-4.2), in plain autograd.

The formula. For a text ``x``, let ``p`` be the model's next-token distribution after a long
context and ``q`` its distribution after a shorter suffix of that context. The long-short
misalignment is their symmetric cross-entropy::

    SCE(p, q) = H(p, q) + H(q, p) = -sum_v p_v log q_v - sum_v q_v log p_v

and fine-tuning minimises ``CE + alpha * SCE``, with SCE averaged over the positions where both
contexts predict the same token. This module is the definition: ``divergence_terms`` and
``pair_divergence`` are the formula per position, ``next_token_nll`` the CE, and ``objective``
the regularized loss, all written with ``log_softmax`` and autograd; the windows
(``overlap_windows``, ``select_positions``, ``sample_l_extra``) are here too; the options'
names come from lsa/options.py (torch-free, shared with the configuration), the only lsa
module this one imports. lsa/fused.py computes the same function in a
chunked pass with a closed-form gradient, faster and in less memory, and lsa/alignment.py
uses it: the training losses (``misalignment_loss``, ``ce_loss``: the windows and weights of a
step) and the metric of a trained model (``fused=False`` there selects the autograd form of
this module). tests/unit/test_misalign.py checks that the two agree.

Windows. The efficient training form takes one sequence of ``l_train + l_extra`` tokens and
runs

- window A = ``x[0 : l_train]``             (absolute positions ``[0, l_train)``)
- window B = ``x[l_extra : l_extra + l_train]`` (absolute positions
  ``[l_extra, l_extra + l_train)``)

as one batch of two. At an overlap position ``p`` in ``[l_extra, l_train)`` window A's logits at
index ``p`` and window B's at index ``p - l_extra`` both predict ``x[p + 1]``, from contexts whose
lengths differ by ``l_extra`` (A's is the long one: ``p`` is A's, ``q`` is B's). The overlap is
empty when ``l_extra >= l_train``. The SCE term is then exactly 0 (with a zero gradient) and
``n_overlap`` is 0. ``l_extra`` is drawn per step (``sample_l_extra``).

Divergences (``divergence=``), each the sum (or mean) of two terms, A's and B's:

- ``"sce"``: ``SCE(p, q) = -sum p log q - sum q log p = H(p) + H(q) + KL(p||q) + KL(q||p)``. It
  equals ``2 H(p)``, not 0, when ``p = q``: as a loss it also lowers both entropies.
- ``"jeffreys"``: ``KL(p||q) + KL(q||p)``, zero when ``p = q``: the pure alignment part.
- ``"entropy"``: ``H(p) + H(q)``, the sharpening part alone (SCE = entropy + Jeffreys).

Options the paper leaves open, with our defaults: the two terms are summed (``reduce_terms=
"sum"``; ``"mean"`` halves them); no side is detached (``detach="none"``, or ``"long"`` /
``"short"``); the training term averages SCE over all overlap positions (``positions="all"``,
or ``"last"``, or ``"paper"``); the CE is window A's (``ce_on="a"``, or ``"b"``, or ``"both"``).

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

The metric (Table 1, ``lsa.alignment.misalignment_metric``) defaults to ``positions="paper"``:
averaged over all overlap positions it is dominated by B's near-empty contexts (1, 2, ...
tokens), which the paper's definition excludes. ``misalignment_metrics`` gives several sets
from one forward pass
per sample (the runs report ``"paper"`` as ``misalignment`` and ``"all"`` as
``misalignment_all``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

# the options' names, typed once (torch-free: the configuration imports them too)
from lsa.options import (
    DETACH,
    DIVERGENCES,
    L_EXTRA_SETTINGS,
    POSITIONS,
    REDUCE_TERMS,
    Detach,
    DivergenceName,
    Positions,
    ReduceTerms,
)

#: rows (positions) per fp32 chunk of the objective; with a 32000 vocabulary one chunk is 64 MB
DEFAULT_CHUNK = 512


def check_options(divergence: str, reduce_terms: str, detach: str) -> None:
    """Refuse an unknown ``divergence``, ``reduce_terms`` or ``detach`` (here and in
    lsa/fused.py)."""
    if divergence not in DIVERGENCES:
        raise ValueError(f"divergence = {divergence!r}: must be one of "
                         f"{', '.join(map(repr, DIVERGENCES))}")
    if reduce_terms not in REDUCE_TERMS:
        raise ValueError(f"reduce_terms = {reduce_terms!r}: must be 'sum' or 'mean'")
    if detach not in DETACH:
        raise ValueError(f"detach = {detach!r}: must be 'none', 'long' or 'short'")


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


# ---------------------------------------------------------------------------------------------
# the formula


def _log_softmax(logits: torch.Tensor) -> torch.Tensor:
    """``log softmax`` over the vocabulary in fp32 or wider: bf16/fp16 logits are upcast,
    float64 logits stay float64 (a reference at higher precision)."""
    return F.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), -1)


def divergence_terms(logits_a: torch.Tensor, logits_b: torch.Tensor,
                     divergence: DivergenceName = "sce",
                     detach: Detach = "none") -> torch.Tensor:
    """The divergence's two terms per position of two ``(..., V)`` logit tensors, shape
    ``(2, ...)``: A's and B's, with ``p = softmax(logits_a)`` (the long context) and ``q =
    softmax(logits_b)`` (the short one).

    - ``"sce"``: ``H(p, q) = -sum p log q`` and ``H(q, p) = -sum q log p``;
    - ``"jeffreys"``: ``KL(p||q) = sum p (log p - log q)`` and ``KL(q||p)``;
    - ``"entropy"``: ``H(p) = -sum p log p`` and ``H(q)``.

    ``detach="long"`` (``"short"``) stops the gradient through ``p`` (``q``), so that side's
    logits get none of the divergence's gradient.
    """
    check_options(divergence, "sum", detach)
    log_p, log_q = _log_softmax(logits_a), _log_softmax(logits_b)
    if detach == "long":
        log_p = log_p.detach()
    if detach == "short":
        log_q = log_q.detach()
    p, q = log_p.exp(), log_q.exp()
    if divergence == "sce":
        return torch.stack([-(p * log_q).sum(-1), -(q * log_p).sum(-1)])
    if divergence == "jeffreys":
        return torch.stack([(p * (log_p - log_q)).sum(-1), (q * (log_q - log_p)).sum(-1)])
    return torch.stack([-(p * log_p).sum(-1), -(q * log_q).sum(-1)])


def pair_divergence(logits_a: torch.Tensor, logits_b: torch.Tensor, *,
                    divergence: DivergenceName = "sce",
                    reduce_terms: ReduceTerms = "sum",
                    detach: Detach = "none") -> torch.Tensor:
    """The divergence per position (``(...)``): the sum (or mean) of ``divergence_terms``.
    With the defaults this is the paper's ``SCE(p, q) = H(p, q) + H(q, p)``.
    ``lsa.fused.symmetric_cross_entropy`` computes the same values in chunks, without
    gradient."""
    check_options(divergence, reduce_terms, detach)
    terms = divergence_terms(logits_a, logits_b, divergence, detach)
    return terms.sum(0) if reduce_terms == "sum" else terms.mean(0)


def next_token_nll(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """``(B, T - 1)`` CE of predicting ``tokens[:, t + 1]`` from ``logits[:, t]`` (``(B, T, V)``
    logits, ``(B, T)`` tokens); the last position predicts nothing."""
    log_p = _log_softmax(logits[:, :-1])
    return -log_p.gather(-1, tokens[:, 1:, None].to(logits.device)).squeeze(-1)


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


def select_positions(l_train: int, l_extra: int, positions: Positions) -> tuple[slice, slice]:
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
# the objective


def objective(logits: torch.Tensor, tokens: torch.Tensor,
              ce_weights: Sequence[torch.Tensor], ce_coefs: Sequence[float],
              pairs: Pairs | None = None, *, alpha: float = 0.0,
              divergence: DivergenceName = "sce", reduce_terms: ReduceTerms = "sum",
              detach: Detach = "none"
              ) -> tuple[torch.Tensor, torch.Tensor]:
    """``(loss, values)`` of CE terms and a divergence over ``(B, T, V)`` logits, the definition
    that ``lsa.fused.fused_objective`` computes in one chunked pass.

    ``nll = next_token_nll(logits, tokens)``. Term ``k`` is ``sum(ce_weights[k] * nll)``, where
    ``ce_weights[k]`` has shape ``(B, T - 1)`` (a token mean is weights ``1 / count``). The
    divergence is ``pair_divergence`` averaged over the positions of ``pairs`` (a ``Pairs``; 0
    when there are none)::

        loss = sum_k ce_coefs[k] * term_k + alpha * divergence

    ``values`` holds the K terms and the divergence, detached. The gradient is autograd's.
    """
    check_options(divergence, reduce_terms, detach)
    if alpha < 0:
        raise ValueError(f"alpha = {alpha}: must be >= 0")
    if len(ce_weights) != len(ce_coefs):
        raise ValueError(f"{len(ce_weights)} CE weight tensors for {len(ce_coefs)} coefficients")
    nll = next_token_nll(logits, tokens)
    terms = [(w.to(nll.device) * nll).sum() for w in ce_weights]
    div = nll.new_zeros(())
    if pairs is not None and pairs.count:
        at_a = slice(pairs.start_a, pairs.start_a + pairs.length)
        at_b = slice(pairs.start_b, pairs.start_b + pairs.length)
        div = pair_divergence(logits[list(pairs.rows_a), at_a], logits[list(pairs.rows_b), at_b],
                              divergence=divergence, reduce_terms=reduce_terms,
                              detach=detach).mean()
    loss = sum(c * term for c, term in zip(ce_coefs, terms)) + alpha * div
    return loss, torch.stack(terms + [div]).detach()
