"""``python -m lsa bench jobs``: how fast each kind of pipeline job works at 1 and 2 threads,
alone and two side by side, measured in one run (the numbers behind the thread counts of
``workflow/settings.yaml``).

Each kind's *unit* is what dominates its job, at the profile's own shapes (random tokens: the
cost does not depend on their values):

- ``base``: one pretraining step (``pretrain.optim.batch_size`` x ``base_window``, CE);
- ``finetune``: one fine-tuning step at ``l_train`` with the regularizer (two windows; half the
  grid's runs) on the same model;
- ``babilong``: one BABILong step (CE of window B at ``babilong.l_train``);
- ``evaluation``: one forward pass without gradients at the longest evaluation length (what the
  fine-tuning runs' evaluation and the probes do);
- ``synthetic``: one training step of the synthetic study's transformer (one worker's work).

Three settings per kind, each in fresh processes: one job at 1 thread, one at 2 threads, and two
1-thread jobs at once (started together after their warm-up). ``speedup_2t`` is the 2-thread
job's rate over the 1-thread job's; ``pair`` is the two side-by-side jobs' summed rate over the
1-thread job's alone: on 2 cores, two 1-thread jobs at once beat one 2-thread job when
``pair > speedup_2t``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

KINDS = ("base", "finetune", "babilong", "evaluation", "synthetic")
SETTINGS = ("alone_1t", "alone_2t", "pair_1t")


def unit(profile: str, kind: str) -> Callable[[], float | None]:
    """One unit of ``kind``'s work at ``profile``'s shapes (see the module docstring); a
    training unit returns its loss."""
    import torch

    from lsa.config import load_config
    from lsa.models import scratch_llama
    from lsa.train import Objective, compute_loss

    pipe = load_config(profile=profile)
    gen = torch.Generator().manual_seed(0)
    if kind == "synthetic":
        from lsa.synthetic import SyntheticTransformer, make_batch

        cfg = pipe.synthetic
        model = SyntheticTransformer("rope", cfg.d_model, cfg.n_layers, cfg.n_heads,
                                     max_positions=cfg.test_max_len + 1)
        opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr)

        def synthetic_step() -> None:
            lengths = torch.randint(cfg.train_min_len, cfg.train_max_len + 1,
                                    (cfg.batch_size,), generator=gen)
            tokens, target = make_batch("mean", lengths, gen)
            loss = torch.nn.functional.mse_loss(model(tokens, lengths), target.float())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

        return synthetic_step
    m = pipe.pretrain.model
    model = scratch_llama(pipe.pretrain.data.vocab_size, m.hidden_size, m.n_layers, m.n_heads,
                          m.intermediate_size, m.base_window)
    vocab = pipe.pretrain.data.vocab_size
    if kind == "evaluation":
        longest = max(pipe.finetune.eval_multiples) * pipe.finetune.l_train
        tokens = torch.randint(0, vocab, (1, longest), generator=gen)

        @torch.no_grad()
        def forward() -> None:
            model(input_ids=tokens)

        return forward
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    if kind == "base":
        objective, batch = Objective(l_train=m.base_window), pipe.pretrain.optim.batch_size
    elif kind == "finetune":
        objective = Objective(l_train=pipe.finetune.l_train, alpha=0.1,
                              chunk_size=pipe.finetune.chunk_size)
        batch = pipe.finetune.optim.batch_size
    elif kind == "babilong":
        objective = Objective(l_train=pipe.babilong.l_train, ce_on="b")
        batch = pipe.babilong.optim.batch_size
    else:
        raise ValueError(f"unknown kind {kind!r}: one of {', '.join(KINDS)}")
    l_extra = objective.l_train // 2
    tokens = torch.randint(0, vocab, (batch, objective.l_train + l_extra), generator=gen)

    def step() -> float:
        loss = compute_loss(model, tokens, l_extra, objective)["loss"]
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return float(loss)

    return step


def child(profile: str, kind: str, threads: int, seconds: float) -> int:
    """The measuring process: warm up, say ``ready``, wait for ``go`` on stdin, then work for
    ``seconds`` and print ``{"units": n, "seconds": s}``."""
    import torch

    torch.set_num_threads(threads)
    work = unit(profile, kind)
    for _ in range(2):
        work()
    print("ready", flush=True)
    sys.stdin.readline()
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        work()
        n += 1
    print(json.dumps({"units": n, "seconds": time.perf_counter() - start}), flush=True)
    return 0


def child_result(what: str, args: list[str], threads: int,
                 env: dict[str, str] | None = None) -> dict[str, Any]:
    """What one measuring process of ``python -m lsa bench WHAT --child ARGS`` printed last (a
    JSON object), run alone with OpenMP told its ``threads``, in ``env`` (a whole environment;
    this process's by default); a failed child raises with the end of its stderr."""
    argv = [sys.executable, "-m", "lsa", "bench", what, "--child", *args]
    done = subprocess.run(argv, capture_output=True, text=True,
                          env={**(os.environ if env is None else env),
                               "OMP_NUM_THREADS": str(threads)})
    if done.returncode:
        raise RuntimeError(f"bench {what} {' '.join(args)} failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _run_together(profile: str, kind: str, threads: list[int], seconds: float) -> list[float]:
    """Rates (units per second) of ``len(threads)`` measuring processes started together."""
    argv = [sys.executable, "-m", "lsa", "bench", "jobs", "--child", "--profile", profile,
            "--kinds", kind, "--seconds", str(seconds)]
    # OpenMP told the same thread count as torch, as Snakemake tells a job (a 2-thread torch
    # under OMP_NUM_THREADS=1 ran slower than the pipeline's own jobs do)
    procs = [subprocess.Popen(argv + ["--threads", str(t)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "OMP_NUM_THREADS": str(t)}) for t in threads]
    for p in procs:
        line = p.stdout.readline().strip()
        if line != "ready":
            raise RuntimeError(f"bench child for {kind} failed before measuring: {line!r}")
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    rates = []
    for p in procs:
        out, _ = p.communicate()
        if p.returncode:
            raise RuntimeError(f"bench child for {kind} exited {p.returncode}")
        rec = json.loads(out.strip().splitlines()[-1])
        rates.append(rec["units"] / rec["seconds"])
    return rates


def ratios(rates: dict[str, list[float]]) -> dict[str, float]:
    """``speedup_2t`` and ``pair`` (module docstring) from the rates of the three settings."""
    one = rates["alone_1t"][0]
    return {"speedup_2t": rates["alone_2t"][0] / one, "pair": sum(rates["pair_1t"]) / one}


def best_threads(r: dict[str, float]) -> int:
    """On 2 cores: 1 (two jobs at once) where the pair outworks the 2-thread job, else 2."""
    return 1 if r["pair"] > r["speedup_2t"] else 2


def bench(profile: str, kinds: tuple[str, ...] = KINDS, seconds: float = 10.0,
          progress: bool = True) -> dict[str, Any]:
    from tqdm.auto import tqdm

    out: dict[str, Any] = {}
    bar = tqdm(total=len(kinds) * len(SETTINGS), desc="bench jobs", disable=not progress)
    for kind in kinds:
        rates = {}
        for setting, threads in zip(SETTINGS, ([1], [2], [1, 1])):
            rates[setting] = _run_together(profile, kind, threads, seconds)
            bar.update()
        r = ratios(rates)
        out[kind] = {"units_per_s": rates, **r, "best_threads": best_threads(r)}
    bar.close()
    return out


def table(result: dict[str, Any]) -> str:
    lines = ["| kind | units/s, 1 thread | units/s, 2 threads | units/s, two 1-thread jobs "
             "(summed) | 2-thread speed-up | pair throughput | better on 2 cores |",
             "|---|---|---|---|---|---|---|"]
    for kind, r in result.items():
        u = r["units_per_s"]
        better = "two 1-thread jobs" if r["best_threads"] == 1 else "one 2-thread job"
        lines.append(f"| {kind} | {u['alone_1t'][0]:.2f} | {u['alone_2t'][0]:.2f} | "
                     f"{sum(u['pair_1t']):.2f} | {r['speedup_2t']:.2f}x | {r['pair']:.2f}x | "
                     f"{better} |")
    return "\n".join(lines) + "\n"


def commits_markdown(folder: Path, commits: dict[str, str]) -> str:
    """The tables of one machine's ``bench jobs`` at two commits, alternated over rounds: the
    files ``<label>-<round>.json`` in ``folder`` (``commits``: label -> commit, earlier first),
    each round's rates, then the later commit's rate over the earlier one's (means of the
    rounds) per kind and setting."""
    import json

    settings = ("alone_1t", "alone_2t", "pair_1t")
    rates: dict[tuple[str, str], list[list[float]]] = {}
    lines = ["| round | commit | kind | units/s, 1 thread | units/s, 2 threads | units/s, two "
             "1-thread jobs |", "|---|---|---|---|---|---|"]
    rounds = sorted({int(p.stem.split("-")[-1]) for p in folder.glob("*-*.json")})
    for number in rounds:
        for label, commit in commits.items():
            found = json.loads((folder / f"{label}-{number}.json").read_text())["kinds"]
            for kind, r in found.items():
                u = [r["units_per_s"][k][0] if k != "pair_1t" else sum(r["units_per_s"][k])
                     for k in settings]
                rates.setdefault((label, kind), []).append(u)
                lines.append(f"| {number} | `{commit}` | {kind} | "
                             + " | ".join(f"{x:.2f}" for x in u) + " |")
    first, last = list(commits)
    lines += ["", "The later commit's rate over the earlier one's (means of the rounds):", "",
              "| kind | 1 thread | 2 threads | two 1-thread jobs (the pipeline's setting) |",
              "|---|---|---|---|"]
    for kind in sorted({k for _, k in rates}, key=[k for _, k in rates].index):
        mean = {label: [sum(col) / len(col) for col in zip(*rates[(label, kind)])]
                for label in (first, last)}
        lines.append(f"| {kind} | " + " | ".join(
            f"{b / a:.3f}x" for a, b in zip(mean[first], mean[last])) + " |")
    return "\n".join(lines)


SCHEDULE = """How `workflow/settings.yaml` uses it on 2 cores: every kind but the base model runs
at 1 thread, two jobs at once (`pair` above `speedup_2t`). The base model is the job every
other run waits for, and only the synthetic study could run beside it: at 1 thread it would
take `speedup_2t` times as long while the second core, once the synthetic study is done, had
nothing to do, so it keeps both cores and goes first. A unit's rate is measured on random
tokens at the profile's shapes; the pipeline's own times are in `python -m lsa timings`.
"""


def markdown(profile: str, result: dict[str, Any], seconds: float) -> str:
    return (f"# Job throughput, profile `{profile}`\n\nMeasured in one run by `python -m lsa "
            f"bench jobs --profile {profile}` ({os.cpu_count()} CPUs; {seconds:g} s per "
            f"setting; lsa/throughput.py says what a unit is).\n\n" + table(result) + "\n"
            + SCHEDULE)


def main(args) -> int:
    kinds = tuple(args.kinds.split(",")) if args.kinds else KINDS
    if args.child:
        return child(args.profile or "mini", kinds[0], args.threads or 1, args.seconds)
    from lsa import paths
    from lsa.files import device_info, package_versions, write_json

    profile = args.profile or "mini"
    result = bench(profile, kinds, args.seconds)
    out = Path(args.out) if args.out else (paths.output_root() / "results" / "bench" /
                                           f"jobs-{profile}.json")
    write_json(out, {"profile": profile, "seconds_per_setting": args.seconds, "kinds": result,
                     "device": device_info(), "packages": package_versions(),
                     "cpu_count": os.cpu_count()})
    text = markdown(profile, result, args.seconds)
    from lsa.files import write_page

    write_page(out.with_suffix(".md"), "bench-jobs", text)  # its prose kept
    print(text)
    print(f"written to {out} and {out.with_suffix('.md')}")
    return 0
