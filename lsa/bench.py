"""``python -m lsa bench misalign``: the regularizer's cost, measured in one run.

Four step variants on the same model, optimizer and shapes (``N`` sequences of
``l_train + l_extra`` tokens, windows A and B of ``l_train``):

- ``ce_a``: CE of window A only (one forward of N x l_train): the plain fine-tuning step;
- ``ce_ab``: CE of both windows, no SCE (forward of 2N x l_train);
- ``ce_ab+sce``: CE of both windows + alpha * SCE over the overlap (same forward as ``ce_ab``);
- ``ce_a+sce``: CE of window A + alpha * SCE (the default regularized step; forward of 2N).

*Equal tokens*: ``ce_ab+sce`` / ``ce_ab`` (the cost of the SCE term itself, the paper's
comparison; targets: time <= 1.05x, peak memory <= 1.10x). *Equal sequences*: ``ce_a+sce`` /
``ce_a`` (the cost per training sequence, about 2x: two windows). Each variant's tokens per
second count the tokens it runs through the model (``N x l_train`` for ``ce_a``, twice that for
the others). Times are medians over repeats after a warm-up step of each, variants interleaved
so that drift hits them alike; on a GPU each step is timed by CUDA events (device time between
the step's first and last launch). Peak memory is the step's own high-water mark above the
memory held before it: ``torch.cuda.max_memory_allocated`` on a GPU, the process's peak RSS
(``VmHWM``, reset through ``/proc/self/clear_refs``) on a CPU, in a process whose large
allocations glibc maps and unmaps directly (so that the resident size follows live memory).

Shapes: ``SHAPES`` by default (minutes on 2 CPU cores), ``--quick`` a toy one (tests),
``--shape llama7b`` the loss of a Llama-2-7B-like step (hidden 4096, vocabulary 32000, windows
of 8192 positions, one sequence: the paper profile's fine-tuning; one layer, so that the loss,
not the model, is what differs), slow on a CPU. ``profile_shape`` gives a profile's own
(scripts/gpu_check.py measures ``gpu-small``'s and the 7B-like one on a GPU).
"""

from __future__ import annotations

import gc
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from lsa import paths
from lsa.alignment import ce_loss, misalignment_loss
from lsa.files import device_info, package_versions, write_json

VARIANTS = ("ce_a", "ce_ab", "ce_ab+sce", "ce_a+sce")


@dataclass
class Shape:
    name: str
    vocab_size: int
    hidden_size: int
    n_layers: int
    n_heads: int
    intermediate_size: int
    l_train: int
    l_extra: int
    batch: int


SHAPES = {
    "mini": Shape("mini (scratch Llama, vocab 4096)", 4096, 256, 4, 4, 688, 256, 128, 8),
    "llama32k": Shape("Llama-shaped, vocab 32000", 32000, 512, 4, 8, 1376, 512, 256, 2),
    # hidden / vocab twice llama32k's (Llama-2-7B: 4096 / 32000), head dim 128 as Llama-2's;
    # 2 layers and 1 sequence so that it runs in minutes on 2 CPU cores
    "llama32k_h1024": Shape("Llama-shaped, hidden 1024, vocab 32000", 32000, 1024, 2, 8, 2752,
                            512, 256, 1),
}
QUICK = {"tiny": Shape("tiny (test)", 512, 32, 2, 2, 64, 32, 16, 2)}
#: opt-in shapes (``--shape``): the loss of a Llama-2-7B-like step, windows of the paper's 8192
LARGE = {"llama7b": Shape("Llama-2-7B-like loss (hidden 4096, vocab 32000, 2 x 8192 positions)",
                          32000, 4096, 1, 32, 11008, 8192, 2048, 1)}


