"""``python -m lsa bench pins``: what pinning torch's CPU kernels costs and changes, measured
before deciding to pin them (issue 73, item 2), each configuration (the machine's own, the
pins) in processes that run exactly it (``lsa.kernels.environment``).

A run trained on an AVX2 CPU drifts from one trained on an AVX512 CPU after a few steps: ATen's
vectorised kernels and MKL's GEMM pick other code paths, which round otherwise. Pinning them at
every process's start (``lsa.kernels.PIN``, applied since this measurement) makes the paths the
same on every CPU that has them, at a cost. This measures, at a profile's shapes, for each kernel
configuration of ``CONFIGURATIONS``: the seconds per unit of each job kind
(``lsa.throughput.unit``: a base step, a fine-tuning step with the regularizer, an evaluation
forward pass), one process at a time at the threads a pipeline job uses; and, for the training
kinds, the losses of ``steps`` steps from one seed, compared bit for bit with the machine's own
kernels (the first step that differs, and the difference at the last). It also reports which MKL
numerical-reproducibility branch MKL accepted (``MKL_VERBOSE``'s ``CNR:``): on an AMD CPU it takes
``COMPATIBLE`` and reports any other branch as ``AUTO`` (not pinned).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from typing import Any

from lsa import kernels
from lsa.throughput import child_result

#: the kernel configurations compared: the machine's own, then the candidate pins
CONFIGURATIONS: dict[str, dict[str, str]] = {"native": {}, **kernels.PIN_CANDIDATES}
TRAINING = ("base", "finetune")


def child(profile: str, kind: str, threads: int, steps: int) -> int:
    """The measuring process: ``steps`` units of ``kind`` from seed 0 after one warm-up unit
    (a fresh model: the warm-up is its first step), printing the losses (hex: every bit) and
    the seconds per unit as JSON."""
    import torch

    from lsa.throughput import unit

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    work = unit(profile, kind)
    losses = [work()]
    start = time.perf_counter()
    for _ in range(steps):
        losses.append(work())
    seconds = (time.perf_counter() - start) / steps
    print(json.dumps({"losses": [None if v is None else float(v).hex() for v in losses],
                      "seconds": seconds, "aten": torch.backends.cpu.get_cpu_capability()}))
    return 0


def _mkl_branch(env: dict[str, str]) -> str:
    """The reproducibility branch MKL reports for one GEMM under ``env`` (``CNR:...``)."""
    code = "import torch; a = torch.randn(64, 64); a @ a"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**kernels.environment(env), "MKL_VERBOSE": "1"})
    found = re.search(r"CNR:(\S+)", out.stdout + out.stderr)
    return found.group(1) if found else "?"


def measure(profile: str, kinds: tuple[str, ...], steps: int, threads: int = 1
            ) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, env in CONFIGURATIONS.items():
        record: dict[str, Any] = {"env": env, "mkl_branch": _mkl_branch(env)}
        for kind in kinds:
            record[kind] = child_result("pins", ["--profile", profile, "--kinds", kind,
                                                 "--steps", str(steps), "--threads",
                                                 str(threads)], threads,
                                         kernels.environment(env))
        out[name] = record
    native = out["native"]
    for record in out.values():
        for kind in kinds:
            mine = record[kind]
            mine["time_ratio"] = mine["seconds"] / native[kind]["seconds"]
            if kind in TRAINING:
                mine["first_step_differing"], mine["last_difference"] = drift(
                    native[kind]["losses"], mine["losses"])
    return out


def drift(reference: list[str], losses: list[str]) -> tuple[int | None, float]:
    """``(the first step whose loss differs in any bit, or None; the last loss's
    difference)`` of two runs' losses as the child prints them (hex)."""
    a, b = [float.fromhex(v) for v in reference], [float.fromhex(v) for v in losses]
    first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
    return first, b[-1] - a[-1]


def markdown(profile: str, result: dict[str, Any], steps: int, kinds: tuple[str, ...]) -> str:
    lines = [f"# Pinned kernels, profile `{profile}`", "",
             f"Measured by `python -m lsa bench pins --profile {profile} --steps {steps}` "
             f"({os.cpu_count()} CPUs, one process at a time at 1 thread; lsa/pins.py says "
             "what is measured).", "",
             "| configuration | settings | ATen | MKL branch | " + " | ".join(
                 f"{k}: time vs native" for k in kinds) + " | " + " | ".join(
                 f"{k}: first step differing (last-step loss difference)" for k in kinds
                 if k in TRAINING) + " |",
             "|---|---|---|---|" + "---|" * (len(kinds) + sum(k in TRAINING for k in kinds))]
    for name, r in result.items():
        settings = ", ".join(f"`{k}={v}`" for k, v in r["env"].items()) or "none"
        aten = r[kinds[0]]["aten"]
        times = " | ".join(f"{r[k]['time_ratio']:.3f}x" for k in kinds)
        drift = " | ".join(
            ("identical" if r[k]["first_step_differing"] is None else
             f"step {r[k]['first_step_differing']} ({r[k]['last_difference']:+.3g})")
            for k in kinds if k in TRAINING)
        lines.append(f"| {name} | {settings} | {aten} | {r['mkl_branch']} | {times} | {drift} |")
    return "\n".join(lines) + "\n"


def main(args) -> int:
    kinds = tuple(args.kinds.split(",")) if args.kinds else ("base", "finetune", "evaluation")
    profile = args.profile or "mini"
    if args.child:
        return child(profile, kinds[0], args.threads or 1, args.steps or 50)
    from lsa import paths
    from lsa.files import device_info, write_json

    steps = args.steps or 50
    result = measure(profile, kinds, steps)
    out = paths.output_root() / "results" / "bench" / f"pins-{profile}.json"
    write_json(out, {"profile": profile, "steps": steps, "configurations": result,
                     "device": device_info(), "kernels": kernels.report()})
    text = markdown(profile, result, steps, kinds)
    from lsa.files import write_page

    write_page(out.with_suffix(".md"), "bench-pins", text)  # its prose kept
    print(text)
    print(f"written to {out} and {out.with_suffix('.md')}")
    return 0
