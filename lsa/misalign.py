"""The long-short misalignment: the paper's core (Sections 4.1-4.2).

For a text ``x`` and two suffix lengths, the misalignment is the symmetric cross-entropy between
the next-token distributions the model gives after the long and after the short context. The
efficient training form takes one sequence of ``l_train + l_extra`` tokens and runs

- window A = ``x[0 : l_train]``             (absolute positions ``[0, l_train)``)
- window B = ``x[l_extra : l_extra + l_train]`` (absolute positions ``[l_extra, l_extra + l_train)``)

as one batch of two. At an overlap position ``p`` in ``[l_extra, l_train)`` window A's logits at
index ``p`` and window B's at index ``p - l_extra`` both predict ``x[p + 1]``, from contexts whose
lengths differ by ``l_extra``. The overlap is empty when ``l_extra >= l_train``: the SCE term is
then exactly 0 (with a zero gradient) and ``n_overlap`` is 0.

Divergences (``divergence=``):

- ``"sce"``: ``SCE(p, q) = -sum p log q - sum q log p = H(p) + H(q) + KL(p||q) + KL(q||p)``. It
  equals ``2 H(p)``, not 0, when ``p = q``: as a loss it also lowers both entropies.
- ``"jeffreys"``: ``KL(p||q) + KL(q||p)``, zero when ``p = q``: the pure alignment part.

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

Memory: the divergence is computed in chunks of positions, each in fp32 and recomputed in the
backward pass (activation checkpointing), so no more than a chunk x vocabulary of fp32 lives at
once beyond the model's own logits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

Divergence = Literal["sce", "jeffreys"]
Positions = Literal["all", "last", "paper"]
POSITIONS = ("all", "last", "paper")

#: positions per chunk of the divergence; with a 32000 vocabulary one fp32 chunk is 64 MB
DEFAULT_CHUNK = 512

L_EXTRA_SETTINGS = {
    1: "U{1..l/2} (default)",
    2: "U{1..l/4}",
    3: "U{l/4..l/2}",
    4: "U{1..l}",
}


# ---------------------------------------------------------------------------------------------
# the divergence


def _divergence_chunk(logits_a: torch.Tensor, logits_b: torch.Tensor, divergence: str,
                      detach_a: bool, detach_b: bool) -> torch.Tensor:
    logp = F.log_softmax(logits_a.float(), dim=-1)
    logq = F.log_softmax(logits_b.float(), dim=-1)
    p, q = logp.exp(), logq.exp()
    lp, lq = (logp.detach() if detach_a else logp), (logq.detach() if detach_b else logq)
    pp, qq = (p.detach() if detach_a else p), (q.detach() if detach_b else q)
    # -sum p log q - sum q log p, written so that a detached side gets no gradient
    ce_pq = -(pp * lq).sum(-1)
    ce_qp = -(qq * lp).sum(-1)
    if divergence == "sce":
        return torch.stack([ce_pq, ce_qp])
    if divergence == "jeffreys":  # KL(p||q) + KL(q||p) = sum (p - q)(log p - log q)
        return torch.stack([(pp * (lp - lq)).sum(-1), (qq * (lq - lp)).sum(-1)])
    raise ValueError(f"divergence = {divergence!r}: must be 'sce' or 'jeffreys'")


def symmetric_cross_entropy(logits_a: torch.Tensor, logits_b: torch.Tensor, *,
                            divergence: Divergence = "sce",
                            reduce_terms: Literal["sum", "mean"] = "sum",
                            detach: Literal["none", "long", "short"] = "none",
                            chunk_size: int | None = DEFAULT_CHUNK) -> torch.Tensor:
    """Per-position divergence between two ``(..., V)`` logit tensors; returns ``(...)`` in fp32.

    ``logits_a`` is the long-context side (``detach="long"`` stops its gradient), ``logits_b``
    the short one. Computed from log-softmax in fp32, so bf16/fp16 logits and extreme values
    (``+-1e4``) stay finite.
    """
    if logits_a.shape != logits_b.shape:
        raise ValueError(f"logits shapes differ: {tuple(logits_a.shape)} vs "
                         f"{tuple(logits_b.shape)}")
    if detach not in ("none", "long", "short"):
        raise ValueError(f"detach = {detach!r}: must be 'none', 'long' or 'short'")
    if reduce_terms not in ("sum", "mean"):
        raise ValueError(f"reduce_terms = {reduce_terms!r}: must be 'sum' or 'mean'")
    lead, vocab = logits_a.shape[:-1], logits_a.shape[-1]
    a, b = logits_a.reshape(-1, vocab), logits_b.reshape(-1, vocab)
    n = a.shape[0]
    step = n if not chunk_size or chunk_size >= n else chunk_size
    args = (divergence, detach == "long", detach == "short")
    parts = []
    for start in range(0, n, step):
        ca, cb = a[start:start + step], b[start:start + step]
        if torch.is_grad_enabled() and (ca.requires_grad or cb.requires_grad) and step < n:
            parts.append(checkpoint(_divergence_chunk, ca, cb, *args, use_reentrant=False))
        else:
            parts.append(_divergence_chunk(ca, cb, *args))
    terms = torch.cat(parts, dim=1) if parts else a.new_zeros(2, 0, dtype=torch.float32)
    out = terms.sum(0) if reduce_terms == "sum" else terms.mean(0)
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
# the regularized objective


@dataclass
class MisalignOutput:
    """Parts of the regularized objective for one batch."""

    loss: torch.Tensor        # ce + alpha * misalign
    ce: torch.Tensor          # the CE term used in the loss (window A, B or both; + answers)
    ce_a: torch.Tensor        # token-mean CE of window A
    ce_b: torch.Tensor        # token-mean CE of window B
    misalign: torch.Tensor    # divergence averaged over the position set (0 when empty)
    n_overlap: int
    l_extra: int
    answer_ce: torch.Tensor | None = None  # CE of the answer tokens (window B), when given


def answer_ce(logits: torch.Tensor, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean CE of the tokens marked in ``mask`` (``(B, T)``, True at answer tokens) given what
    precedes them; zero when nothing is marked."""
    target_mask = mask[:, 1:]
    if not target_mask.any():
        return logits.new_zeros((), dtype=torch.float32)
    picked = logits[:, :-1][target_mask].float()
    return F.cross_entropy(picked, tokens[:, 1:][target_mask])