def profile_shape(pipe, layers: int | None = None) -> Shape:
    """A profile's fine-tuning step as a bench shape: its base model (``layers`` of them: all
    by default), its window ``l_train`` and batch, ``l_extra`` a quarter of the window (an
    overlap of three quarters)."""
    m, f = pipe.pretrain.model, pipe.finetune
    return Shape(f"{pipe.profile} (hidden {m.hidden_size}, vocab {pipe.pretrain.data.vocab_size})",
                 pipe.pretrain.data.vocab_size, m.hidden_size, layers or m.n_layers, m.n_heads,
                 m.intermediate_size, f.l_train, f.l_train // 4, f.optim.batch_size)


def tokens_of(variant: str, shape: Shape) -> int:
    """The tokens a step of ``variant`` runs through the model: window A alone for ``ce_a``,
    windows A and B for the others."""
    return shape.batch * shape.l_train * (1 if variant == "ce_a" else 2)


def _rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


class PeakMemory:
    """The extra memory a block of code reaches above what was held before it (bytes). On the
    CPU, the process's resident-set high-water mark (Linux /proc): the whole process counts,
    so measure in one that does nothing else, as ``python -m lsa bench`` does."""

    def __init__(self, device: torch.device):
        self.device = device
        self.cpu = device.type == "cpu"
        if self.cpu and not Path("/proc/self/clear_refs").exists():
            raise RuntimeError("CPU peak memory needs Linux /proc (clear_refs, VmHWM)")

    def __enter__(self):
        gc.collect()
        if self.cpu:
            Path("/proc/self/clear_refs").write_text("5")  # reset the peak RSS to the current
            self.before = _rss_kib("VmRSS") * 1024
        else:
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self.before = torch.cuda.memory_allocated(self.device)
        return self

    def __exit__(self, *exc):
        if self.cpu:
            self.peak = _rss_kib("VmHWM") * 1024 - self.before
        else:
            torch.cuda.synchronize(self.device)
            self.peak = torch.cuda.max_memory_allocated(self.device) - self.before
        return False


def make_step(model, opt, variant: str, tokens: torch.Tensor, shape: Shape, alpha: float,
              chunk_bytes: int | None) -> Callable[[], None]:
    l_train, l_extra = shape.l_train, shape.l_extra

    def step() -> None:  # bf16 autocast on a GPU, as the GPU profiles train
        with torch.autocast(tokens.device.type, torch.bfloat16, enabled=tokens.is_cuda):
            if variant == "ce_a":
                window = tokens[:, :l_train]
                loss = ce_loss(model(input_ids=window).logits, window,
                               chunk_bytes=chunk_bytes)[0]
            else:
                loss = misalignment_loss(
                    model, tokens, l_train, l_extra,
                    alpha=alpha if variant.endswith("+sce") else 0.0,
                    ce_on="both" if variant.startswith("ce_ab") else "a",
                    chunk_bytes=chunk_bytes, measure_misalign=variant.endswith("+sce")).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def bench_shape(shape: Shape, repeats: int, alpha: float = 0.1,
                chunk_bytes: int | None = None, device: str | None = None,
                seed: int = 0, measure: str = "both", trace: Path | None = None
                ) -> dict[str, Any]:
    """Median step time (``measure`` "time" or "both") and peak memory ("memory" or "both")
    of each variant, its tokens and tokens per second; on a GPU, steps in bf16 autocast and
    timed by CUDA events, and with ``trace`` one more step of each variant under the profiler,
    its Chrome trace written to ``trace`` (a folder)."""
    from lsa.models import count_parameters, scratch_llama

    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    model = scratch_llama(shape.vocab_size, shape.hidden_size, shape.n_layers, shape.n_heads,
                          shape.intermediate_size, shape.l_train, seed=seed).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    gen = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, shape.vocab_size, (shape.batch, shape.l_train + shape.l_extra),
                           generator=gen).to(dev)
    steps = {v: make_step(model, opt, v, tokens, shape, alpha, chunk_bytes) for v in VARIANTS}
    out: dict[str, Any] = {"shape": asdict(shape), "parameters": count_parameters(model),
                           "device": str(dev), "alpha": alpha, "chunk_bytes": chunk_bytes,
                           "repeats": repeats,
                           "tokens": {v: tokens_of(v, shape) for v in VARIANTS}}
    for step in steps.values():  # warm-up (allocates the optimizer state)
        step()
    if measure in ("memory", "both"):
        peaks: dict[str, int] = {}
        for variant, step in steps.items():
            with PeakMemory(dev) as mem:
                step()
            peaks[variant] = mem.peak
        out["peak_bytes"] = peaks
    if measure in ("time", "both"):
        times: dict[str, list[float]] = {v: [] for v in VARIANTS}
        for _ in range(repeats):
            for variant, step in steps.items():
                times[variant].append(_timed(step, dev))
        out["time_s"] = {v: statistics.median(t) for v, t in times.items()}
        out["tokens_per_s"] = {v: out["tokens"][v] / out["time_s"][v] for v in VARIANTS}
    if trace is not None:
        out["trace"] = str(_profile(steps, dev, Path(trace) / f"{shape.l_train}-{shape.vocab_size}"
                                    ".json"))
    return out


def _timed(step: Callable[[], None], dev: torch.device) -> float:
    """Seconds of one step: CUDA events on a GPU (the queue drained first), else wall time."""
    if dev.type != "cuda":
        start = time.perf_counter()
        step()
        return time.perf_counter() - start
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize(dev)
    begin.record()
    step()
    end.record()
    end.synchronize()
    return begin.elapsed_time(end) / 1e3


