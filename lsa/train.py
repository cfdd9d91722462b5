"""One training loop for every run: pretraining, context extension, ablations, BABILong tuning.

The loss of a step is ``CE + alpha * L_misalign`` (``lsa.misalign``); with ``alpha = 0`` and
``ce_on = "a"`` only window A is run (the plain CE baseline, one forward of l_train tokens).
Every step draws ``l_extra`` and the batch from ``(seed, step)`` alone, so a CE run and a
regularized run with the same seed see the same text in the same order (the CE run sees window
A of each sequence), and a resumed run continues exactly where it stopped. Random draws
inside the model (CLEX's scale and positions) come from ``(seed, step, micro-batch)`` too.

Several processes come from accelerate (``accelerate launch -m lsa finetune ...``; on a machine
without GPUs ``--multi_gpu --num_processes N`` starts N gloo processes, ``--cpu`` alone one);
mixed precision is fp32 master weights under torch autocast (see ``train``); LoRA/QLoRA from
peft; NF4 from bitsandbytes (see ``lsa.models``).

It writes into a run folder (layout: ``lsa.runs``; the log and the "finished" marker:
``lsa.markers``) ``config.json``, ``metrics.jsonl`` (one line per optimizer step; ``lr`` is the
learning rate that step applied), ``checkpoint/`` (when ``save_every`` > 0) and ``model/``; the
job marks the run finished after its evaluation (``lsa.markers.mark_finished``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from lsa import faults
from lsa.alignment import ce_loss, misalignment_loss
from lsa.config import FinetuneConfig, OptimConfig, RunConfig
from lsa.files import atomic_write_text, write_json
from lsa.markers import FINISHED, LOG
from lsa.misalign import sample_l_extra
from lsa.options import CeOn, Detach, DivergenceName, Positions, ReduceTerms


class NonFiniteLossError(FloatingPointError):
    """The loss became NaN or infinite; the run stops instead of writing garbage."""


@dataclass(frozen=True)
class Objective:
    """What a step optimises: the window and the misalignment options of ``lsa.misalign``,
    typed by their names' one home (``lsa.options``, as the configuration's fields are). A
    fine-tuning run's comes from its run and fine-tuning settings (``for_run``); the base model
    trains on CE alone."""

    l_train: int
    alpha: float = 0.0
    l_extra_setting: int = 1
    ce_on: CeOn = "a"
    divergence: DivergenceName = "sce"
    reduce_terms: ReduceTerms = "sum"
    detach: Detach = "none"
    positions: Positions = "all"
    chunk_size: int | None = 512
    answer_weight: float = 0.0          # BABILong: weight of the answer tokens' CE

    @classmethod
    def for_run(cls, spec: RunConfig, finetune: FinetuneConfig, l_train: int | None = None,
                **changes: Any) -> Objective:
        """The objective of run ``spec``: its alpha, divergence, windows and ``l_extra``
        setting, the fine-tuning part's reduction, detaching, positions and chunk, at
        ``l_train`` (default the run's, ``finetune.l_train_of``), with ``changes`` on top
        (BABILong's: CE on window B and the answers' weight)."""
        fields = {"l_train": l_train or finetune.l_train_of(spec), "alpha": spec.alpha,
                  "l_extra_setting": spec.l_extra_setting, "ce_on": spec.ce_on,
                  "divergence": spec.divergence, "reduce_terms": finetune.reduce_terms,
                  "detach": finetune.detach, "positions": finetune.positions,
                  "chunk_size": finetune.chunk_size}
        return cls(**{**fields, **changes})

    @property
    def needs_windows(self) -> bool:
        return self.alpha > 0 or self.ce_on == "both"

    def loss_options(self) -> dict[str, Any]:
        """The keyword options of ``lsa.alignment.misalignment_loss``, all from here."""
        return {"alpha": self.alpha, "divergence": self.divergence,
                "reduce_terms": self.reduce_terms, "detach": self.detach,
                "positions": self.positions, "ce_on": self.ce_on,
                "chunk_size": self.chunk_size, "answer_weight": self.answer_weight}


@dataclass
class LoraSettings:
    r: int = 64
    alpha: int = 16
    dropout: float = 0.05
    target_modules: str | list[str] = "all-linear"  # every linear layer but lm_head
    extra_trainable: list[str] = field(default_factory=list)  # e.g. CLEX's ODE, norms


def lr_lambda(optim: OptimConfig):
    def fn(step: int) -> float:
        if step < optim.warmup_steps:
            return (step + 1) / (optim.warmup_steps + 1)
        if optim.schedule == "constant":
            return 1.0
        progress = (step - optim.warmup_steps) / max(1, optim.steps - optim.warmup_steps)
        if optim.schedule == "linear":
            return max(0.0, 1.0 - progress)
        return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))

    return fn


def step_batch(stream, seed: int, step: int, micro: int, batch_size: int, objective: Objective,
               process_index: int = 0, num_processes: int = 1
               ) -> tuple[torch.Tensor, int, torch.Tensor | None]:
    """``(tokens, l_extra, answer_mask)`` of one micro-batch: a function of its coordinates
    only. ``answer_mask`` comes from streams that mark answers (BABILong), else None."""
    index = (step * 1_000 + micro) * num_processes + process_index
    gen = torch.Generator().manual_seed(seed * 1_000_003 + index)
    l_extra = sample_l_extra(objective.l_train, objective.l_extra_setting, gen)
    length = objective.l_train + l_extra
    if hasattr(stream, "sample_with_answers"):
        tokens, mask = stream.sample_with_answers(batch_size, length, gen)
        return tokens, l_extra, mask
    return stream.sample(batch_size, length, gen), l_extra, None


def draw_seed(seed: int, step: int, micro: int) -> int:
    """Seed of the model's own draws in one micro-batch (CLEX's scale and positions): the
    same on every process, as in the CLEX reference, and apart from ``step_batch``'s seeds."""
    return 2**40 + seed * 1_000_003 + step * 1_000 + micro


