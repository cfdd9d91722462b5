"""The misalignment of a model, computed: the training losses (``ce_loss``,
``misalignment_loss``: the windows and weights of a step) and the metric (``misalignment_metric``,
``alignment_measures``) of lsa/misalign.py's definition, by the fused kernel of lsa/fused.py
(``fused=False``: the autograd form of the definition itself). tests/unit/test_misalign.py checks
that the two agree.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from lsa.fused import fused_objective, symmetric_cross_entropy
from lsa.misalign import (
    DEFAULT_CHUNK,
    Pairs,
    objective,
    overlap_windows,
    sample_l_extra,
    select_positions,
)
from lsa.options import CE_ON, CeOn, Detach, DivergenceName, Positions, ReduceTerms


def _objective(fused: bool, chunking: dict, *args, **kwargs
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """``objective`` as written above, or (``fused``) the same function from lsa/fused.py with
    ``chunking`` (its ``chunk_size`` and ``chunk_bytes``)."""
    if fused:
        return fused_objective(*args, **chunking, **kwargs)
    return objective(*args, **kwargs)


def _mean_weights(mask: torch.Tensor) -> torch.Tensor:
    """``mask`` as weights of a mean over its True entries (all zero when there are none)."""
    return mask.float() / mask.sum().clamp(min=1)


def ce_loss(logits: torch.Tensor, tokens: torch.Tensor, *,
            answer_mask: torch.Tensor | None = None, answer_weight: float = 0.0,
            chunk_size: int | None = None, chunk_bytes: int | None = None,
            fused: bool = True
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """``(loss, ce, answer_ce)`` of one batch of windows: the token-mean next-token CE of
    ``(B, T, V)`` logits on ``(B, T)`` tokens (as ``model(tokens, labels=tokens).loss``), plus
    ``answer_weight`` times the mean CE of the tokens marked in ``answer_mask`` (``(B, T)``,
    True at answer tokens; zero when none is marked): ``loss = ce + answer_weight *
    answer_ce``; ``ce`` and ``answer_ce`` carry no gradient. Computed by the fused, chunked
    objective (lsa/fused.py: ``chunk_size`` and ``chunk_bytes`` as there), or by ``objective``
    with ``fused=False`` (both then unused)."""
    weights = [_mean_weights(torch.ones_like(tokens[:, 1:], dtype=torch.bool))]
    if answer_mask is not None:
        weights.append(_mean_weights(answer_mask[:, 1:]))
    coefs = [1.0, answer_weight][:len(weights)]
    chunking = {"chunk_size": chunk_size, "chunk_bytes": chunk_bytes}
    loss, values = _objective(fused, chunking, logits, tokens, weights, coefs)
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
                      alpha: float = 0.1, divergence: DivergenceName = "sce",
                      reduce_terms: ReduceTerms = "sum",
                      detach: Detach = "none",
                      positions: Positions = "all",
                      ce_on: CeOn = "a",
                      chunk_size: int | None = None,
                      chunk_bytes: int | None = None,
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
    over the logits (``lsa.fused.fused_objective``, with its ``chunk_size`` and
    ``chunk_bytes``), whose backward pass runs once; ``fused=False`` computes them with autograd
    as written in ``objective`` (both then unused). Only ``loss`` carries a gradient.
    """
    if alpha < 0:
        raise ValueError(f"alpha = {alpha}: must be >= 0")
    if ce_on not in CE_ON:
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
    chunking = {"chunk_size": chunk_size, "chunk_bytes": chunk_bytes}
    loss, values = _objective(fused, chunking, logits, both, weights, coefs, pairs,
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
                         divergence: DivergenceName = "sce", seed: int = 0, batch_size: int = 8,
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
