"""Perplexity, CLEX protocol: non-overlapping chunks of exactly L tokens from held-out books,
one forward pass per chunk, token-weighted mean NLL over all chunks, ``exp`` of it.

Every evaluation length scores the same token span, so lengths differ in context, not in text:
the span is ``max_chunks`` blocks of the *longest* length ``L_max``, laid from the start of each
book in stream order (a book's remainder shorter than ``L_max`` is dropped, so no chunk crosses
a book boundary); a length ``L`` cuts every block into ``L_max / L`` chunks, so every length
must divide the longest. ``tokens`` counts predicted tokens: ``L - 1`` per chunk (the first
token of a chunk has no context), so shorter lengths predict slightly fewer of the span's tokens.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm


@torch.no_grad()
def chunk_nll(model, chunk: torch.Tensor, beyond: int | None = None
              ) -> tuple[float, int, float, int]:
    """Summed next-token NLL of ``(B, L)`` chunks and the number of predicted tokens; then the
    same over the targets at positions ``>= beyond`` only (0, 0 when None): the tokens whose
    context is longer than ``beyond``."""
    logits = model(input_ids=chunk).logits
    token_nll = F.cross_entropy(logits[:, :-1].transpose(1, 2).float(), chunk[:, 1:],
                                reduction="none")
    far_sum, far_n = 0.0, 0
    if beyond is not None and beyond < chunk.shape[1]:
        far = token_nll[:, beyond - 1:]   # targets at positions beyond, beyond + 1, ...
        far_sum, far_n = far.sum().item(), far.numel()
    return token_nll.sum().item(), token_nll.numel(), far_sum, far_n


@torch.no_grad()
def perplexity(model, stream, lengths: list[int], max_chunks: int | None = None,
               batch_size: int = 1, progress: bool = False, beyond: int | None = None
               ) -> dict[int, dict[str, float]]:
    """``{L: {"ppl", "nll", "tokens", "chunks"}}`` for every evaluation length ``L``, all on the
    span of ``max_chunks`` chunks of the longest length (the whole stream's books when None).
    With ``beyond``, every ``L > beyond`` also has ``nll_beyond`` and ``tokens_beyond``: the
    mean NLL of the targets at positions ``>= beyond`` of each chunk, whose context is longer
    than ``beyond`` tokens (no such target is scored with that context at ``L = beyond``)."""
    longest = max(lengths)
    if any(longest % length for length in lengths):
        raise ValueError(f"perplexity lengths {lengths} must divide the longest one ({longest}):"
                         " every length scores the same span of chunks of the longest length")
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    out: dict[int, dict[str, float]] = {}
    for length in lengths:
        chunks = stream.chunks(length, max_chunks, block=longest)
        total, count, far_total, far_count = 0.0, 0, 0.0, 0
        for start in tqdm(range(0, len(chunks), batch_size), desc=f"ppl@{length}",
                          disable=not progress):
            nll, n, far, far_n = chunk_nll(model, chunks[start:start + batch_size].to(device),
                                           beyond)
            total, count = total + nll, count + n
            far_total, far_count = far_total + far, far_count + far_n
        mean = total / count
        out[length] = {"ppl": math.exp(mean), "nll": mean, "tokens": count,
                       "chunks": len(chunks)}
        if far_count:
            out[length].update(nll_beyond=far_total / far_count, tokens_beyond=far_count)
    model.train(was_training)
    return out