def compute_loss(model, tokens: torch.Tensor, l_extra: int, objective: Objective,
                 answer_mask: torch.Tensor | None = None) -> dict[str, Any]:
    """The step's loss and its parts (floats for logging, the loss as a tensor)."""
    if not objective.needs_windows:
        start = l_extra if objective.ce_on == "b" else 0
        window = tokens[:, start:start + objective.l_train]
        mask = None if answer_mask is None else answer_mask[:, start:start + objective.l_train]
        loss, ce, ans = ce_loss(model(input_ids=window).logits, window, answer_mask=mask,
                                answer_weight=objective.answer_weight,
                                chunk_size=objective.chunk_size)
        parts = {"ce_" + objective.ce_on: ce.item(), "l_extra": l_extra}
        if ans is not None:
            parts["answer_ce"] = ans.item()
        return {"loss": loss, "ce": loss.item(), **parts}
    out = misalignment_loss(model, tokens, objective.l_train, l_extra, answer_mask=answer_mask,
                            **objective.loss_options())
    parts = {"loss": out.loss, "ce": out.ce.item(), "ce_a": out.ce_a.item(),
             "ce_b": out.ce_b.item(), "misalign": out.misalign.item(),
             "n_overlap": out.n_overlap, "l_extra": l_extra}
    if out.answer_ce is not None:
        parts["answer_ce"] = out.answer_ce.item()
    return parts


def apply_lora(model, lora: LoraSettings, quantized: bool = False,
               gradient_checkpointing: bool = False):
    """Wrap ``model`` with peft LoRA (QLoRA when the model is 4-bit)."""
    from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training

    if quantized:
        model = prepare_model_for_kbit_training(
            model, use_gradient_checkpointing=gradient_checkpointing,
            gradient_checkpointing_kwargs={"use_reentrant": False})
    config = LoraConfig(r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                        target_modules=lora.target_modules, task_type="CAUSAL_LM",
                        modules_to_save=lora.extra_trainable or None)
    return get_peft_model(model, config)


def fp32_master_weights(model) -> list[tuple[torch.nn.Parameter, torch.dtype]]:
    """Cast the trainable bf16/fp16 parameters to fp32 in place (the optimizer's master
    weights: AdamW updates of ~lr round to zero on bf16 weights at lr 2e-5); returns them with
    the dtype they had. Frozen weights (a bf16 or 4-bit base under LoRA) stay as they are."""
    lowered = [(p, p.dtype) for p in model.parameters()
               if p.requires_grad and p.dtype in (torch.bfloat16, torch.float16)]
    for p, _ in lowered:
        p.data = p.data.float()
    return lowered