def _profile(steps: dict[str, Callable[[], None]], dev: torch.device, path: Path) -> Path:
    """One step of each variant under ``torch.profiler``, its Chrome trace at ``path``."""
    from torch.profiler import ProfilerActivity, profile, record_function

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
    path.parent.mkdir(parents=True, exist_ok=True)
    with profile(activities=activities) as prof:
        for variant, step in steps.items():
            with record_function(variant):
                step()
    prof.export_chrome_trace(str(path))
    return path


def add_ratios(result: dict[str, Any]) -> dict[str, Any]:
    """Ratios of CE+SCE to CE-only (NaN where a peak is too small to measure)."""
    t, m = result["time_s"], result["peak_bytes"]

    def ratio(a: float, b: float) -> float:
        return a / b if b > 0 else float("nan")

    result["ratios"] = {
        "equal_tokens_time": ratio(t["ce_ab+sce"], t["ce_ab"]),
        "equal_tokens_memory": ratio(m["ce_ab+sce"], m["ce_ab"]),
        "equal_sequences_time": ratio(t["ce_a+sce"], t["ce_a"]),
        "equal_sequences_memory": ratio(m["ce_a+sce"], m["ce_a"]),
    }
    return result


TARGETS = {"equal_tokens_time": 1.05, "equal_tokens_memory": 1.10}


def table(results: list[dict[str, Any]]) -> str:
    lines = ["| shape | params | device | CE-only step | CE+SCE step | time x (equal tokens) | "
             "memory x (equal tokens) | time x (equal sequences) | memory x (equal sequences) | "
             "tokens/s (ce_a, ce_ab, ce_ab+sce, ce_a+sce) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        ratio, t = r["ratios"], r["time_s"]

        def mark(key: str, ratio: dict = ratio) -> str:
            ok = "" if key not in TARGETS else (" ok" if ratio[key] <= TARGETS[key] else
                                                f" (target {TARGETS[key]})")
            return f"{ratio[key]:.3f}{ok}"

        rates = ", ".join(f"{r['tokens_per_s'][v]:,.0f}" for v in VARIANTS)
        lines.append(
            f"| {r['shape']['name']} | {r['parameters'] / 1e6:.1f}M | {r['device']} | "
            f"{t['ce_ab'] * 1e3:.0f} ms | {t['ce_ab+sce'] * 1e3:.0f} ms | "
            f"{mark('equal_tokens_time')} | {mark('equal_tokens_memory')} | "
            f"{mark('equal_sequences_time')} | {mark('equal_sequences_memory')} | "
            f"{rates} |")
    return "\n".join(lines)


MMAP_ENV = {"MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "0"}


def _cpu_peaks(args) -> list[dict[str, int]]:
    """Peak memory per shape, measured in a child process in which glibc maps and unmaps large
    blocks directly, so that the resident size follows live memory (by default freed memory
    stays resident and hides a step's peak; the setting must be made before the process starts,
    and it slows allocation, which is why times are measured here, without it)."""
    import json
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "peaks.json"
        argv = [sys.executable, "-m", "lsa", "bench", "misalign", "--memory-only",
                "--out", str(out)] + (["--quick"] if args.quick else []) + \
            (["--shape", args.shape] if getattr(args, "shape", None) else [])
        subprocess.run(argv, env={**os.environ, **MMAP_ENV}, check=True)
        return [r["peak_bytes"] for r in json.loads(out.read_text())["results"]]


def shapes_of(args) -> dict[str, Shape]:
    """The shapes ``args`` ask for: ``--quick``'s, ``--shape NAME``'s, else ``SHAPES``."""
    if args.quick:
        return QUICK
    name = getattr(args, "shape", None)
    if name is None:
        return SHAPES
    every = {**SHAPES, **LARGE}
    if name not in every:
        raise ValueError(f"--shape {name!r}: one of {', '.join(every)}")
    return {name: every[name]}


def main(args) -> int:
    shapes = shapes_of(args)
    torch.manual_seed(0)
    repeats = 1 if args.quick else args.repeats
    if getattr(args, "memory_only", False):
        results = [bench_shape(shape, 1, measure="memory") for shape in shapes.values()]
        write_json(Path(args.out), {"results": results})
        return 0
    gpu = torch.cuda.is_available()
    results = [bench_shape(shape, repeats, measure="both" if gpu else "time")
               for shape in shapes.values()]
    if not gpu:
        for result, peaks in zip(results, _cpu_peaks(args)):
            result["peak_bytes"] = peaks
    results = [add_ratios(r) for r in results]
    default = paths.output_root() / "results" / "bench" / "misalign.json"
    out = Path(args.out) if args.out else default
    write_json(out, {"results": results, "device": device_info(), "packages": package_versions(),
                     "torch_threads": torch.get_num_threads()})
    print(table(results))
    from lsa.files import write_page

    write_page(out.with_suffix(".md"), "bench-misalign", table(results))  # its prose kept
    print(f"\nwritten to {out} and {out.with_suffix('.md')}")
    return 0
