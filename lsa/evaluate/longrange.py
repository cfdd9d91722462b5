"""Long-range measures of a language model on the copy probes (``lsa.data.recurrence``).

For every window length ``L``: the mean NLL per token of the copied span (after its first
token), where the source lies in the far half of the window (``copy_nll``), and the share of
probes whose whole scored span is the model's top-1 prediction (``retrieval``: the passkey
accuracy); with ``control``, the same tokens' NLL when the earlier occurrence is replaced by
other text (``control_nll``: what the model predicts without the far context). The unit of the
standard errors is the probe (one window); ``per_probe`` keeps every probe's NLL so two models
measured on the same probes can be compared pairwise.
"""

from __future__ import annotations

import inspect

import torch
import torch.nn.functional as F

from lsa.data.recurrence import copy_probes
from lsa.summary import mean_se

#: tokens per forward pass: the probes of a long window go one at a time (a 7B model at 16K)
TOKENS_PER_BATCH = 8192


def keeps_logits(model) -> bool:
    """Whether ``model`` (or the model under a peft wrapper) takes transformers'
    ``logits_to_keep``: the output head then runs on the scored positions only."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return "logits_to_keep" in inspect.signature(base.forward).parameters


@torch.no_grad()
def _span_nll(model, windows: torch.Tensor, scored: slice) -> tuple[list[float], list[bool]]:
    device = next(model.parameters()).device
    batch_size = max(1, TOKENS_PER_BATCH // windows.shape[1])
    # the positions whose next-token logits score the span: the head (a vocabulary-wide matmul
    # and its softmax) runs on them alone where the model allows it; the same logits, cheaper
    positions = slice(scored.start - 1, scored.stop - 1)
    keep = ({"logits_to_keep": torch.arange(positions.start, positions.stop, device=device)}
            if keeps_logits(model) else {})
    nll, exact = [], []
    for start in range(0, len(windows), batch_size):
        x = windows[start:start + batch_size].to(device)
        logits = model(input_ids=x, use_cache=False, **keep).logits
        logits = (logits if keep else logits[:, positions]).float()
        target = x[:, scored]
        token_nll = F.cross_entropy(logits.transpose(1, 2), target, reduction="none")
        nll.extend(token_nll.mean(dim=1).tolist())
        exact.extend((logits.argmax(-1) == target).all(dim=1).tolist())
    return nll, exact


def copy_retrieval(model, stream, lengths: list[int], n: int, span: int, seed: int,
                   control: bool = False) -> dict[int, dict]:
    """``{L: {copy_nll, copy_stderr, retrieval, n, distance: [lo, hi], per_probe,
    [control_nll, control_stderr, gain, gain_stderr]}}`` on the test ``stream``; ``gain`` is the
    paired drop of NLL that the far occurrence brings (control - copy)."""
    was_training = model.training
    model.eval()
    out: dict[int, dict] = {}
    for length in lengths:
        probes = copy_probes(stream, length, n, span, seed)
        nll, exact = _span_nll(model, probes.copy, probes.scored)
        mean, se = mean_se(nll)
        row = {"copy_nll": mean, "copy_stderr": se, "retrieval": sum(exact) / n, "n": n,
               "distance": [int(probes.distance.min()), int(probes.distance.max())],
               "per_probe": nll}
        if control:
            ctrl, _ = _span_nll(model, probes.control, probes.scored)
            row["control_nll"], row["control_stderr"] = mean_se(ctrl)
            row["gain"], row["gain_stderr"] = mean_se([c - v for c, v in zip(ctrl, nll)])
        out[length] = row
    model.train(was_training)
    return out
