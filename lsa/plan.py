"""What a profile's jobs will need before any of them runs (``python -m lsa plan``): per job,
its model's parameters, the GPU memory it peaks at, its FLOPs and a range of GPU-hours, beside
the GPUs, GPU memory and wall-time limit ``workflow/settings.yaml`` claims for it.

Everything here is arithmetic on the configuration, no torch and no GPU:

- **Parameters** in closed form from the architecture (``llama_parameters``; a test holds it
  equal to a Llama built on the meta device): a scratch model's from ``pretrain.model``, a
  downloaded one's from its ``config.json`` when it is local or in the hub's cache, else from
  ``plan.architectures`` in ``workflow/settings.yaml`` (its published values, written there).
- **Memory** per GPU (``train_memory``, ``eval_memory``): a full fine-tune keeps fp32 master
  weights, gradients and two AdamW moments (16 bytes a parameter) plus autocast's bf16 copy (2),
  sharded over its processes by FSDP (``workflow/accelerate/fsdp.yaml``); LoRA keeps the frozen
  base (NF4: half a byte a linear weight, the embeddings in bf16) and 16 bytes per adapter
  parameter; activations are Korthikanti et al. (2022)'s 34 bytes per token and width per layer
  with memory-efficient attention (no s^2 term), only one layer's worth plus each layer's input
  under gradient checkpointing; logits 12 bytes per token and vocabulary entry (fp32 logits,
  log-probabilities, gradient); then 1 GiB of CUDA context and 10 % for the allocator. An
  estimate to plan with, not a measurement: ``scripts/gpu_check.sh`` measures the peak.
- **FLOPs** (Kaplan et al. 2020): a trained token costs 6 N (forward 2 N, backward 4 N; LoRA:
  4 N, no weight gradients of the frozen base) plus 2 N more under gradient checkpointing (the
  forward again), and causal attention 6 * layers * context * width; an evaluated token 2 N plus
  2 * layers * context * width; N counts the matrix weights (the embedding lookup is free, the
  output layer is not). Greedy decoding is bound by memory and per-step overhead, not FLOPs: a
  decoding step costs ``plan.decode_step_s``, shared by a batch.
- **Time** = FLOPs / ``plan.tflops`` (effective TFLOP/s per GPU, an assumption stated with its
  source in ``workflow/settings.yaml``) + decoding steps x ``plan.decode_step_s``; a range from
  the assumption's two ends. The wall time of a job of P processes is its GPU-hours / P.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsa.config import PipelineConfig
from lsa.runs import runs_of

GIB = 2**30
CONTEXT_BYTES = GIB          # CUDA context and cuBLAS workspaces, per GPU
ALLOCATOR = 1.10             # fragmentation of PyTorch's caching allocator
FIT_SHARE = 0.90             # a job fits when its estimate stays under this share of the GPU
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


@dataclass(frozen=True)
class Architecture:
    """A Llama-family decoder, as ``transformers.LlamaConfig`` describes it."""

    vocab_size: int
    hidden_size: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    intermediate_size: int
    tie_embeddings: bool
    source: str = "configuration"

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.n_heads


def llama_parameters(arch: Architecture) -> dict[str, int]:
    """Parameters of a Llama in closed form: ``embedding``, ``layers`` (attention: q and o of
    width^2, k and v of width x kv width; SwiGLU MLP: 3 x width x intermediate; two RMSNorms),
    ``head`` (the output layer; 0 when tied to the embedding), ``total``, and ``matmul``, the
    weights a token multiplies (everything but the embedding lookup; a tied head counts)."""
    h, kv = arch.hidden_size, arch.n_kv_heads * arch.head_dim
    per_layer = 2 * h * h + 2 * h * kv + 3 * h * arch.intermediate_size + 2 * h
    embedding = arch.vocab_size * h
    head = 0 if arch.tie_embeddings else arch.vocab_size * h
    layers = arch.n_layers * per_layer
    total = embedding + layers + h + head
    return {"embedding": embedding, "layers": layers, "head": head, "total": total,
            "matmul": layers + arch.vocab_size * h, "linear": layers - arch.n_layers * 2 * h}


def lora_parameters(arch: Architecture, r: int) -> int:
    """LoRA adapters of rank ``r`` on every linear layer of the decoder (peft's
    ``all-linear``: q, k, v, o, gate, up, down): r x (in + out) each."""
    h, kv, inter = arch.hidden_size, arch.n_kv_heads * arch.head_dim, arch.intermediate_size
    per_layer = r * ((h + h) * 2 + (h + kv) * 2 + (h + inter) * 3)
    return arch.n_layers * per_layer


def architecture(pipe: PipelineConfig, known: dict[str, dict[str, Any]] | None = None
                 ) -> Architecture:
    """The base model's architecture: ``pretrain.model`` for a scratch model; a downloaded
    model's ``config.json`` when it is a local folder or in the hub's cache (no network); else
    ``known`` (``plan.architectures`` of ``workflow/settings.yaml``), keyed by the hub id or
    ``smollm2``."""
    m = pipe.pretrain.model
    if m.source == "scratch":
        return Architecture(pipe.pretrain.data.vocab_size, m.hidden_size, m.n_layers, m.n_heads,
                            m.n_kv_heads or m.n_heads, m.intermediate_size, True)
    key = "smollm2" if m.source == "smollm2" else str(m.name_or_path)
    config = _cached_config(key) if m.source == "pretrained" else None
    if config is not None:
        return Architecture(config["vocab_size"], config["hidden_size"],
                            config["num_hidden_layers"], config["num_attention_heads"],
                            config.get("num_key_value_heads") or config["num_attention_heads"],
                            config["intermediate_size"],
                            bool(config.get("tie_word_embeddings", False)), "its config.json")
    if known and key in known:
        a = known[key]
        return Architecture(a["vocab_size"], a["hidden_size"], a["n_layers"], a["n_heads"],
                            a.get("n_kv_heads") or a["n_heads"], a["intermediate_size"],
                            bool(a.get("tie_embeddings", False)),
                            "workflow/settings.yaml (plan.architectures)")
    raise KeyError(f"the architecture of {key!r} is unknown here: neither a local config.json "
                   "nor an entry under plan.architectures in workflow/settings.yaml")


def _cached_config(name_or_path: str) -> dict[str, Any] | None:
    """A model's ``config.json`` from its folder or the hub's cache, without the network."""
    import json

    folder = Path(name_or_path).expanduser()
    if (folder / "config.json").is_file():
        return json.loads((folder / "config.json").read_text())
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - a dependency of transformers
        return None
    try:
        found = try_to_load_from_cache(name_or_path, "config.json")
    except Exception:  # noqa: BLE001 - an id the hub would reject: not cached
        return None
    return json.loads(Path(found).read_text()) if isinstance(found, str) else None


# ---------------------------------------------------------------------------------------------
# memory


def activation_bytes(arch: Architecture, tokens: int, checkpointing: bool, act_bytes: int = 2
                     ) -> float:
    """Activations kept for the backward pass of ``tokens`` tokens (all sequences of a
    micro-batch together): 34 bytes x width per token and layer (Korthikanti et al. 2022,
    16-bit, memory-efficient attention), under checkpointing one layer of it plus every
    layer's input; and the logits, 12 bytes per token and vocabulary entry."""
    h = arch.hidden_size
    layer = 34 * tokens * h
    kept = (layer + arch.n_layers * tokens * h * act_bytes) if checkpointing \
        else arch.n_layers * layer
    return kept + 12 * tokens * arch.vocab_size