def truncate_log(path: Path, step: int) -> None:
    """Keep the log lines of steps ``<= step``: a run resumed from the checkpoint of ``step``
    logs the later steps again (a line cut by the kill ends the kept part)."""
    if not path.exists():
        return
    kept = []
    for line in path.read_text().splitlines():
        try:
            if json.loads(line)["step"] > step:
                break
        except json.JSONDecodeError:
            break
        kept.append(line + "\n")
    atomic_write_text(path, "".join(kept))


class _TiedHeadNotice(logging.Filter):
    """Drops accelerate's "Removed shared tensor {...lm_head.weight} while saving" notice,
    printed at every checkpoint of a model whose output head is tied to its embedding
    (``tie_embeddings``): the head IS the embedding (one tensor), so safetensors stores it once
    and loading the embedding restores the head; tests/unit/test_train.py resumes such a
    checkpoint and compares the logits. Any other shared tensor is still reported."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        return not (text.startswith("Removed shared tensor")
                    and all(n.endswith("lm_head.weight") for n in text[text.find("{") + 1:
                                                                     text.find("}")]
                            .replace("'", "").split(", ")))


logging.getLogger("accelerate.utils.other").addFilter(_TiedHeadNotice())


def save_checkpoint(acc, ckpt: Path, step: int, tokens: int = 0) -> None:
    """The training state after ``step`` in ``ckpt``, replaced whole or not at all: written to
    ``checkpoint.tmp`` (``step.json`` last) and renamed over the previous one, so a run killed
    while saving resumes from the previous checkpoint, never from a mix of two."""
    tmp = ckpt.with_suffix(".tmp")
    if acc.is_main_process and tmp.exists():
        shutil.rmtree(tmp)
    acc.wait_for_everyone()
    acc.save_state(str(tmp))
    if acc.is_main_process:
        faults.point(f"checkpoint:{ckpt.parent.name}:{step}")
        write_json(tmp / "step.json", {"step": step, "tokens": tokens})
        old = ckpt.with_suffix(".old")
        if ckpt.exists():
            ckpt.rename(old)
        tmp.rename(ckpt)
        if old.exists():
            shutil.rmtree(old)
    acc.wait_for_everyone()


def recover_checkpoint(ckpt: Path) -> None:
    """Tidy what a kill inside ``save_checkpoint`` left: a complete ``checkpoint.tmp``
    (``step.json`` written) with no ``checkpoint`` beside it becomes the checkpoint; any other
    ``checkpoint.tmp`` or ``checkpoint.old`` is removed."""
    tmp, old = ckpt.with_suffix(".tmp"), ckpt.with_suffix(".old")
    if not ckpt.exists() and (tmp / "step.json").exists():
        tmp.rename(ckpt)
    for leftover in (tmp, old):
        if leftover.exists():
            shutil.rmtree(leftover)


#: seconds between two progress lines of a job (``LSA_PROGRESS_EVERY_S`` overrides it)
PROGRESS_EVERY_S = 30.0
#: the fraction of a run's steps between two progress lines, whichever comes first
PROGRESS_EVERY_FRACTION = 0.1


@dataclass
class ProgressLog:
    """When a run without a progress bar (a pipeline job, ``--no-progress``) writes its progress
    line, and the line itself: every ``every_s`` seconds or every ``every_fraction`` of its
    steps, whichever comes first, and at its last step. It only reads the clock and the step's
    logged numbers, so it changes nothing a run computes."""

    steps: int
    start: int = 0
    every_s: float = PROGRESS_EVERY_S
    every_fraction: float = PROGRESS_EVERY_FRACTION
    t0: float = field(default_factory=time.time)
    last_t: float | None = None
    last_step: int | None = None

    def __post_init__(self) -> None:
        self.every_steps = max(1, round(self.steps * self.every_fraction))
        self.last_t = self.t0 if self.last_t is None else self.last_t
        self.last_step = self.start if self.last_step is None else self.last_step

    def due(self, step: int, now: float) -> bool:
        """Whether the line of optimizer step ``step`` (1-based) is due at time ``now``."""
        return (step >= self.steps or step - self.last_step >= self.every_steps
                or now - self.last_t >= self.every_s)

    def line(self, step: int, now: float, loss: float, tokens: int, name: str = "") -> str:
        """``[name] step 40/200 (20%) loss 3.4120 | 1.23e+03 tokens/s | 12 s, 48 s left``:
        ``tokens`` are those this process ran since ``start``."""
        self.last_t, self.last_step = now, step
        elapsed = max(now - self.t0, 1e-9)
        done = step - self.start
        left = elapsed / done * (self.steps - step) if done > 0 else float("nan")
        head = f"[{name}] " if name else ""
        return (f"{head}step {step}/{self.steps} ({100 * step / self.steps:.0f}%) "
                f"loss {loss:.4f} | {tokens / elapsed:.3g} tokens/s | "
                f"{elapsed:.0f} s, {left:.0f} s left")


def progress_every_s() -> float:
    """Seconds between two progress lines: ``LSA_PROGRESS_EVERY_S``, else ``PROGRESS_EVERY_S``."""
    value = os.environ.get("LSA_PROGRESS_EVERY_S")
    return float(value) if value else PROGRESS_EVERY_S


def train(model, stream, out_dir: str | Path, optim: OptimConfig, objective: Objective,
          seed: int, *, run_config: dict[str, Any] | None = None, progress: bool = True,
          accelerator=None, progress_log: ProgressLog | None = None) -> dict[str, Any]:
    """Train ``model`` in place on ``stream``; returns the summary (also written to the folder).

    A folder with ``train_summary.json`` is a finished run: it is not retrained (load its
    ``model/`` instead). A folder with ``checkpoint/`` resumes from it, and its log is cut back
    to the checkpoint's step.

    Precision: trainable bf16/fp16 weights are trained as fp32 master weights
    (``fp32_master_weights``) under autocast in their own dtype (fp16 with loss scaling), and
    cast back at the end, so the model keeps the dtype it was loaded in; fp32 models are
    autocast to bf16 when ``optim.bf16`` is set on a GPU.

    Without a progress bar (``progress=False``: a pipeline job) the main process prints a
    progress line to stderr, the job's log (``ProgressLog``: step, loss, tokens/s, time left;
    ``progress_log`` sets when, default every ``progress_every_s()`` seconds or 10 % of the
    steps).

    Several processes (``accelerate launch``): each draws its own micro-batches
    (``step_batch``), gradients are all-reduced once per optimizer step (``no_sync`` on the
    earlier micro-batches), the schedule steps once per optimizer step (it is not prepared:
    accelerate would step it once per process), and only the main process writes the log and
    the model. Modules with a ``seed_draws`` method (CLEX) are reseeded before every micro-batch
    from ``draw_seed`` (the same on every process).
    """
    from accelerate import Accelerator, DistributedDataParallelKwargs

    out_dir = Path(out_dir)
    summary_file = out_dir / FINISHED
    if summary_file.exists():
        raise FileExistsError(f"{out_dir} holds a finished run; load it instead of retraining")
    out_dir.mkdir(parents=True, exist_ok=True)
    drawing = [m for m in model.modules() if hasattr(m, "seed_draws")]
    # CLEX at t = 1 leaves its ODE out of the graph: DDP must allow unused parameters
    acc = accelerator or Accelerator(
        mixed_precision="no", cpu=not torch.cuda.is_available(),
        kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=bool(drawing))])
    if run_config is not None and acc.is_main_process:
        write_json(out_dir / "config.json", run_config)
    lowered = fp32_master_weights(model)
    amp = lowered[0][1] if lowered else (
        torch.bfloat16 if optim.bf16 and acc.device.type == "cuda" else None)
    scaler = torch.amp.GradScaler(acc.device.type, enabled=amp == torch.float16)
    if optim.gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=optim.lr, weight_decay=optim.weight_decay,
                            betas=(0.9, 0.95))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(optim))
    model, opt = acc.prepare(model, opt)
    acc.register_for_checkpointing(sched, *([scaler] if scaler.is_enabled() else []))
    ckpt = out_dir / "checkpoint"
    start = 0
    if acc.is_main_process:
        recover_checkpoint(ckpt)
    acc.wait_for_everyone()
    tokens_seen = 0
    if (ckpt / "step.json").exists():
        acc.load_state(str(ckpt))
        state = json.loads((ckpt / "step.json").read_text())
        start, tokens_seen = state["step"], state.get("tokens", 0)
    log_path = out_dir / LOG
    if acc.is_main_process:
        truncate_log(log_path, start)
    acc.wait_for_everyone()
    model.train()
    t0 = time.time()
    lines = None
    if not progress and acc.is_main_process:
        lines = progress_log or ProgressLog(optim.steps, start, every_s=progress_every_s(),
                                            t0=t0)
    tokens_at_start = tokens_seen
    bar = tqdm(range(start, optim.steps), desc=out_dir.name,
               disable=not progress or not acc.is_main_process, initial=start,
               total=optim.steps)
    for step in bar:
        parts_sum: dict[str, float] = {}
        loss_sum = 0.0  # the step's loss, for the progress line only
        for micro in range(optim.grad_accum):
            tokens, l_extra, mask = step_batch(stream, seed, step, micro, optim.batch_size,
                                               objective, acc.process_index, acc.num_processes)
            tokens = tokens.to(acc.device)
            mask = None if mask is None else mask.to(acc.device)
            for module in drawing:
                module.seed_draws(draw_seed(seed, step, micro))
            sync = micro == optim.grad_accum - 1
            with contextlib.nullcontext() if sync else acc.no_sync(model):
                with torch.autocast(acc.device.type, dtype=amp or torch.bfloat16,
                                    enabled=amp is not None):
                    parts = compute_loss(model, tokens, l_extra, objective, mask)
                loss = parts.pop("loss")
                loss_sum += loss.item() / optim.grad_accum
                if not torch.isfinite(loss):
                    raise NonFiniteLossError(
                        f"non-finite loss at step {step} in {out_dir}: "
                        + ", ".join(f"{k}={v}" for k, v in parts.items())
                        + ". Lower the learning rate or alpha; the last checkpoint (if any) is "
                          "kept.")
                acc.backward(scaler.scale(loss / optim.grad_accum))
                faults.point(f"train:{out_dir.name}:{step + 1}")
            for key, value in parts.items():
                parts_sum[key] = parts_sum.get(key, 0.0) + float(value) / optim.grad_accum
            tokens_seen += tokens.numel()
        scaler.unscale_(opt)
        grad_norm = acc.clip_grad_norm_(params, optim.clip)
        lr, scale = sched.get_last_lr()[0], scaler.get_scale()
        scaler.step(opt)
        scaler.update()
        if scaler.get_scale() >= scale:  # an fp16 overflow skips the step and lowers the scale
            sched.step()
        opt.zero_grad(set_to_none=True)
        record = {"step": step + 1, "lr": lr, "grad_norm": float(grad_norm), **parts_sum,
                  "elapsed_s": round(time.time() - t0, 3)}
        if acc.is_main_process:
            with open(log_path, "a") as fh:
                fh.write(json.dumps(record) + "\n")
        if lines is not None and lines.due(step + 1, now := time.time()):
            print(lines.line(step + 1, now, loss_sum, tokens_seen - tokens_at_start,
                             out_dir.name), file=sys.stderr, flush=True)
        bar.set_postfix(ce=f"{parts_sum['ce']:.3f}",
                        **({"sce": f"{parts_sum['misalign']:.3f}"} if "misalign" in parts_sum
                           else {}))
        if optim.save_every and (step + 1) % optim.save_every == 0 and step + 1 < optim.steps:
            save_checkpoint(acc, ckpt, step + 1, tokens_seen)
    bar.close()
    model = acc.unwrap_model(model)
    for p, dtype in lowered:
        p.data = p.data.to(dtype)
    model.eval()
    summary = {"steps": optim.steps, "resumed_from": start, "tokens": tokens_seen,
               "processes": acc.num_processes, "wall_time_s": round(time.time() - t0, 2)}
    if acc.is_main_process:
        model.save_pretrained(out_dir / "model")
    acc.wait_for_everyone()
    return summary
