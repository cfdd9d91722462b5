"""Section 3's run: length generalization of small transformers on synthetic regression
tasks, trained short and tested long. The grid of one configuration (``run_grid``) is one run
of kind ``synthetic`` (``lsa.runs``): ``make`` trains it into its folder (``python -m lsa
synthetic``), ``read`` gives back its table, one row per (model, test length), which the
reader ``lsa.runtable`` hands to section 3 (``lsa.sections.synthetic``: its tables, claims and
figures).

A sequence of 0/1 tokens (after a BOS token) is read by a small causal transformer; a linear
head on the last position predicts one scalar; the loss is MSE. Models train on lengths
``[train_min_len, train_max_len]`` and are tested on every length up to ``test_max_len``.

Tasks (the target ``y`` for a sequence ``x`` of length ``l``):

- ``mean``: ``mean(x)``, ``x_i ~ Bernoulli(0.5)``; the output range is [0, 1] for every length.
- ``mean_uniform``: ``k/l`` with ``k ~ U{0..l}`` ones placed at random: 0.5 is no longer a good
  constant answer (the paper's rebuttal variant).
- ``length``: ``l``; the output range grows with the input length.
- ``sum``: ``sum(x)``, Binomial(l, 0.5); also grows with length.

Output reparameterization (OutRep): train on ``f(y + s)`` and invert at test time; the loss
is always reported on the original scale. ``s`` is 0 for ``length`` (as in the paper) and 1 for
targets that can be 0 (``sum``, ``mean``), so that ``log`` and ``1/sqrt`` stay finite.
"""

from __future__ import annotations

import math
import os
import signal
import sys
import time
import zlib
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from lsa.config import SyntheticConfig
from lsa.files import save_metrics, write_json
from lsa.markers import mark_finished

if TYPE_CHECKING:
    from lsa.runs import Run

BOS = 2
VOCAB = 3
TARGET_SHIFT = {"length": 0.0, "sum": 1.0, "mean": 1.0, "mean_uniform": 1.0}


# ---------------------------------------------------------------------------------------------
# data


def make_batch(task: str, lengths: torch.Tensor, generator: torch.Generator):
    """Tokens ``(B, 1 + max(lengths))`` with BOS first and 0-padding on the right, targets ``(B,)``.

    Right padding is harmless: attention is causal and the prediction is read at index
    ``lengths`` (the last real token), which never sees a pad.
    """
    lengths = lengths.long()
    batch, width = lengths.numel(), int(lengths.max())
    pos = torch.arange(width).expand(batch, width)
    valid = pos < lengths[:, None]
    if task == "mean_uniform":
        ones = (torch.rand(batch, generator=generator) * (lengths + 1).float()).long()  # U{0..l}
        scores = torch.rand(batch, width, generator=generator).masked_fill(~valid, float("inf"))
        ranks = scores.argsort(dim=1).argsort(dim=1)
        bits = (ranks < ones[:, None]) & valid
    else:
        bits = (torch.rand(batch, width, generator=generator) < 0.5) & valid
    bits = bits.long()
    count = bits.sum(1).double()
    if task in ("mean", "mean_uniform"):
        target = count / lengths.double()
    elif task == "length":
        target = lengths.double()
    elif task == "sum":
        target = count
    else:
        raise ValueError(f"unknown task {task!r}; allowed: mean, mean_uniform, length, sum")
    tokens = torch.cat([torch.full((batch, 1), BOS, dtype=torch.long), bits], dim=1)
    return tokens, target


# ---------------------------------------------------------------------------------------------
# output reparameterization


@dataclass(frozen=True)
class OutRep:
    """``forward(y) = f(y + shift)``; ``inverse`` maps a prediction back to the original scale."""

    name: str
    shift: float = 0.0

    def forward(self, y: torch.Tensor) -> torch.Tensor:
        z = y + self.shift
        if self.name == "identity":
            return y
        if self.name == "sqrt":
            return z.sqrt()
        if self.name == "log":
            return z.log()
        if self.name == "inv_sqrt":
            return z.rsqrt()
        raise ValueError(f"unknown OutRep {self.name!r}; allowed: identity, sqrt, log, inv_sqrt")

    def inverse(self, z: torch.Tensor) -> torch.Tensor:
        if self.name == "identity":
            return z
        if self.name == "sqrt":
            return z.clamp(min=0).square() - self.shift
        if self.name == "log":
            return z.clamp(max=50.0).exp() - self.shift  # exp(50) is far beyond any target
        if self.name == "inv_sqrt":
            return z.clamp(min=1e-3).square().reciprocal() - self.shift
        raise ValueError(f"unknown OutRep {self.name!r}")


# ---------------------------------------------------------------------------------------------
# the model: one class, the positional encoding a parameter


