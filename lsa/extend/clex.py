"""CLEX: continuous length extrapolation (Chen et al., 2024) as a replacement rotary module.

The log-frequencies ``z(t)`` (one per rotary pair, ``d/2`` of them) follow an ODE in the scale
``t >= 1``::

    dz/dt = act((z + log theta_ntk(t)) U) D + d/dt log theta_ntk(t),    z(1) = log theta

with ``theta_ntk(t)_i = (b * a^(d/(d-2)))^(-2i/d)`` the NTK frequencies for ``a = 2t - 1``.
``D`` starts at zero, so at initialisation ``z(t) = log theta_ntk(t)``: CLEX equals NTK with
``alpha = 2t - 1``, and plain RoPE at ``t = 1``. ``U`` and ``D`` are trained with the run.
The ODE is integrated with fixed-step RK4 (``ode_steps`` per unit of t).

Training samples ``t`` uniformly from ``[1, t_max]`` at every forward pass
(``t_max = ceil(L_train / L0)``); evaluation uses ``t = ceil(L / L0)`` for a sequence of
length ``L`` (and ``t = 1`` within the base window).
"""

from __future__ import annotations

import math

import torch
from torch import nn


class ClexRotaryEmbedding(nn.Module):
    def __init__(self, head_dim: int, base: float, base_window: int, t_max: float,
                 hidden: int = 32, ode_steps: int = 8, act: str = "silu"):
        super().__init__()
        if head_dim % 2:
            raise ValueError(f"head_dim {head_dim} must be even")
        self.head_dim, self.base, self.base_window = head_dim, float(base), base_window
        self.t_max, self.ode_steps = float(t_max), ode_steps
        half = head_dim // 2
        self.register_buffer("exponent", torch.arange(0, head_dim, 2).float() / head_dim,
                             persistent=False)  # 2i/d
        self.up = nn.Parameter(torch.randn(half, hidden) / math.sqrt(half))
        self.down = nn.Parameter(torch.zeros(hidden, half))
        self.act = {"silu": nn.functional.silu, "tanh": torch.tanh}[act]
        self.attention_scaling = 1.0
        self.sampled_t: float | None = None

    # log theta_ntk(t) and its derivative in t (closed form)
    def log_theta_ntk(self, t: torch.Tensor) -> torch.Tensor:
        d = self.head_dim
        alpha = 2 * t - 1
        return -self.exponent * (math.log(self.base) + d / (d - 2) * torch.log(alpha))

    def dlog_theta_ntk(self, t: torch.Tensor) -> torch.Tensor:
        d = self.head_dim
        return -self.exponent * (d / (d - 2)) * 2 / (2 * t - 1)

    def field(self, z: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return self.act((z + self.log_theta_ntk(t)) @ self.up) @ self.down + \
            self.dlog_theta_ntk(t)

    def log_freqs(self, t: float) -> torch.Tensor:
        """``z(t)`` by RK4 from ``z(1) = log theta``."""
        z = -self.exponent * math.log(self.base)
        if t <= 1.0:
            return z
        n = max(1, math.ceil((t - 1.0) * self.ode_steps))
        h = (t - 1.0) / n
        tt = torch.tensor(1.0, device=z.device)
        for _ in range(n):
            k1 = self.field(z, tt)
            k2 = self.field(z + h / 2 * k1, tt + h / 2)
            k3 = self.field(z + h / 2 * k2, tt + h / 2)
            k4 = self.field(z + h * k3, tt + h)
            z = z + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
            tt = tt + h
        return z

    def scale_for(self, seq_len: int) -> float:
        if self.training:
            t = 1.0 + float(torch.rand(()).item()) * (self.t_max - 1.0)
            self.sampled_t = t
            return t
        return float(max(1, math.ceil(seq_len / self.base_window)))

    def forward(self, x: torch.Tensor, position_ids: torch.Tensor):
        seq_len = int(position_ids.max().item()) + 1
        inv_freq = self.log_freqs(self.scale_for(seq_len)).exp()
        freqs = position_ids[..., None].float() * inv_freq.to(x.device)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def install_clex(model, base_window: int, target_window: int, hidden: int = 32,
                 ode_steps: int = 8) -> ClexRotaryEmbedding:
    """Replace ``model``'s rotary module (Llama family) by a CLEX one; returns it."""
    config = model.config
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // \
        config.num_attention_heads
    base = (config.rope_parameters or {}).get("rope_theta", 10000.0)
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    device = next(model.parameters()).device
    clex = ClexRotaryEmbedding(head_dim, base, base_window,
                               t_max=math.ceil(target_window / base_window), hidden=hidden,
                               ode_steps=ode_steps).to(device)
    clex.train(model.training)
    inner.model.rotary_emb = clex
    return clex
