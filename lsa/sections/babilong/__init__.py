"""Section 5.4, Tables 6-7 (notebook ``05_babilong``): BABILong accuracy by task x length and
QA1 by fact depth, CE against CE + alpha * SCE, paired by test prompt. Its tables: ``tables``;
its claims: ``claims``; its figures and the main figure's tidy table (``accuracy_by_length``,
which the notebook plots): ``figures``."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from lsa.config import PipelineConfig
from lsa.gates import Gate
from lsa.notebook import Setup
from lsa.runtable import RunTables
from lsa.sections import Result
from lsa.sections.babilong import claims, tables
from lsa.sections.babilong.figures import accuracy_by_length, babilong_axes, figure_by_depth

__all__ = ["BabilongResult", "accuracy_by_length", "analyse", "babilong_axes", "describe",
           "figure_by_depth"]

# what the sources' keys mean (``describe`` prints them with these words)
SOURCE_LABELS = {"design": "design", "babi_source": "bAbI source",
                 "train_samples": "training samples that fit the window, per task",
                 "books_source": "haystack books", "prompts": "benchmark prompts",
                 "max_new_tokens": "greedy tokens per answer",
                 "evaluated": "fine-tuning runs evaluated (run: its folder)"}


@dataclass
class BabilongResult(Result):
    """Section 5.4's tables (``tables.babilong_tables``): the sanity gate, accuracy by length
    (Table 6) overall and by task with the paired difference, QA1 by depth (Table 7) and its
    paired difference."""

    sanity_gate: pd.DataFrame | None = None
    table6_accuracy_by_length: pd.DataFrame | None = None
    accuracy_by_task_length: pd.DataFrame | None = None
    table6_paired_difference: pd.DataFrame | None = None
    table7_qa1_by_depth: pd.DataFrame | None = None
    table7_paired_difference: pd.DataFrame | None = None


def analyse(pipe: PipelineConfig, runs: RunTables, gates: list[Gate]) -> BabilongResult:
    """The answers of the configured design (``runs.babilong_accuracy``, ``babilong_depth``:
    the BABILong fine-tuning runs, or the evaluations of fine-tuning runs), their tables at
    ``view.alpha`` and the claims; where the data came from (``babilong_sources``) in its
    metrics."""
    runs.need("babilong_accuracy", "babilong_depth", "babilong_sources")
    acc, depth, alpha = runs.babilong_accuracy, runs.babilong_depth, pipe.view.alpha
    scorers = sorted(set(acc["scorer"]) | set(depth["scorer"]))
    found = tables.babilong_tables(acc, depth, alpha)
    by_length, by_depth = found["table6_accuracy_by_length"], found["table7_qa1_by_depth"]
    return BabilongResult(
        **found, claims=claims.babilong_claims(acc, depth, alpha),
        metrics={**runs.babilong_sources, "scorer": scorers,
                 "accuracy_by_length": by_length.to_dict(orient="records"),
                 "paired_difference_by_length":
                     found["table6_paired_difference"].to_dict(orient="records"),
                 "qa1_by_depth": by_depth.to_dict(orient="records"),
                 "paired_difference_by_depth":
                     found["table7_paired_difference"].to_dict(orient="records")})


def settings_text(pipe: PipelineConfig, evaluated: list[str]) -> str:
    """One line of what the section's runs are (the configured design's fields; ``evaluated``:
    the fine-tuning runs the evaluate design reads)."""
    bl = pipe.babilong
    if bl.design == "evaluate":
        return (f"profile {pipe.profile}: evaluate design, tasks {bl.tasks}, fine-tuning runs "
                f"{evaluated}, lengths {bl.eval_lengths} "
                f"tokens, {bl.depth_task} at depths {bl.eval_depths} of "
                f"{bl.eval_depth_length} tokens, {bl.test_samples} test samples per cell, "
                f"prompt parts {bl.prompt_parts}, {bl.eval_max_new_tokens} new tokens, "
                f"scorer {bl.scorer}")
    return (f"profile {pipe.profile}: tasks {bl.tasks}, l_train {bl.l_train}, "
            f"{bl.optim.steps} steps, alphas {bl.alphas}, seeds {bl.seeds}, evaluation at "
            f"{bl.eval_multiples} x l_train, {bl.test_samples} test samples per cell, "
            f"scorer {bl.scorer}")


def describe(setup: Setup, result: BabilongResult) -> str:
    """The runs' settings (one line), then where their data came from and the scorers."""
    lines = [settings_text(setup.pipe, list(setup.plan.babilong_eval))]
    lines += [f"{SOURCE_LABELS[key]}: {value}" for key, value in result.metrics.items()
              if key in SOURCE_LABELS]
    return "\n".join(lines + ["answers scored with: " + ", ".join(result.metrics["scorer"])])