def sinusoidal_table(n_positions: int, dim: int) -> torch.Tensor:
    pos = torch.arange(n_positions, dtype=torch.float32)[:, None]
    inv = torch.exp(-math.log(10000.0) * torch.arange(0, dim, 2, dtype=torch.float32) / dim)
    table = torch.zeros(n_positions, dim)
    table[:, 0::2] = torch.sin(pos * inv)
    table[:, 1::2] = torch.cos(pos * inv[: dim // 2])
    return table


def rotate(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """RoPE on ``x`` of shape ``(B, H, T, D)`` (rotate-half convention, as in Llama)."""
    dim = x.shape[-1]
    inv = base ** (-torch.arange(0, dim, 2, dtype=torch.float32, device=x.device) / dim)
    angles = positions.float()[:, None] * inv[None, :]  # (T, D/2)
    cos, sin = torch.cat([angles, angles], -1).cos(), torch.cat([angles, angles], -1).sin()
    x1, x2 = x[..., : dim // 2], x[..., dim // 2:]
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """Geometric slopes ``2^(-8 h / H)``, h = 1..H (Press et al., for a power-of-two H)."""
    return torch.tensor([2.0 ** (-8.0 * (h + 1) / n_heads) for h in range(n_heads)])


class Block(nn.Module):
    def __init__(self, d_model: int, n_heads: int, encoding: str):
        super().__init__()
        self.n_heads, self.encoding = n_heads, encoding
        self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(),
                                 nn.Linear(4 * d_model, d_model))

    def forward(self, h: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        b, t, d = h.shape
        q, k, v = self.qkv(self.ln1(h)).view(b, t, 3, self.n_heads, -1).permute(2, 0, 3, 1, 4)
        if self.encoding == "rope":
            pos = torch.arange(t, device=h.device)
            q, k = rotate(q, pos), rotate(k, pos)
        att = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        h = h + self.out(att.transpose(1, 2).reshape(b, t, d))
        return h + self.mlp(self.ln2(h))


class SyntheticTransformer(nn.Module):
    """Pre-LN causal transformer with a scalar regression head on the last real position."""

    ENCODINGS = ("nope", "learned", "sinusoidal", "rope", "alibi")

    def __init__(self, encoding: str, d_model: int = 32, n_layers: int = 2, n_heads: int = 4,
                 max_positions: int = 64):
        super().__init__()
        if encoding not in self.ENCODINGS:
            raise ValueError(f"unknown encoding {encoding!r}; allowed: {', '.join(self.ENCODINGS)}")
        self.encoding, self.n_heads, self.max_positions = encoding, n_heads, max_positions
        self.embed = nn.Embedding(VOCAB, d_model)
        if encoding == "learned":
            self.pos = nn.Embedding(max_positions, d_model)
        if encoding == "sinusoidal":
            self.register_buffer("pos_table", sinusoidal_table(max_positions, d_model),
                                 persistent=False)
        if encoding == "alibi":
            self.register_buffer("slopes", alibi_slopes(n_heads), persistent=False)
        self.blocks = nn.ModuleList(Block(d_model, n_heads, encoding) for _ in range(n_layers))
        self.ln = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, 1)

    def attention_bias(self, t: int, device) -> torch.Tensor:
        """Additive attention bias ``(1 or H, T, T)``: causal mask, plus ALiBi's distance
        penalty."""
        i = torch.arange(t, device=device)
        dist = (i[:, None] - i[None, :]).float()
        bias = torch.zeros(t, t, device=device).masked_fill(dist < 0, float("-inf"))
        if self.encoding == "alibi":
            return bias - self.slopes[:, None, None] * dist.clamp(min=0)
        return bias[None]

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        b, t = tokens.shape
        if t > self.max_positions and self.encoding in ("learned", "sinusoidal"):
            raise ValueError(f"sequence of {t} tokens exceeds max_positions={self.max_positions}")
        h = self.embed(tokens)
        if self.encoding == "learned":
            h = h + self.pos(torch.arange(t, device=tokens.device))
        elif self.encoding == "sinusoidal":
            h = h + self.pos_table[:t]
        bias = self.attention_bias(t, tokens.device)
        for block in self.blocks:
            h = block(h, bias)
        last = self.ln(h[torch.arange(b, device=tokens.device), lengths.long()])
        return self.head(last).squeeze(-1)


# ---------------------------------------------------------------------------------------------
# one run and the grid


@dataclass(frozen=True)
class RunSpec:
    task: str
    encoding: str
    transform: str
    replicate: int

    def seed(self, base_seed: int) -> int:
        """A stable per-run seed (independent of run order and of Python's hash salt)."""
        key = f"{base_seed}/{self.task}/{self.encoding}/{self.transform}/{self.replicate}"
        return zlib.crc32(key.encode()) % 2**31


def run_specs(cfg: SyntheticConfig) -> list[RunSpec]:
    """Every (task, encoding, transform, replicate) the config asks for, without repeats."""
    specs = []
    for rep in range(cfg.seeds):
        for task in cfg.tasks:
            for enc in cfg.encodings:
                specs.append(RunSpec(task, enc, "identity", rep))
        for task in cfg.outrep_tasks:
            for enc in cfg.outrep_encodings:
                for f in ["identity", *cfg.outrep_transforms]:
                    specs.append(RunSpec(task, enc, f, rep))
    return list(dict.fromkeys(specs))


def train_and_evaluate(spec: RunSpec, cfg: SyntheticConfig) -> pd.DataFrame:
    """Train one model and return its test MSE per length (original target scale)."""
    seed = spec.seed(cfg.seed)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    model = SyntheticTransformer(spec.encoding, cfg.d_model, cfg.n_layers, cfg.n_heads,
                                 max_positions=cfg.test_max_len + 1)
    rep = OutRep(spec.transform, TARGET_SHIFT[spec.task])
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=cfg.lr, total_steps=cfg.steps,
                                                pct_start=0.1)
    model.train()
    final_loss = float("nan")
    for _ in range(cfg.steps):
        lengths = torch.randint(cfg.train_min_len, cfg.train_max_len + 1, (cfg.batch_size,),
                                generator=gen)
        tokens, target = make_batch(spec.task, lengths, gen)
        loss = F.mse_loss(model(tokens, lengths), rep.forward(target).float())
        if not torch.isfinite(loss):
            raise FloatingPointError(f"non-finite training loss in run {spec}")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        final_loss = loss.item()
    return evaluate(model, spec, cfg, rep, final_loss)


@torch.no_grad()
def evaluate(model: SyntheticTransformer, spec: RunSpec, cfg: SyntheticConfig, rep: OutRep,
             final_loss: float = float("nan")) -> pd.DataFrame:
    model.eval()
    gen = torch.Generator().manual_seed(cfg.seed + 12345)  # the same test set for every run
    rows = []
    for length in range(1, cfg.test_max_len + 1):
        lengths = torch.full((cfg.test_samples,), length)
        tokens, target = make_batch(spec.task, lengths, gen)
        pred = rep.inverse(model(tokens, lengths).double())
        rows.append({"task": spec.task, "encoding": spec.encoding, "transform": spec.transform,
                     "replicate": spec.replicate, "length": length,
                     "mse": F.mse_loss(pred, target).item(), "train_loss": final_loss})
    return pd.DataFrame(rows)


def die_with_parent(parent: int) -> None:
    """Make this process die (SIGKILL) when its parent does, even by SIGKILL: a pool worker
    never outlives the kernel or job that started it (Linux: ``prctl(PR_SET_PDEATHSIG)``;
    elsewhere nothing). ``parent`` is the pid the pool was started from: a parent already
    gone before the call (the worker was reparented) ends the worker at once."""
    if sys.platform.startswith("linux"):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(1, signal.SIGKILL, 0, 0, 0) != 0:  # 1: PR_SET_PDEATHSIG
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent:
        os._exit(1)


def _worker(args):
    spec, cfg = args
    torch.set_num_threads(1)
    return train_and_evaluate(spec, cfg)


def run_grid(cfg: SyntheticConfig, progress: bool = True) -> pd.DataFrame:
    """All runs of the config, in ``cfg.workers`` processes; one row per (run, test length).

    The result does not depend on ``workers``: every run seeds itself from its own spec.
    """
    specs = run_specs(cfg)
    jobs = [(s, cfg) for s in specs]
    bar = tqdm(total=len(jobs), desc="synthetic runs", disable=not progress)
    frames = []
    if cfg.workers == 1:
        for job in jobs:
            frames.append(train_and_evaluate(*job))
            bar.update()
    else:
        with ProcessPoolExecutor(cfg.workers, mp_context=get_context("spawn"),
                                 initializer=die_with_parent, initargs=(os.getpid(),)) as pool:
            for frame in pool.map(_worker, jobs):
                frames.append(frame)
                bar.update()
    bar.close()
    return pd.concat(frames, ignore_index=True)


# ---------------------------------------------------------------------------------------------
# the run: the grid of one configuration in one folder


def make(cfg: SyntheticConfig, run: Run, progress: bool = True) -> Path:
    """Train and test the grid of ``cfg`` into ``run``'s folder (``metrics.json``: one record
    per (model, test length), which ``lsa.runtable.read_synthetic`` reads); reused when
    finished. ``run``'s identity is ``cfg`` but its worker count
    (``lsa.runs.synthetic_identity``)."""
    folder = run.folder
    if run.finished:
        return folder
    started = time.time()
    per_length = run_grid(cfg, progress=progress)
    folder.mkdir(parents=True, exist_ok=True)
    write_json(folder / "config.json", run.identity)
    save_metrics(folder, {"per_length": per_length.to_dict(orient="records")}, run.identity,
                 started=started)
    mark_finished(folder, {"steps": cfg.steps, "models": len(run_specs(cfg)),
                           "wall_time_s": round(time.time() - started, 2)})
    return folder

