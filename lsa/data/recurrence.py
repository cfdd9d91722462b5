"""Long-range structure for the scratch testbed: passages that recur at a distance.

Book text alone does not make a model of a few million parameters depend on far context (its
perplexity barely changes with the window). Two pieces give the testbed a measurable long-range
dependency (the argument and the numbers: notebook 02 and ``docs/methods.md``):

- ``insert_recurrences``: the *training* stream with copies inserted. Between pieces of book
  text, a span of ``span`` tokens already written is written again, its source ``d`` tokens
  back, ``d`` uniform in ``[span, max_distance]`` (inside one book). Each stage's stream reaches
  back as far as its own window (``max_distance``: ``L0`` for pretraining, ``l_train`` for
  fine-tuning), so a model learns copying at the distances its window shows it; beyond that,
  only what the context-extension method generalizes.
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
    """``ids`` with copies inserted so that about ``fraction`` of the result's tokens are copies
    of a span ``span`` tokens long whose source lies ``d`` tokens back (``d`` uniform in
    ``[span, max_distance]``); a copy whose source would precede its book's start is not made.
    Books (split at ``eos_id``) keep their order and their text; deterministic from ``seed``.
    ``copies``, when given a list, receives ``(position, distance)`` of every copy made."""
    if not 0.0 <= fraction < 1.0:
        raise ValueError(f"the fraction of copied tokens must be in [0, 1), got {fraction}")
    if span < 2 or max_distance < span:
        raise ValueError(f"need 2 <= span ({span}) <= max_distance ({max_distance})")
    if fraction == 0.0 or len(ids) == 0:
        return ids
    rng = np.random.default_rng(seed)
    gap = span * (1.0 - fraction) / fraction  # mean text between copies
    ends = (np.flatnonzero(ids == eos_id) + 1) if eos_id is not None else np.zeros(0, int)
    if not len(ends) or ends[-1] != len(ids):
        ends = np.append(ends, len(ids))
    starts = np.concatenate([[0], ends[:-1]])
    books, offset = [], 0
    for start, end in zip(starts, ends):
        book = ids[start:end]
        out = np.empty(int(len(book) / (1.0 - fraction) * 1.5) + 2 * span, dtype=ids.dtype)
        written, pos = 0, 0
        while pos < len(book):
            piece = book[pos:pos + int(rng.integers(1, max(2, int(2 * gap)) + 1))]
            if written + len(piece) + span > len(out):
                out = np.concatenate([out, np.empty_like(out)])
            out[written:written + len(piece)] = piece
            pos, written = pos + len(piece), written + len(piece)
            if pos >= len(book):
                break
            distance = int(rng.integers(span, max_distance + 1))
            if distance <= written:
                out[written:written + span] = out[written - distance:written - distance + span]
                if copies is not None:
                    copies.append((offset + written, distance))
                written += span
        books.append(out[:written])
        offset += written
    return np.concatenate(books).astype(ids.dtype)


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
