"""Attention functions the paper's methods need and transformers lacks, registered with
transformers' ``AttentionInterface`` under the names in ``S2_ATTENTION`` and ``EABF_ATTENTION``.

A custom-named attention function receives no causal mask from transformers, so both enforce
causality themselves. Both take and return the shapes of transformers' ``sdpa`` function:
query/key/value ``(B, H, T, D)`` in, ``(B, T, H, D)`` out.

- **S2-Attn** (LongLoRA shifted sparse attention), training only: the sequence is cut into groups
  of ``T * group_ratio`` tokens; half of the heads see the sequence shifted by half a group, so
  information flows between neighbouring groups; attention is causal within each group. At
  evaluation (``module.training`` false) it is full causal attention. With one group (the group
  covers the sequence) there is nothing to shift: it equals full attention.
- **EABF** (entropy-aware ABF): full causal attention whose logits at query position ``p`` are
  multiplied by ``max(1, ln(p + 1) / ln L0)``; the first ``skip_layers`` layers are left alone.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

S2_ATTENTION = "lsa_s2"
EABF_ATTENTION = "lsa_eabf"


def _expand_kv(module, key: torch.Tensor, value: torch.Tensor):
    groups = getattr(module, "num_key_value_groups", 1)
    if groups > 1:
        key = key.repeat_interleave(groups, dim=1)
        value = value.repeat_interleave(groups, dim=1)
    return key, value


def _causal(query, key, value, scaling, dropout):
    return F.scaled_dot_product_attention(query, key, value, dropout_p=dropout, scale=scaling,
                                          is_causal=query.shape[2] > 1)


def s2_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                 group_size: int, scaling: float | None = None, dropout: float = 0.0
                 ) -> torch.Tensor:
    """Shifted sparse attention on ``(B, H, T, D)`` tensors; returns ``(B, H, T, D)``."""
    b, h, t, d = query.shape
    if group_size >= t:
        return _causal(query, key, value, scaling, dropout)
    if t % group_size:
        raise ValueError(f"S2 attention: sequence length {t} is not a multiple of the group "
                         f"size {group_size}")
    half, shift = h // 2, group_size // 2

    def shifted(x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x[:, :half], x[:, half:].roll(-shift, dims=2)], dim=1)

    def grouped(x: torch.Tensor) -> torch.Tensor:  # (B, H, T, D) -> (B * T/G, H, G, D)
        return x.view(b, h, t // group_size, group_size, d).transpose(1, 2).reshape(
            b * (t // group_size), h, group_size, d)

    q, k, v = (grouped(shifted(x)) for x in (query, key, value))
    out = _causal(q, k, v, scaling, dropout)
    out = out.view(b, t // group_size, h, group_size, d).transpose(1, 2).reshape(b, h, t, d)
    return torch.cat([out[:, :half], out[:, half:].roll(shift, dims=2)], dim=1)


def eabf_scale(positions: torch.Tensor, base_window: int) -> torch.Tensor:
    """``max(1, ln(p + 1) / ln L0)`` for absolute positions ``p``."""
    return torch.clamp(torch.log(positions.float() + 1) / math.log(base_window), min=1.0)


def _s2_forward(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    key, value = _expand_kv(module, key, value)
    if module.training:
        ratio = getattr(module.config, "s2_group_ratio", 0.25)
        group = max(1, int(query.shape[2] * ratio))
        out = s2_attention(query, key, value, group, scaling, dropout)
    else:
        out = _causal(query, key, value, scaling, dropout)
    return out.transpose(1, 2).contiguous(), None


def _eabf_forward(module, query, key, value, attention_mask, scaling=None, dropout=0.0,
                  **kwargs):
    key, value = _expand_kv(module, key, value)
    config = module.config
    if module.layer_idx >= getattr(config, "eabf_skip_layers", 0):
        q_len, kv_len = query.shape[2], key.shape[2]
        positions = torch.arange(kv_len - q_len, kv_len, device=query.device)
        scale = eabf_scale(positions, config.eabf_base_window).to(query.dtype)
        query = query * scale[None, None, :, None]  # scaling q scales that query's logits
    out = _causal(query, key, value, scaling, dropout)
    return out.transpose(1, 2).contiguous(), None


def register() -> None:
    """Register both functions with transformers (idempotent)."""
    from transformers import AttentionInterface

    AttentionInterface.register(S2_ATTENTION, _s2_forward)
    AttentionInterface.register(EABF_ATTENTION, _eabf_forward)