def train_memory(arch: Architecture, *, micro_batch: int, seq: int, windows: int,
                 checkpointing: bool, processes: int = 1, lora_r: int | None = None,
                 quantized: bool = False, weight_bytes: int = 2) -> dict[str, float]:
    """Peak GPU memory of one training process, bytes by part (``total`` with the context and
    the allocator's share): a full fine-tune shards weights, gradients and AdamW moments over
    ``processes`` (FSDP); LoRA (``lora_r``) keeps the frozen base, NF4 when ``quantized``."""
    n = llama_parameters(arch)
    if lora_r is None:
        # fp32 master weights 4 + gradients 4 + AdamW moments 8 + autocast's bf16 copy 2
        states = 18 * n["total"] / processes
        gathered = 4 * n["layers"] / arch.n_layers if processes > 1 else 0  # one layer, whole
        parts = {"weights_and_optimizer": states, "gathered_layer": gathered}
    else:
        frozen_linear = n["linear"]
        other = n["total"] - frozen_linear
        base = (0.5 * frozen_linear + 2 * other) if quantized else weight_bytes * n["total"]
        parts = {"frozen_base": base, "adapters_and_optimizer": 16 * lora_parameters(arch, lora_r)}
    parts["activations"] = activation_bytes(arch, micro_batch * seq * windows, checkpointing)
    parts["total"] = (sum(parts.values()) + CONTEXT_BYTES) * ALLOCATOR
    return parts


