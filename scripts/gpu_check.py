"""The GPU check: one short script for the day a GPU is lent (run by ``scripts/gpu_check.sh``;
``python scripts/gpu_check.py --tiny`` runs its CPU path, which
tests/workflow/test_gpu_check.py tests).

On one GPU, within minutes and without network: pretrain the ``gpu-small`` base model briefly
(bf16), extend it LongQLoRA-style (PI + LoRA + S2) for a few steps with CE only and with
CE + 0.1 SCE, measure tokens/s (the tokens each arm runs through the model) and peak memory of
both, load the base in NF4 4-bit when bitsandbytes is installed (said so when it is not), and
evaluate perplexity at 2x and 4x the window. ``--tiny`` runs the same path with toy sizes on a
CPU (tests).

``misalign_cost`` measures the regularizer's cost as ``python -m lsa bench misalign`` does
(lsa/bench.py), at ``gpu-small``'s step (its model, 8 x 1024 tokens per window, overlap 768)
and at a Llama-2-7B-like loss shape (hidden 4096, vocabulary 32000, windows of 8192): step time
and peak memory of CE + 0.1 SCE against CE on both windows (equal tokens, the paper's
comparison) and against CE on window A (equal sequences), each arm's tokens and tokens per
second; on a GPU in bf16, timed by CUDA events after a warm-up step, the arms interleaved,
``repeats`` times, with one profiled step of each kept as a Chrome trace.

``--jobs`` then runs one job of each kind ``gpu-small`` has (``job_kinds``: the base model, a
CLEX fine-tuning run with CE + 0.1 SCE, its BABILong and LongBench-E evaluations, a probe) as
the pipeline runs them (``lsa.jobs``), at the profile's shapes (model, windows, batch sizes,
lengths) with ``steps`` optimizer steps and the fewest evaluation samples, with the
pre-flight first, and reads each job's wall time and peak GPU memory beside the plan's estimate
(``lsa.plan``). Without the benchmark files it writes stand-ins (not the benchmarks' text: their
format only) and says so.
"""

from __future__ import annotations

import argparse
import json
import time
import traceback
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch


def _timed_steps(model, stream, objective, optim, seed: int, steps: int) -> dict[str, float]:
    """Tokens/s and peak memory of ``steps`` optimizer steps (after one warm-up step); the
    tokens are those the step runs through the model (window A alone for CE on it, windows A
    and B with the regularizer), not the ``l_extra`` tokens a batch also holds."""
    from lsa.train import compute_loss, step_batch

    device = next(model.parameters()).device
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=optim.lr)
    model.train()
    tokens = 0
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    for i in range(steps + 1):
        if i == 1:
            if device.type == "cuda":
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
            start, tokens = time.perf_counter(), 0
        batch, l_extra, _ = step_batch(stream, seed, i, 0, optim.batch_size, objective)
        batch = batch.to(device)
        with torch.autocast(device.type, dtype=dtype, enabled=device.type == "cuda"):
            parts = compute_loss(model, batch, l_extra, objective)
        parts["loss"].backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        tokens += batch.shape[0] * objective.l_train * (2 if objective.needs_windows else 1)
    if device.type == "cuda":
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    out = {"tokens_per_s": tokens / elapsed, "step_s": elapsed / steps}
    if device.type == "cuda":
        out["peak_gib"] = torch.cuda.max_memory_allocated() / 2**30
    return out


def _bf16_vs_fp32(model, stream, objective, seed: int = 7) -> dict[str, dict[str, float]]:
    """CE and the misalignment term of one batch in fp32 and under bf16 autocast (no
    gradient): how far bf16 moves the regularizer the paper adds."""
    from lsa.train import compute_loss, step_batch

    device = next(model.parameters()).device
    batch, l_extra, _ = step_batch(stream, seed, 0, 0, 2, objective)
    batch = batch.to(device)
    model.eval()
    out: dict[str, dict[str, float]] = {}
    with torch.no_grad():
        fp32 = compute_loss(model, batch, l_extra, objective)
        with torch.autocast(device.type, dtype=torch.bfloat16):
            bf16 = compute_loss(model, batch, l_extra, objective)
    for key in ("ce", "misalign"):
        out[key] = {"fp32": fp32[key], "bf16": bf16[key],
                    "relative": abs(bf16[key] - fp32[key]) / max(abs(fp32[key]), 1e-12)}
    return out


