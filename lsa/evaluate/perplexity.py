"""Perplexity, CLEX protocol: non-overlapping chunks of exactly L tokens from held-out books,
one forward pass per chunk, token-weighted mean NLL over all chunks, ``exp`` of it."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm


@torch.no_grad()
def chunk_nll(model, chunk: torch.Tensor) -> tuple[float, int]:
    """Summed next-token NLL of ``(B, L)`` chunks and the number of predicted tokens."""
    logits = model(input_ids=chunk).logits
    nll = F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), chunk[:, 1:].flatten(),
                          reduction="sum")
    return nll.item(), chunk[:, 1:].numel()


@torch.no_grad()
def perplexity(model, stream, lengths: list[int], max_chunks: int | None = None,
               batch_size: int = 1, progress: bool = False) -> dict[int, dict[str, float]]:
    """``{L: {"ppl", "nll", "tokens", "chunks"}}`` for every evaluation length ``L``."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    out: dict[int, dict[str, float]] = {}
    for length in lengths:
        chunks = stream.chunks(length, max_chunks)
        total, count = 0.0, 0
        for start in tqdm(range(0, len(chunks), batch_size), desc=f"ppl@{length}",
                          disable=not progress):
            nll, n = chunk_nll(model, chunks[start:start + batch_size].to(device))
            total, count = total + nll, count + n
        mean = total / count
        out[length] = {"ppl": math.exp(mean), "nll": mean, "tokens": count,
                       "chunks": len(chunks)}
    model.train(was_training)
    return out
