"""Section 5.4, Tables 6-7 (notebook ``05_babilong``): BABILong accuracy by task x length and
QA1 by fact depth, CE against CE + alpha * SCE, paired by test prompt. The tables: ``tables``
(this package); the main figure's tidy table: ``accuracy_by_length`` (the notebook plots it)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from lsa import plots
from lsa.notebook import Setup
from lsa.sections import Result, save_figure, with_premise
from lsa.sections.babilong import tables as bl_tables


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


def analyse(setup: Setup) -> BabilongResult:
    """Train design: the BABILong fine-tuning runs; evaluate design: the evaluations (each
    after its fine-tuning run)."""
    pipe, alpha = setup.pipe, setup.settings.alpha
    setup.ensure_runs()
    acc, depth = bl_tables.collect_babilong(pipe)
    sources = bl_tables.babilong_sources(pipe)
    scorers = sorted(set(acc["scorer"]) | set(depth["scorer"]))
    tables = bl_tables.babilong_tables(acc, depth, alpha)
    by_length, by_depth = tables["table6_accuracy_by_length"], tables["table7_qa1_by_depth"]
    return with_premise(setup, BabilongResult(
        **tables, claims=bl_tables.babilong_claims(acc, depth, alpha),
        metrics={**sources, "scorer": scorers,
                 "accuracy_by_length": by_length.to_dict(orient="records"),
                 "paired_difference_by_length":
                     tables["table6_paired_difference"].to_dict(orient="records"),
                 "qa1_by_depth": by_depth.to_dict(orient="records"),
                 "paired_difference_by_depth":
                     tables["table7_paired_difference"].to_dict(orient="records")}))


def describe_sources(result: BabilongResult) -> str:
    lines = [f"{bl_tables.SOURCE_LABELS[key]}: {value}" for key, value in result.metrics.items()
             if key in bl_tables.SOURCE_LABELS]
    return "\n".join(lines + ["answers scored with: " + ", ".join(result.metrics["scorer"])])


def accuracy_by_length(setup: Setup, result: BabilongResult) -> pd.DataFrame:
    """Table 6's tidy table, what its figure plots: accuracy with its Wilson interval by input
    length, ``panel`` "all tasks" (Table 6) and "by task", ``curve`` the plotted line (task,
    model, loss)."""
    by_length = result.table6_accuracy_by_length
    by_task = result.accuracy_by_task_length
    return pd.concat([by_length.assign(panel="all tasks", curve=bl_tables.curve_label(by_length)),
                      by_task.assign(panel="by task",
                                     curve=bl_tables.curve_label(by_task, "task"))],
                     ignore_index=True)


def figure_by_depth(setup: Setup, result: BabilongResult):
    """Table 7 as a figure: QA1 accuracy by the depth of its facts."""
    by_depth = result.table7_qa1_by_depth
    fig, ax = plots.plt.subplots(figsize=(5.5, 3.6))
    plots.interval_lines(by_depth.assign(curve=bl_tables.curve_label(by_depth)), "depth",
                         "accuracy", "ci_low", "ci_high", "curve", ax=ax)
    ax.set(xlabel="depth of the facts (fraction of the context)", ylabel="accuracy (%)",
           title=bl_tables.babilong_axes(setup.pipe)["depth_title"])
    plots.axes_legend_outside(ax, "curve")
    save_figure(setup, result, fig, "fig_table7_qa1_by_depth")
    return fig
