"""Long-range structure for the scratch testbed: passages that recur at a distance.

Book text alone does not make a model of a few million parameters depend on far context (its
perplexity barely changes with the window). Two pieces give the testbed a measurable long-range
dependency (the argument and the numbers: README, "The premise gates"):

- ``insert_recurrences``: the *training* stream with copies inserted: a block of book text
  followed by its own chunks of ``span`` tokens in a shuffled order, each chunk's source ``d``
  tokens back, ``d`` in ``[span, max_distance - span]`` (inside one book). Each stage's stream
  reaches back as far as its own window (``max_distance``: ``L0`` for pretraining, ``l_train``
  for fine-tuning), so a model learns copying at the distances its window shows it; beyond
  that, only what the context-extension method generalizes.
- ``copy_probes``: the *evaluation* (the passkey-style test of the PI and LongLoRA papers, with
  book text as the passkey): windows of ``L`` test-book tokens whose last ``span`` tokens repeat
  an earlier span whose distance lies in the far half of the window, ``[L/2, L - span]``; and,
  for the same windows, a control in which the earlier occurrence is replaced by other text, so
  the final span is the same tokens with nothing to copy from.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


def insert_recurrences(ids: np.ndarray, eos_id: int | None, fraction: float, span: int,
                       max_distance: int, seed: int, copies: list | None = None) -> np.ndarray:
    """``ids`` with recurring passages: each book is cut into blocks of ``B`` tokens (``B``:
    ``max_distance // 2`` rounded down to whole ``span``-token chunks), and a block is followed,
    with probability ``fraction / (1 - fraction)``, by its own chunks written again in a random
    order, so that about ``fraction`` of the result's tokens are copies. A chunk's source lies
    ``d = B + (j - i) * span`` tokens back (chunk ``i`` of the block written at place ``j`` of
    the copy): ``d`` in ``[span, 2B - span]``, inside one window of ``max_distance`` tokens.
    The shuffle makes the distance vary, so only attention to the matching earlier text (an
    induction head), not a fixed offset, predicts a copy. Books (split at ``eos_id``) keep their
    order and their text; a book's last block (with its eos) is not copied; deterministic from
    ``seed``. ``copies``, when given a list, receives ``(position, distance)`` of every chunk.

    Why blocks: the same share of copies scattered as single spans at uniform distances (the
    first design) taught the scratch ``mini`` model no copying in 2M-6M tokens (far-copy gain
    0.04-0.09 nats); a copy right after its block, reached within every window that holds both,
    teaches a 4-layer model to copy within 1000-1500 steps (a 2-layer one only weakly, or late
    and depending on the data order; numbers: README, "The premise gates")."""
    if not 0.0 <= fraction <= 0.5:
        raise ValueError(f"the fraction of copied tokens must be in [0, 0.5] (at most every "
                         f"block copied once), got {fraction}")
    if span < 2 or max_distance < 2 * span:
        raise ValueError(f"need 2 <= span ({span}) and 2 * span <= max_distance ({max_distance})")
    if fraction == 0.0 or len(ids) == 0:
        return ids
    block = (max_distance // 2) // span * span
    rng = np.random.default_rng(seed)
    p_copy = fraction / (1.0 - fraction)
    ends = (np.flatnonzero(ids == eos_id) + 1) if eos_id is not None else np.zeros(0, int)
    if not len(ends) or ends[-1] != len(ids):
        ends = np.append(ends, len(ids))
    starts = np.concatenate([[0], ends[:-1]])
    pieces, written = [], 0
    n_chunks = block // span
    for start, end in zip(starts, ends):
        pos = start
        # the last partial block (with the book's eos) stays text
        while end - pos > block:
            text = ids[pos:pos + block]
            pieces.append(text)
            written += block
            pos += block
            if rng.random() < p_copy:
                order = rng.permutation(n_chunks)
                pieces.append(text.reshape(n_chunks, span)[order].reshape(-1))
                if copies is not None:
                    copies.extend((written + j * span, block + (j - int(i)) * span)
                                  for j, i in enumerate(order))
                written += block
        pieces.append(ids[pos:end])
        written += end - pos
    return np.concatenate(pieces).astype(ids.dtype)


@dataclass
class CopyProbes:
    """``n`` probe windows of one length: ``copy`` (the final span repeats an earlier span),
    ``control`` (the same windows with the earlier occurrence replaced), the ``distance`` from
    source to copy, and ``scored``: the target positions whose NLL is the probe's (the copy's
    tokens after its first, which no model can know is a copy)."""

    copy: torch.Tensor       # (n, L)
    control: torch.Tensor    # (n, L)
    distance: torch.Tensor   # (n,)
    scored: slice            # target positions: logits[:, scored.start - 1: scored.stop - 1]


def copy_probes(stream, length: int, n: int, span: int, seed: int) -> CopyProbes:
    """``n`` probes of ``length`` tokens from ``stream`` (each window inside one book): the end
    repeats the book text at a source whose distance is uniform in ``[length / 2, length -
    span]``; the control puts other text of the book at the source. Deterministic from ``seed``
    and ``length`` (every model is measured on the same probes)."""
    if length < 2 * span + 2:
        raise ValueError(f"a probe window of {length} tokens is too short for a copy of {span} "
                         f"tokens in its far half")
    spans = stream.book_spans()
    spans = spans[(spans[:, 1] - spans[:, 0]) >= length + 4 * span]
    if not len(spans):
        raise ValueError(f"the {stream.name or 'token'} stream has no book of {length + 4 * span}"
                         f" tokens for copy probes")
    rng = np.random.default_rng([seed, length])
    target = length - span
    lo, hi = max(span, length // 2), target
    copies, controls, distances = [], [], []
    for _ in range(n):
        b_start, b_end = spans[rng.integers(len(spans))]
        start = int(rng.integers(b_start, b_end - length - span + 1))
        window = stream.ids[start:start + length].astype(np.int64)
        distance = int(rng.integers(lo, hi + 1))
        source = target - distance
        copy, control = window.copy(), window.copy()
        copy[target:] = window[source:source + span]
        control[target:] = window[source:source + span]
        other = start + source
        while abs(other - (start + source)) < 2 * span:  # other text of the same book
            other = int(rng.integers(b_start, b_end - span + 1))
        control[source:source + span] = stream.ids[other:other + span]
        copies.append(copy)
        controls.append(control)
        distances.append(distance)
    return CopyProbes(torch.from_numpy(np.stack(copies)), torch.from_numpy(np.stack(controls)),
                      torch.tensor(distances), slice(target + 1, length))
