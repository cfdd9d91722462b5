"""CLEX: continuous length extrapolation (Chen et al., 2024) as a replacement rotary module.

The log-frequencies ``z(t)`` (one per rotary pair, ``d/2`` of them) follow an ODE in the scale
``t >= 1``::

    dz/dt = act((z + log theta_ntk(t)) U) D + d/dt log theta_ntk(t),    z(1) = log theta

with ``theta_ntk(t)_i = (b * a^(d/(d-2)))^(-2i/d)`` the NTK frequencies for ``a = 2t - 1``.
``D`` starts at zero, so at initialisation ``z(t) = log theta_ntk(t)``: CLEX equals NTK with
``alpha = 2t - 1``, and plain RoPE at ``t = 1``. ``U`` and ``D`` are trained with the run.
The ODE is integrated with fixed-step RK4 (``ode_steps`` per unit of t).

Training draws a scale at every forward pass (one draw per forward, shared by every row of the
batch, so windows A and B of the regularized objective share it), by ``sampling``:

- ``reference`` (default; ``CLEXScalingRotaryEmbedding`` of DAMO-NLP-SG/CLEX): an integer
  ``t`` uniform in ``{1..max_factor}`` (16 for CLEX-7B-16K) and, for a forward of ``L`` tokens,
  the positions ``0``, ``(r + 1) / k`` for ``L - 2`` distinct sorted ``r`` drawn from
  ``[0, t L - 2)``, and ``t L // k - 1``, with ``k = max(1, L // L0)``: at ``L = L0`` they are
  ``L`` distinct positions spread over ``[0, t L)``, so scales above 1 are trained even when
  ``L_train = L0``. (At ``L >= 2 L0`` the reference divides by ``k``, which gives fractional
  positions over ``[0, t L0)`` whose last two can coincide; kept as it is.) At ``t = 1`` the
  frequencies are plain RoPE and the ODE gets no gradient from that step.
- ``continuous`` (this project's first version): ``t`` uniform in ``[1, t_max]``,
  ``t_max = ceil(L_train / L0)``, on contiguous positions; at ``L_train = L0`` it is always 1.

The model itself always sees contiguous ``position_ids`` (non-contiguous ones would be read as
packed sequences by transformers): the module maps position ``i`` of the forward to the drawn
position ``i`` when it builds cos and sin, so attention stays one causal sequence.

Evaluation uses contiguous positions and ``t = ceil(L / L0)`` for a sequence of length ``L``
(``t = 1`` within the base window); ``reference`` caps it at ``max_factor`` as CLEX does.

The draws come from the module's own generator, which the trainer reseeds before every forward
(``seed_draws``) from the run's seed, step and micro-batch, so a CE-only run and a regularized
run with one seed draw the same scales, and a resumed run the same as an uninterrupted one.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from torch import nn

SAMPLINGS = ("reference", "continuous")
Sampling = Literal["reference", "continuous"]


class ClexRotaryEmbedding(nn.Module):
    def __init__(self, head_dim: int, base: float, base_window: int, t_max: float = 1.0,
                 hidden: int = 32, ode_steps: int = 8, act: str = "silu",
                 max_factor: int = 16, sampling: Sampling = "reference"):
        super().__init__()
        if head_dim % 2:
            raise ValueError(f"head_dim {head_dim} must be even")
        if sampling not in SAMPLINGS:
            raise ValueError(f"sampling = {sampling!r}: must be one of {', '.join(SAMPLINGS)}")
        if max_factor < 1:
            raise ValueError(f"max_factor = {max_factor}: must be >= 1")
        self.head_dim, self.base, self.base_window = head_dim, float(base), base_window
        self.t_max, self.ode_steps = float(t_max), ode_steps
        self.max_factor, self.sampling = int(max_factor), sampling
        half = head_dim // 2
        self.register_buffer("exponent", torch.arange(0, head_dim, 2).float() / head_dim,
                             persistent=False)  # 2i/d
        self.up = nn.Parameter(torch.randn(half, hidden) / math.sqrt(half))
        self.down = nn.Parameter(torch.zeros(hidden, half))
        self.act = {"silu": nn.functional.silu, "tanh": torch.tanh}[act]
        self.attention_scaling = 1.0
        self.generator = torch.Generator().manual_seed(0)
        self.sampled_t: float | None = None                # the last training draw
        self.sampled_positions: torch.Tensor | None = None  # None: contiguous

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

    def seed_draws(self, seed: int) -> None:
        """Restart the training draws from ``seed`` (the trainer calls it before each forward)."""
        self.generator.manual_seed(seed)

    def eval_scale(self, seq_len: int) -> int:
        """``t = ceil(L / L0)`` (at least 1; at most ``max_factor`` with ``reference``)."""
        t = max(1, math.ceil(seq_len / self.base_window))
        return min(t, self.max_factor) if self.sampling == "reference" else t

    def draw(self, seq_len: int) -> tuple[float, torch.Tensor | None]:
        """A training scale and the positions of a forward of ``seq_len`` tokens (None:
        contiguous), from the module's generator (see the module docstring)."""
        gen = self.generator
        if self.sampling == "continuous":
            return 1.0 + float(torch.rand((), generator=gen)) * (self.t_max - 1.0), None
        t = int(torch.randint(1, self.max_factor + 1, (1,), generator=gen))
        if seq_len < 2:
            return float(t), None
        k = max(1, seq_len // self.base_window)
        inner = torch.randperm(seq_len * t - 2, generator=gen)[:seq_len - 2].sort().values
        positions = torch.cat([torch.zeros(1), (inner + 1).float() / k,
                               torch.tensor([float(seq_len * t // k - 1)])])
        return float(t), positions

    def forward(self, x: torch.Tensor, position_ids: torch.Tensor):
        seq_len = int(position_ids.max().item()) + 1
        if self.training:
            t, drawn = self.draw(seq_len)
            self.sampled_t, self.sampled_positions = t, drawn
        else:
            t, drawn = self.eval_scale(seq_len), None
        # fp32 under a mixed-precision autocast too (bf16 angles are wrong by whole radians
        # at long positions), as transformers' own rotary module does
        with torch.autocast(x.device.type, enabled=False):
            inv_freq = self.log_freqs(t).exp().to(x.device)
            positions = position_ids.float() if drawn is None else \
                drawn.to(x.device)[position_ids]
            freqs = positions[..., None] * inv_freq
            emb = torch.cat((freqs, freqs), dim=-1)
            return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def install_clex(model, base_window: int, target_window: int, hidden: int = 32,
                 ode_steps: int = 8, max_factor: int = 16,
                 sampling: Sampling = "reference") -> ClexRotaryEmbedding:
    """Replace ``model``'s rotary module (Llama family) by a CLEX one; returns it.
    ``target_window`` sets ``t_max`` of the ``continuous`` sampling."""
    config = model.config
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // \
        config.num_attention_heads
    base = (config.rope_parameters or {}).get("rope_theta", 10000.0)
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    device = next(model.parameters()).device
    clex = ClexRotaryEmbedding(head_dim, base, base_window,
                               t_max=math.ceil(target_window / base_window), hidden=hidden,
                               ode_steps=ode_steps, max_factor=max_factor,
                               sampling=sampling).to(device)
    clex.train(model.training)
    inner.model.rotary_emb = clex
    return clex