def eval_memory(arch: Architecture, *, batch: int, seq: int, quantized: bool = False,
                weight_bytes: int = 2, generate: bool = False) -> dict[str, float]:
    """Peak GPU memory of a forward-only job at length ``seq`` with ``batch`` sequences: the
    weights, one layer's transient activations, the logits (fp32; generation keeps only the
    last position's) and, generating, the key/value cache (16-bit)."""
    n = llama_parameters(arch)
    weights = (0.5 * n["linear"] + 2 * (n["total"] - n["linear"])) if quantized \
        else weight_bytes * n["total"]
    tokens = batch * seq
    layer = tokens * (4 * arch.hidden_size + 3 * arch.intermediate_size) * 2
    logits = 4 * arch.vocab_size * (batch if generate else tokens)
    kv = 2 * arch.n_layers * arch.n_kv_heads * arch.head_dim * tokens * 2 if generate else 0
    parts = {"weights": weights, "activations": layer, "logits": logits, "kv_cache": kv}
    parts["total"] = (sum(parts.values()) + CONTEXT_BYTES) * ALLOCATOR
    return parts


# ---------------------------------------------------------------------------------------------
# FLOPs


def train_flops(arch: Architecture, tokens: float, seq: int, lora: bool = False,
                checkpointing: bool = False) -> float:
    """FLOPs of training on ``tokens`` tokens at context ``seq``: (6 N, LoRA 4 N; + 2 N with
    checkpointing) per token, N the matrix weights, plus causal attention."""
    n = llama_parameters(arch)["matmul"]
    per_token = (4 if lora else 6) * n + (2 * n if checkpointing else 0)
    attention = (8 if checkpointing else 6) * arch.n_layers * seq * arch.hidden_size
    return tokens * (per_token + attention)


def eval_flops(arch: Architecture, tokens: float, seq: int) -> float:
    """FLOPs of a forward pass over ``tokens`` tokens at context ``seq``."""
    n = llama_parameters(arch)["matmul"]
    return tokens * (2 * n + 2 * arch.n_layers * seq * arch.hidden_size)


# ---------------------------------------------------------------------------------------------
# one estimate per job


@dataclass
class JobPlan:
    """One job's estimate beside its claim."""

    rule: str
    kind: str
    name: str
    processes: int
    gpus: int
    gpu_mem_gb: float | None
    runtime_min: int
    memory_bytes: float
    flops: float
    decode_steps: int
    gpu_hours: tuple[float, float]
    notes: str = ""

    @property
    def memory_gib(self) -> float:
        return self.memory_bytes / GIB

    @property
    def fits(self) -> bool | None:
        """Whether the estimate stays under ``FIT_SHARE`` of the claimed GPU (None: no GPU
        memory claimed, nothing to check)."""
        if not self.gpus or self.gpu_mem_gb is None:
            return None
        return self.memory_bytes <= FIT_SHARE * self.gpu_mem_gb * 1e9

    @property
    def wall_hours(self) -> tuple[float, float]:
        share = max(self.processes, 1)
        return self.gpu_hours[0] / share, self.gpu_hours[1] / share

    @property
    def runtime_ok(self) -> bool:
        return self.wall_hours[1] * 60 <= self.runtime_min


