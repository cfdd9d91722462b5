"""The long-short misalignment, the core of the paper (Sections 4.1-4.2), in plain autograd.

The formula. For a text ``x``, let ``p`` be the model's next-token distribution after a long
context and ``q`` its distribution after a shorter suffix of that context. The long-short
misalignment is their symmetric cross-entropy::

    SCE(p, q) = H(p, q) + H(q, p) = -sum_v p_v log q_v - sum_v q_v log p_v

and fine-tuning minimises ``CE + alpha * SCE``, with SCE averaged over the positions where both
contexts predict the same token. This module is the definition: ``divergence_terms`` and
``pair_divergence`` are the formula per position, ``next_token_nll`` the CE, and ``objective``
the regularized loss, all written with ``log_softmax`` and autograd. ``misalignment_loss`` and
``ce_loss`` build the windows and the weights of a training step. The metric functions measure
a trained model. Training and the metric get these numbers from lsa/fused.py, a chunked pass
with a closed-form gradient that computes the same function faster and in less memory
(``fused=False`` selects the autograd form). tests/test_misalign.py checks that the two agree.

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

The metric (Table 1, ``misalignment_metric``) defaults to ``positions="paper"``: averaged over
all overlap positions it is dominated by B's near-empty contexts (1, 2, ... tokens), which the
paper's definition excludes. ``misalignment_metrics`` gives several sets from one forward pass
per sample (the runs report ``"paper"`` as ``misalignment`` and ``"all"`` as
``misalignment_all``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F

# the fused kernel (the same numbers, faster and in less memory), and the names of the options
# and the description of the compared positions that it shares with this module
from lsa.fused import (
    DEFAULT_CHUNK,
    Divergence,
    Pairs,
    check_options,
    fused_objective,
    symmetric_cross_entropy,
)

Positions = Literal["all", "last", "paper"]
POSITIONS = ("all", "last", "paper")

L_EXTRA_SETTINGS = {
    1: "U{1..l/2} (default)",
    2: "U{1..l/4}",
    3: "U{l/4..l/2}",
    4: "U{1..l}",
}


# ---------------------------------------------------------------------------------------------
# the formula


def _log_softmax(logits: torch.Tensor) -> torch.Tensor:
    """``log softmax`` over the vocabulary in fp32 or wider: bf16/fp16 logits are upcast,
    float64 logits stay float64 (a reference at higher precision)."""
    return F.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), -1)


def divergence_terms(logits_a: torch.Tensor, logits_b: torch.Tensor,
                     divergence: Divergence = "sce",
                     detach: Literal["none", "long", "short"] = "none") -> torch.Tensor:
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
                    divergence: Divergence = "sce",
                    reduce_terms: Literal["sum", "mean"] = "sum",
                    detach: Literal["none", "long", "short"] = "none") -> torch.Tensor:
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
# the objective


def objective(logits: torch.Tensor, tokens: torch.Tensor,
              ce_weights: Sequence[torch.Tensor], ce_coefs: Sequence[float],
              pairs: Pairs | None = None, *, alpha: float = 0.0,
              divergence: Divergence = "sce", reduce_terms: Literal["sum", "mean"] = "sum",
              detach: Literal["none", "long", "short"] = "none"
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


def _objective(fused: bool, chunk_size: int | None, *args, **kwargs
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """``objective`` as written above, or (``fused``) the same function from lsa/fused.py."""
    if fused:
        return fused_objective(*args, chunk_size=chunk_size, **kwargs)
    return objective(*args, **kwargs)


def _mean_weights(mask: torch.Tensor) -> torch.Tensor:
    """``mask`` as weights of a mean over its True entries (all zero when there are none)."""
    return mask.float() / mask.sum().clamp(min=1)


def ce_loss(logits: torch.Tensor, tokens: torch.Tensor, *,
            answer_mask: torch.Tensor | None = None, answer_weight: float = 0.0,
            chunk_size: int | None = DEFAULT_CHUNK, fused: bool = True
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """``(loss, ce, answer_ce)`` of one batch of windows: the token-mean next-token CE of
    ``(B, T, V)`` logits on ``(B, T)`` tokens (as ``model(tokens, labels=tokens).loss``), plus
    ``answer_weight`` times the mean CE of the tokens marked in ``answer_mask`` (``(B, T)``,
    True at answer tokens; zero when none is marked): ``loss = ce + answer_weight *
    answer_ce``; ``ce`` and ``answer_ce`` carry no gradient. Computed by the fused, chunked
    objective (lsa/fused.py), or by ``objective`` with ``fused=False`` (``chunk_size`` then
    unused)."""
    weights = [_mean_weights(torch.ones_like(tokens[:, 1:], dtype=torch.bool))]
    if answer_mask is not None:
        weights.append(_mean_weights(answer_mask[:, 1:]))
    coefs = [1.0, answer_weight][:len(weights)]
    loss, values = _objective(fused, chunk_size, logits, tokens, weights, coefs)
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
                      answer_weight: float = 0.0, fused: bool = True) -> MisalignOutput:
    """``CE + alpha * L_misalign`` for ``tokens`` of shape ``(N, l_train + l_extra)``, from ONE
    forward pass of the batch ``[A; B]`` (shape ``(2N, l_train)``).

    Both windows start at position id 0 (each is its own sequence, as at inference). With
    ``alpha = 0`` the divergence is still measured (without gradient) for the training curves,
    unless ``measure_misalign=False`` (then it is NaN). ``answer_mask`` (same shape as
    ``tokens``, True at answer tokens, which lie in window B) adds ``answer_weight`` times the
    answers' CE to the CE term (BABILong fine-tuning). The loss is ``objective`` over the
    logits of ``[A; B]``. By default the CE terms and the divergence come from one fused pass
    over the logits (``lsa.fused.fused_objective``), whose backward pass runs once;
    ``fused=False`` computes them with autograd as written in ``objective`` (``chunk_size``
    then unused). Only ``loss`` carries a gradient.
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
    loss, values = _objective(fused, chunk_size, logits, both, weights, coefs, pairs,
                              alpha=alpha, divergence=divergence, reduce_terms=reduce_terms,
                              detach=detach)
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
    from lsa.summary import mean_se

    return MetricResult(*mean_se(values), len(values), values)


def misalignment_metric(model, stream, l_train: int, n_samples: int = 64, *,
                        positions: Positions = "paper", **kwargs) -> MetricResult:
    """The misalignment metric over one set of positions (default the paper's: both contexts
    at least ``l_train / 2`` tokens); ``kwargs`` as ``misalignment_metrics``."""
    return misalignment_metrics(model, stream, l_train, n_samples, positions=(positions,),
                                **kwargs)[positions]