def run(profile: str = "gpu-small", tiny: bool = False, pretrain_steps: int = 300,
        steps: int = 10, out: Path | None = None) -> dict[str, Any]:
    from lsa.config import load_config
    from lsa.data.corpus import prepare_corpus
    from lsa.evaluate.perplexity import perplexity
    from lsa.extend import load_for_method, method_spec
    from lsa.files import device_info
    from lsa.models import count_parameters, scratch_llama
    from lsa.train import LoraSettings, Objective, apply_lora, train

    pipe = load_config(profile="smoke" if tiny else profile)
    pcfg, fcfg = pipe.pretrain, pipe.finetune
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    report: dict[str, Any] = {"device": device_info(), "profile": pipe.profile}
    t0 = time.time()
    corpus = prepare_corpus(pcfg.data)
    report["corpus_s"] = round(time.time() - t0, 1)
    m = pcfg.model
    eos = corpus.tokenizer.convert_tokens_to_ids(corpus.tokenizer.eos_token)
    model = scratch_llama(len(corpus.tokenizer), m.hidden_size, m.n_layers, m.n_heads,
                          m.intermediate_size, m.base_window, m.rope_theta, eos).to(device)
    report["parameters"] = count_parameters(model)
    work = Path(out or "gpu_check_runs")
    t0 = time.time()
    optim = replace(pcfg.optim, steps=pretrain_steps if not tiny else 3, save_every=0,
                    warmup_steps=min(pcfg.optim.warmup_steps, 2), bf16=True)
    train(model, corpus.streams["train"], work / "base", optim,
          Objective(l_train=m.base_window), seed=0, progress=False)
    report["pretrain"] = {"steps": optim.steps, "wall_s": round(time.time() - t0, 1)}
    model.save_pretrained(work / "base_model")
    l_train = fcfg.l_train
    spec = method_spec("longqlora", m.base_window, l_train, m.rope_theta,
                       m.hidden_size // m.n_heads)
    cost = {}
    for name, alpha in (("ce", 0.0), ("ce+0.1sce", 0.1)):
        ext = load_for_method(str(work / "base_model"), "longqlora", m.base_window, l_train,
                              spec=spec).to(device)
        ext = apply_lora(ext, LoraSettings(r=fcfg.lora_r, alpha=fcfg.lora_alpha))
        cost[name] = _timed_steps(ext, corpus.streams["train"], Objective(l_train, alpha=alpha),
                                  replace(fcfg.optim, lr=fcfg.lora_lr), 0,
                                  steps if not tiny else 2)
        if alpha:
            ext.eval()
            lengths = [2 * l_train, 4 * l_train]
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
                report["perplexity_after_regularized_steps"] = {
                    k: v["ppl"] for k, v in perplexity(ext, corpus.streams["test"], lengths,
                                                       max_chunks=8).items()}
    cost["time_ratio_equal_sequences"] = cost["ce+0.1sce"]["step_s"] / cost["ce"]["step_s"]
    report["longqlora_cost"] = cost
    report["bf16_vs_fp32"] = _bf16_vs_fp32(ext, corpus.streams["test"], Objective(l_train,
                                                                                  alpha=0.1))
    try:
        import bitsandbytes  # noqa: F401
    except ImportError:
        report["nf4"] = "bitsandbytes is not installed here: NF4 4-bit not checked"
    else:
        if device.type != "cuda":
            report["nf4"] = "no CUDA device: NF4 4-bit not checked"
        else:  # the paper profile's LongQLoRA as lsa.models.build_for_run builds it
            from lsa.models import nf4_kwargs

            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
            spec4 = replace(spec, quantize_4bit=True)
            q = load_for_method(str(work / "base_model"), "longqlora", m.base_window, l_train,
                                spec=spec4, dtype=torch.bfloat16, **nf4_kwargs())
            weights_gib = torch.cuda.memory_allocated() / 2**30
            q = apply_lora(q, LoraSettings(r=fcfg.lora_r, alpha=fcfg.lora_alpha), quantized=True)
            steps4 = _timed_steps(q, corpus.streams["train"], Objective(l_train, alpha=0.1),
                                  replace(fcfg.optim, lr=fcfg.lora_lr), 0, steps)
            ids = corpus.streams["test"].chunks(l_train, 2).to(device)
            with torch.no_grad():
                logits = q(input_ids=ids).logits.float()
            report["nf4"] = {
                "bitsandbytes": bitsandbytes.__version__, "weights_gib": weights_gib,
                "qlora_ce+0.1sce": steps4, "logits_finite": bool(torch.isfinite(logits).all())}
    report["wall_s"] = round(time.time() - t0, 1)
    return report


def misalign_cost(profile: str = "gpu-small", repeats: int = 5, traces: Path | None = None,
                  tiny: bool = False) -> dict[str, Any]:
    """The regularizer's cost at ``profile``'s step and the 7B-like loss shape (``--tiny``: the
    bench's toy shape, for tests), both ratios per shape (module docstring); the traces'
    paths relative to the repository."""
    from lsa.bench import LARGE, QUICK, add_ratios, bench_shape, profile_shape
    from lsa.config import load_config

    shapes = dict(QUICK) if tiny else {profile: profile_shape(load_config(profile=profile)),
                                       **LARGE}
    out: dict[str, Any] = {}
    for name, shape in shapes.items():
        result = add_ratios(bench_shape(shape, repeats, trace=traces))
        if "trace" in result:
            result["trace"] = _relative(result["trace"])
        out[name] = result
    return out


def _relative(path) -> str:
    """``path`` relative to the repository (never absolute in the report)."""
    import os

    return os.path.relpath(Path(path).resolve(), ROOT)


ROOT = Path(__file__).resolve().parents[1]


#: what job_kinds changes in a profile: steps and sample counts only, never a shape
def check_overrides(profile: str, steps: int = 1) -> dict[str, Any]:
    optim = {"steps": steps, "warmup_steps": 0, "save_every": 0}
    return {"profiles": {profile: {
        "pretrain": {"optim": optim, "eval_max_chunks": 1},
        "finetune": {"optim": optim, "eval_max_chunks": 1, "metric_samples": 1,
                     "copy_probes": 2},
        "babilong": {"test_samples": 1},
        "longbench": {"limit": 1}}}}


STANDIN_TEMPLATE = '{instruction} {examples} {post_prompt} {context} Question: {question}'


def write_standins(folder: Path, datasets: list[str], tasks: list[str]) -> Path:
    """Files in the benchmarks' formats (LongBench-E's tables and *_e.jsonl, BABILong's
    prompts.py) with placeholder text of ours, for a check without the real ones."""
    (folder / "longbench").mkdir(parents=True, exist_ok=True)
    (folder / "longbench" / "dataset2prompt.json").write_text(json.dumps(
        {d: "{context}\n\nQuestion: {input}\nAnswer:" for d in datasets}))
    (folder / "longbench" / "dataset2maxlen.json").write_text(json.dumps(
        {d: 4 for d in datasets}))
    row = {"input": "What is said?", "context": "Some words. " * 20, "answers": ["words"],
           "length": 40, "all_classes": None}
    for d in datasets:
        (folder / "longbench" / f"{d}_e.jsonl").write_text(json.dumps(row) + "\n")
    (folder / "babilong").mkdir(exist_ok=True)
    parts = '{"instruction": "Answer the question.", "examples": "", "post_prompt": "One word."}'
    (folder / "babilong" / "prompts.py").write_text(
        f"DEFAULT_TEMPLATE = {STANDIN_TEMPLATE!r}\nDEFAULT_PROMPTS = {{\n"
        + "".join(f"    {t!r}: {parts},\n" for t in tasks) + "}\n")
    return folder


def job_kinds(out: Path, profile: str = "gpu-small", steps: int = 1) -> dict[str, Any]:
    """One job of each kind of ``profile`` (see the module's docstring) into ``out``; per job
    its wall time, peak GPU memory and the plan's estimate; the pre-flight's findings first."""
    import os
    import shutil

    from lsa import plan, preflight
    from lsa.config import load_config
    from lsa.jobs import run_job
    from lsa.runs import runs_of

    out = Path(out)
    # never the repository's results/; emptied first, or a second check on the same machine
    # would find its jobs finished and time nothing
    shutil.rmtree(out / "outputs", ignore_errors=True)
    os.environ["LSA_OUTPUT_ROOT"] = str(out / "outputs")
    pipe = load_config(profile=profile, overrides=check_overrides(profile, steps))
    report: dict[str, Any] = {"steps": steps, "profile": profile}
    missing = preflight.check_data(pipe, hub=False)
    if any(m.startswith(("LongBench-E", "BABILong")) for m in missing):
        os.environ["LSA_DATA_DIR"] = str(write_standins(
            out / "standins", list(pipe.longbench.datasets), list(pipe.babilong.tasks)))
        report["benchmark_files"] = "stand-ins (python -m lsa fetch longbench babilong: real)"
        pipe = load_config(profile=profile, overrides=check_overrides(profile, steps))
    else:
        report["benchmark_files"] = "the fetched files"
    found = preflight.preflight(pipe, hub=False)
    report["preflight"] = {"problems": found.problems, "notes": found.notes}
    estimates = {(p.kind, p.name): p for p in plan.plan_profile(pipe)}
    runs = runs_of(pipe)
    finetuned = runs.get("finetune", "clex_a0.1_s0")
    chosen = [runs.base, finetuned,
              next(r for r in runs if r.kind == "babilong-eval" and r.needs[0] is finetuned),
              next(r for r in runs if r.kind == "longbench" and r.needs[0] is finetuned),
              next(r for r in runs if r.kind == "probe")]
    jobs = {}
    for run_ in chosen:
        cuda = torch.cuda.is_available()
        if cuda:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        started = time.time()
        run_job(pipe, run_, progress=False)
        est = estimates[(run_.kind, run_.name)]
        jobs[f"{run_.kind} {run_.name}"] = {
            "wall_s": round(time.time() - started, 1), "finished": run_.finished,
            "peak_gib": torch.cuda.max_memory_allocated() / 2**30 if cuda else None,
            "plan_gib": round(est.memory_gib, 2),
            "plan_gpu_hours_at_full_size": [round(h, 3) for h in est.gpu_hours]}
    report["jobs"] = jobs
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--profile", default="gpu-small")
    parser.add_argument("--tiny", action="store_true", help="toy sizes, CPU (tests)")
    parser.add_argument("--pretrain-steps", type=int, default=300)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--out", default="gpu_check_runs")
    parser.add_argument("--jobs", action="store_true",
                        help="then one job of each kind of the profile (job_kinds)")
    parser.add_argument("--job-steps", type=int, default=3)
    parser.add_argument("--cost-repeats", type=int, default=5,
                        help="repeats of each arm in misalign_cost")
    parser.add_argument("--traces", default="gpu_check_out/traces",
                        help="where misalign_cost's profiler traces go")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    # each part runs and is reported even when the other fails (a lent GPU is rarely lent twice)
    parts = {"quick": lambda: run(args.profile, args.tiny, args.pretrain_steps, args.steps, out),
             "misalign_cost": lambda: misalign_cost(args.profile, args.cost_repeats,
                                                    Path(args.traces), args.tiny)}
    if args.jobs:
        parts["job_kinds"] = lambda: job_kinds(out, args.profile, args.job_steps)
    report: dict[str, Any] = {"date": time.strftime("%Y-%m-%d"), "commit": _commit()}
    for name, part in parts.items():
        try:
            report[name] = part()
        except Exception:  # noqa: BLE001 - recorded in the report, the exit status says so
            report[name] = {"failed": traceback.format_exc()}
        (out / "gpu_check.json").write_text(json.dumps(report, indent=2, default=str))
    print(json.dumps(report, indent=2, default=str))
    return int(any("failed" in part for part in report.values() if isinstance(part, dict)))


def _commit() -> str | None:
    """The checkout's commit (None without git), with ``+changes`` when the tree differs."""
    import subprocess

    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("+changes" if dirty else "")


if __name__ == "__main__":
    raise SystemExit(main())