def _hours(flops: float, decode_steps: int, assumptions) -> tuple[float, float]:
    lo_t, hi_t = assumptions.tflops
    lo_d, hi_d = assumptions.decode_step_s
    fast = flops / (hi_t * 1e12) + decode_steps * lo_d
    slow = flops / (lo_t * 1e12) + decode_steps * hi_d
    return fast / 3600, slow / 3600


def _eval_tokens(pipe: PipelineConfig, l_train: int, lengths: list[int]) -> tuple[float, int]:
    """Tokens the fine-tuning protocol (``lsa.jobs.lm_metrics``) reads, and its longest
    length: perplexity (every length on the same tokens), the misalignment metric (two windows
    a sample), the copy probes (with their control) and the training CE."""
    ft = pipe.finetune
    longest = max(lengths)
    tokens = ft.eval_max_chunks * longest * len(lengths)
    tokens += ft.metric_samples * 2 * l_train + ft.metric_samples * l_train
    tokens += ft.copy_probes * 2 * sum(lengths)
    return tokens, longest


def longbench_data(pipe: PipelineConfig, assumptions) -> tuple[dict[str, int], dict[str, int]]:
    """What the LongBench-E job will answer, per dataset: the prompts its file holds (the tiny
    fixture's for ``data_dir: fixture``, written to a temporary folder to be counted), else the
    stated ``plan.longbench_samples`` where the file is not at hand, at most ``limit``; and the
    answer lengths of its ``dataset2maxlen.json`` where it is at hand (a dataset not in it
    counts ``MAX_NEW_TOKENS``, the longest: an upper bound)."""
    import json
    import tempfile

    from lsa.evaluate.longbench import data_folder, write_fixture

    lb = pipe.longbench

    def read(folder: Path | None) -> tuple[dict[str, int], dict[str, int]]:
        counts = {}
        for dataset in lb.datasets:
            path = folder / f"{dataset}_e.jsonl" if folder else None
            count = assumptions.longbench_samples
            if path is not None and path.is_file():
                with path.open("rb") as handle:
                    count = sum(1 for line in handle if line.strip())
            counts[dataset] = min(count, lb.limit) if lb.limit else count
        table = folder / "dataset2maxlen.json" if folder else None
        try:
            maxlen = json.loads(table.read_text()) if table and table.is_file() else {}
        except ValueError:
            maxlen = {}
        return counts, {k: v for k, v in maxlen.items() if isinstance(v, int)}

    if lb.enabled and lb.data_dir == "fixture":
        with tempfile.TemporaryDirectory() as tmp:
            return read(write_fixture(Path(tmp)))
    return read(data_folder(lb))


MAX_NEW_TOKENS = 512  # LongBench's longest answer (gov_report, multi_news)
#: the methods whose models cannot be left-padded safely (``lsa.evaluate.pads_safely``, read
#: off a built model; tests/unit/evaluate/test_longbench_batches.py holds the two equal):
#: LongBench-E decodes them one prompt at a time
DECODED_ALONE = frozenset({"dynamic", "longqlora", "eabf", "clex"})


