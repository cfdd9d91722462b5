"""The shared run table: one row per finished fine-tuning run (``collect_runs``), the training
logs (``curves``), the protocol's numbers of one model (``measured_row``) and the labels and
column order every section's tables use. Sections 4.1 (Table 1), 5.1-5.2 and 5.3 read their
runs through it; runs are found through ``runs_of(pipe)`` (``lsa.runs``), so reading results
imports no torch.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from lsa.config import PipelineConfig
from lsa.runs import runs_of


def loss_label(alpha: float) -> str:
    return "CE" if alpha == 0 else f"CE+{alpha:g}*SCE"


DIVERGENCE_LABELS = {"sce": "SCE", "jeffreys": "Jeffreys", "entropy": "entropy"}
#: the parts of the misalignment every run and probe reports (``lsa.jobs.lm_metrics``)
PARTS = ("jeffreys", "entropy", "l2", "tv", "top1_change")


def setting_label(spec) -> str:
    """A run's training setting in words, without method and seed: ``CE``, ``SCE 0.1``,
    ``Jeffreys 1``, ``CE (both windows)``, ``SCE 0.1, l_extra 4``, ``CE, 75 steps``."""
    label = "CE" if spec.alpha == 0 else f"{DIVERGENCE_LABELS[spec.divergence]} {spec.alpha:g}"
    if spec.ce_on != "a":
        label += " (both windows)" if spec.ce_on == "both" else f" (CE on {spec.ce_on})"
    if spec.l_extra_setting != 1:
        label += f", l_extra {spec.l_extra_setting}"
    if spec.steps is not None:
        label += f", {spec.steps} steps"
    return label


def measured_row(metrics: dict[str, Any], l_train: int) -> dict[str, Any]:
    """The protocol's numbers of one model (a fine-tuning run or a probe): perplexity and NLL by
    multiple of ``l_train`` (``nll_beyond_Mx``: the targets whose context is longer than
    ``l_train``), the long-window perplexity (2x and longer, token-weighted), the misalignment
    and its parts (NaN where a run predates them), the CE on the training books
    (``train_loss``) and the copy probes (``nll_copy_Mx``, ``retrieval_Mx``)."""
    row: dict[str, Any] = {}
    long_nll, long_tokens = 0.0, 0
    for length, value in metrics["perplexity"].items():
        mult = int(length) // l_train
        row[f"ppl_{mult}x"] = value["ppl"]
        row[f"nll_{mult}x"] = value["nll"]
        if "nll_beyond" in value:  # targets whose context is longer than l_train
            row[f"nll_beyond_{mult}x"] = value["nll_beyond"]
        if mult > 1:
            long_nll += value["nll"] * value["tokens"]
            long_tokens += value["tokens"]
    row["ppl_long"] = math.exp(long_nll / long_tokens) if long_tokens else math.nan
    longest = max(int(k) for k in metrics["perplexity"]) // l_train
    row["ppl_growth"] = row[f"ppl_{longest}x"] / row["ppl_1x"]  # longest window / 1x
    # runs from before the paper's positions hold one value, over every overlap position
    paper_mis = metrics["misalignment"] if "misalignment_all" in metrics else {}
    all_mis = metrics.get("misalignment_all", metrics["misalignment"])
    row["misalignment"] = paper_mis.get("mean", math.nan)
    row["misalignment_se"] = paper_mis.get("stderr", math.nan)
    row["misalignment_all"] = all_mis["mean"]
    row["misalignment_all_se"] = all_mis["stderr"]
    for part in PARTS:  # each part with its sampling standard error
        row[part] = metrics.get(part, {}).get("mean", math.nan)
        row[f"{part}_se"] = metrics.get(part, {}).get("stderr", math.nan)
    row["train_loss"] = metrics.get("train_ce", {}).get("nll", math.nan)
    for length, value in (metrics.get("long_range") or {}).items():
        mult = int(length) // l_train
        row[f"nll_copy_{mult}x"] = value["copy_nll"]
        row[f"retrieval_{mult}x"] = value["retrieval"]
    return row


def final_ce(log: list[dict[str, Any]]) -> float:
    """The training loss at the end of a run as its log has it: the mean CE of the last fifth
    of its steps (NaN without a log)."""
    tail = log[-max(1, len(log) // 5):]
    return float(np.mean([r["ce"] for r in tail])) if tail else math.nan


def window_columns(frame: pd.DataFrame, kind: str = "ppl") -> list[str]:
    """The columns ``<kind>_<M>x`` of ``frame`` (perplexity or NLL at M x ``l_train``), in the
    order of M as a number (``ppl_2x`` before ``ppl_16x``): the one column order of every
    table and figure by window."""
    found = [c for c in frame.columns if c.startswith(f"{kind}_") and c[len(kind) + 1:-1].isdigit()
             and c.endswith("x")]
    return sorted(found, key=lambda c: int(c[len(kind) + 1:-1]))


def collect_runs(pipe: PipelineConfig, names: list[str] | None = None) -> pd.DataFrame:
    """One row per finished fine-tuning run (``names``: these runs; default the Section
    5.1-5.2 grid and explicit runs): method, alpha, seed, the base model's pretraining seed
    (``base_seed``), setting (``setting_label``),
    perplexities by multiple of the training window, long-window perplexity, misalignment
    metric (``misalignment``: the paper's positions, both contexts >= l_train / 2;
    ``misalignment_all``: every overlap position) and its parts, final training losses,
    training wall time."""
    rows = []
    for name in runs_of(pipe).grid if names is None else names:
        run = runs_of(pipe).finetune[name]
        if not run.finished:
            continue
        m, log, spec = run.metrics(), run.log(), run.spec
        row: dict[str, Any] = {"run": run.name, "method": spec.method, "alpha": spec.alpha,
                               "loss": loss_label(spec.alpha), "seed": spec.seed,
                               "setting": setting_label(spec), "divergence": spec.divergence,
                               "ce_on": spec.ce_on, "l_extra_setting": spec.l_extra_setting,
                               "steps": m.get("steps"), "l_train": m["l_train"],
                               "base_seed": pipe.pretrain.seed if spec.base_seed is None
                               else spec.base_seed}
        row.update(measured_row(m, m["l_train"]))
        row["final_ce"] = final_ce(log)
        row["trainable_parameters"] = m.get("trainable_parameters")
        row["train_wall_s"] = run.summary().get("wall_time_s", math.nan)
        rows.append(row)
    return pd.DataFrame(rows)


def curves(pipe: PipelineConfig, names: list[str] | None = None) -> pd.DataFrame:
    """Training logs of every finished run (``names``; default the grid), long format (run,
    method, alpha, seed, setting, step, ...)."""
    frames = []
    for name in runs_of(pipe).grid if names is None else names:
        run = runs_of(pipe).finetune[name]
        if run.finished:
            spec = run.spec
            frames.append(pd.DataFrame(run.log()).assign(
                run=run.name, method=spec.method, alpha=spec.alpha, loss=loss_label(spec.alpha),
                seed=spec.seed, setting=setting_label(spec)))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def by_method(runs: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """Mean and standard deviation over seeds per (method, alpha)."""
    agg = runs.groupby(["method", "alpha"])[columns].agg(["mean", "std", "count"])
    agg.columns = [f"{c}_{s}" for c, s in agg.columns]
    return agg.reset_index()