def causal_ce(logits: torch.Tensor, tokens: torch.Tensor, chunk_size: int | None = None
              ) -> torch.Tensor:
    """Token-mean next-token CE of ``(B, T, V)`` logits on ``(B, T)`` tokens (T - 1 targets per
    row), as ``model(tokens, labels=tokens).loss`` computes it; fp32, chunked over positions."""
    vocab = logits.shape[-1]
    flat = logits[:, :-1].reshape(-1, vocab)
    target = tokens[:, 1:].reshape(-1)
    n = flat.shape[0]
    step = n if not chunk_size or chunk_size >= n else chunk_size
    total = flat.new_zeros((), dtype=torch.float32)
    for start in range(0, n, step):
        total = total + F.cross_entropy(flat[start:start + step].float(),
                                        target[start:start + step], reduction="sum")
    return total / n


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
    answers' CE to the CE term (BABILong fine-tuning).
    """
    if alpha < 0:
        raise ValueError(f"alpha = {alpha}: must be >= 0")
    if ce_on not in ("a", "b", "both"):
        raise ValueError(f"ce_on = {ce_on!r}: must be 'a', 'b' or 'both'")
    w = overlap_windows(tokens, l_train, l_extra)
    sel_a, sel_b = select_positions(l_train, l_extra, positions)
    n = tokens.shape[0]
    logits = model(input_ids=torch.cat([w.a, w.b], dim=0)).logits
    logits_a, logits_b = logits[:n], logits[n:]
    ce_a = causal_ce(logits_a, w.a, chunk_size)
    ce_b = causal_ce(logits_b, w.b, chunk_size)
    ce = {"a": ce_a, "b": ce_b, "both": (ce_a + ce_b) / 2}[ce_on]
    ans = None
    if answer_mask is not None:
        ans = answer_ce(logits_b, w.b, answer_mask[:, l_extra:l_extra + l_train])
        ce = ce + answer_weight * ans
    if sel_b.start == sel_b.stop:  # empty position set
        misalign = logits.new_zeros((), dtype=torch.float32) + 0.0 * logits.sum()
    elif not alpha and not measure_misalign:
        misalign = torch.tensor(float("nan"))
    else:
        la, lb = logits_a[:, sel_a], logits_b[:, sel_b]
        with torch.set_grad_enabled(torch.is_grad_enabled() and alpha > 0):
            misalign = symmetric_cross_entropy(la, lb, divergence=divergence,
                                               reduce_terms=reduce_terms, detach=detach,
                                               chunk_size=chunk_size).mean()
    loss = ce + alpha * misalign if alpha else ce
    return MisalignOutput(loss, ce, ce_a.detach(), ce_b.detach(), misalign, w.n_overlap, l_extra,
                          None if ans is None else ans.detach())


# ---------------------------------------------------------------------------------------------
# the metric (Table 1)


@dataclass
class MetricResult:
    mean: float
    stderr: float
    n: int
    values: list[float]


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
    gen = torch.Generator().manual_seed(seed)
    values: dict[str, list[float]] = {name: [] for name in positions}
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
        div = symmetric_cross_entropy(logits[:count, w.overlap_a], logits[count:, w.overlap_b],
                                      divergence=divergence, chunk_size=chunk_size)
        for name, sl in sets.items():
            values[name].extend(div[:, sl].mean(dim=-1).tolist())
        done += count
    model.train(model_was_training)
    return {name: _summary(v) for name, v in values.items()}


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