def plan_profile(pipe: PipelineConfig, settings=None) -> list[JobPlan]:
    """A ``JobPlan`` per run job of the profile, in the order ``runs_of`` lists them."""
    from lsa.pipeline import rule_name, workflow_settings

    settings = settings or workflow_settings()
    assumptions = settings.plan_for(pipe.profile)
    arch = architecture(pipe, settings.plan.architectures)
    m, ft = pipe.pretrain.model, pipe.finetune
    weight_bytes = DTYPE_BYTES[m.dtype]
    out = []
    runs = runs_of(pipe)
    prompts, maxlen = longbench_data(pipe, assumptions) if runs.longbench else ({}, {})
    for run in runs:
        job = settings.run_job(pipe.profile, run)
        res = settings.resources(pipe.profile, run.kind)
        flops, steps, notes = 0.0, 0, ""
        if run.kind == "base":
            l0 = m.base_window
            lengths = [l0, 2 * l0]
            if m.source == "scratch":
                o = pipe.pretrain.optim
                tokens = o.steps * o.batch_size * o.grad_accum * l0
                flops += train_flops(arch, tokens, l0, checkpointing=o.gradient_checkpointing)
                mem = train_memory(arch, micro_batch=o.batch_size, seq=l0, windows=1,
                                   checkpointing=o.gradient_checkpointing,
                                   weight_bytes=weight_bytes)["total"]
            else:
                mem = eval_memory(arch, batch=1, seq=2 * l0, quantized=m.load_in_4bit,
                                  weight_bytes=weight_bytes)["total"]
                notes = "evaluated only"
            flops += eval_flops(arch, pipe.pretrain.eval_max_chunks * 2 * l0 * 2, 2 * l0)
        elif run.kind in ("finetune", "babilong"):
            spec = run.spec
            if run.kind == "finetune":
                l_train, o = ft.l_train_of(spec), ft.optim
                lengths = ft.eval_lengths(spec)
            else:
                l_train, o = pipe.babilong.l_train, pipe.babilong.optim
                lengths = [k * l_train for k in pipe.babilong.eval_multiples]
            lora = spec.method == "longqlora"
            quantized = lora and ft.use_4bit
            windows = 2 if (spec.alpha > 0 or spec.ce_on == "both") else 1
            steps_ = spec.steps or o.steps
            tokens = steps_ * o.batch_size * o.grad_accum * l_train * windows
            flops += train_flops(arch, tokens, l_train, lora=lora,
                                 checkpointing=o.gradient_checkpointing)
            mem = train_memory(arch, micro_batch=o.batch_size, seq=l_train, windows=windows,
                               checkpointing=o.gradient_checkpointing,
                               processes=run.processes, lora_r=ft.lora_r if lora else None,
                               quantized=quantized, weight_bytes=weight_bytes)["total"]
            ev, longest = _eval_tokens(pipe, l_train, lengths)
            flops += eval_flops(arch, ev, longest)
            mem = max(mem, eval_memory(arch, batch=1, seq=longest, quantized=quantized,
                                       weight_bytes=weight_bytes)["total"])
            notes = (f"{'LoRA' + (' NF4' if quantized else '') if lora else 'full'}, "
                     f"{windows} window{'s' if windows > 1 else ''} of {l_train}")
        elif run.kind == "probe":
            lengths = [k * ft.l_train for k in ft.eval_multiples]
            ev, longest = _eval_tokens(pipe, ft.l_train, lengths)
            flops += eval_flops(arch, ev, longest)
            mem = eval_memory(arch, batch=1, seq=longest, weight_bytes=weight_bytes)["total"]
        elif run.kind == "babilong-eval":
            b = pipe.babilong
            samples = [(n, b.test_samples * len(b.tasks)) for n in b.eval_lengths]
            samples.append((b.eval_depth_length, b.test_samples * len(b.eval_depths)))
            for length, count in samples:
                flops += eval_flops(arch, length * count, length)
                steps += math.ceil(count / b.eval_batch_size) * b.eval_max_new_tokens
            longest = max(n for n, _ in samples)
            mem = eval_memory(arch, batch=b.eval_batch_size, seq=longest,
                              weight_bytes=weight_bytes, generate=True)["total"]
            notes = f"{sum(c for _, c in samples)} prompts"
        elif run.kind == "longbench":
            lb = pipe.longbench
            batch = 1 if run.spec.method in DECODED_ALONE else lb.batch_size
            total = 0
            for dataset in lb.datasets:
                count = prompts[dataset]
                total += count
                new = maxlen.get(dataset, MAX_NEW_TOKENS)
                # prompts cut to max_length: the budget is an upper bound of each prompt
                flops += eval_flops(arch, count * (lb.max_length + new), lb.max_length + new)
                steps += math.ceil(count / batch) * new
            mem = eval_memory(arch, batch=batch, seq=lb.max_length + MAX_NEW_TOKENS,
                              weight_bytes=weight_bytes, generate=True)["total"]
            notes = f"{total} prompts, batch {batch}"
        elif run.kind == "synthetic":  # tiny regression models, in CPU processes
            mem = 0.0
            notes = "Section 3's small models, on the CPU"
        else:  # pragma: no cover - every kind is handled above
            raise ValueError(run.kind)
        out.append(JobPlan(rule_name(run), run.kind, run.name, run.processes, job.gpu,
                           res.gpu_mem_gb, job.runtime, mem, flops, steps,
                           _hours(flops, steps, assumptions), notes))
    return out


def problems(plans: list[JobPlan]) -> list[str]:
    """The jobs whose estimate does not fit the GPU they claim (pre-flight stops on them)."""
    out = []
    for p in plans:
        if p.fits is False:
            out.append(f"{p.kind} {p.name}: needs about {p.memory_gib:.0f} GiB per GPU by the "
                       f"plan's estimate, more than {FIT_SHARE:.0%} of the {p.gpu_mem_gb:g} GB "
                       f"GPU{'s' if p.gpus > 1 else ''} it claims (workflow/settings.yaml, "
                       f"gpu_mem_gb): train it on more processes (finetune.method_processes or "
                       f"a run's processes) or claim a larger GPU (python -m lsa plan)")
    return out


def markdown(pipe: PipelineConfig, plans: list[JobPlan], settings=None) -> str:
    """The plan as Markdown tables: every job, then totals per kind and for the profile."""
    from lsa.pipeline import workflow_settings

    settings = settings or workflow_settings()
    a = settings.plan_for(pipe.profile)
    arch = architecture(pipe, settings.plan.architectures)
    n = llama_parameters(arch)
    lines = [f"# Plan of profile {pipe.profile}", "",
             f"Model: {n['total'] / 1e6:,.1f}M parameters (architecture from {arch.source}); "
             f"{len(plans)} run jobs.",
             f"Assumed, not measured: {a.tflops[0]:g}-{a.tflops[1]:g} effective TFLOP/s per "
             f"GPU, {a.decode_step_s[0]:g}-{a.decode_step_s[1]:g} s per greedy decoding step "
             f"({a.source}). Memory: an estimate (lsa/plan.py), fit = under "
             f"{FIT_SHARE:.0%} of the claimed GPU.", "",
             "| job | kind | GPUs | GPU GB | est. GiB/GPU | fits | TFLOP | GPU-h | wall h "
             "| limit h | |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for p in plans:
        fits = {None: "-", True: "yes", False: "**no**"}[p.fits]
        limit = f"{p.runtime_min / 60:g}" + ("" if p.runtime_ok else " **short**")
        lines.append(f"| {p.name} | {p.kind} | {p.gpus} | {p.gpu_mem_gb or '-'} | "
                     f"{p.memory_gib:.1f} | {fits} | {p.flops / 1e12:,.0f} | "
                     f"{p.gpu_hours[0]:.2f}-{p.gpu_hours[1]:.2f} | "
                     f"{p.wall_hours[0]:.2f}-{p.wall_hours[1]:.2f} | {limit} | {p.notes} |")
    lines += ["", "| kind | jobs | GPU-h | longest wall h | runtime limit h | peak GiB/GPU |",
              "|---|---|---|---|---|---|"]
    for kind in dict.fromkeys(p.kind for p in plans):
        group = [p for p in plans if p.kind == kind]
        lo = sum(p.gpu_hours[0] for p in group)
        hi = sum(p.gpu_hours[1] for p in group)
        wall = max(p.wall_hours[1] for p in group)
        limit = max(p.runtime_min for p in group) / 60
        lines.append(f"| {kind} | {len(group)} | {lo:.1f}-{hi:.1f} | {wall:.2f} | {limit:g} | "
                     f"{max(p.memory_gib for p in group):.1f} |")
    lo, hi = sum(p.gpu_hours[0] for p in plans), sum(p.gpu_hours[1] for p in plans)
    lines += ["", f"Profile total: {lo:.1f}-{hi:.1f} GPU-hours for the run jobs (the section "
                  "notebooks read files and plot; the synthetic study runs on CPU workers)."]
    return "\n".join(lines) + "\n"
