"""Section 5.4's figures: Table 6's tidy table (``accuracy_by_length``, which the notebook
plots in its ``main-figure`` cell), the axes of the configured design (``babilong_axes``) and
Table 7 by depth (``figure_by_depth``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

from lsa import plots
from lsa.config import PipelineConfig
from lsa.sections import Result, save_figure

if TYPE_CHECKING:
    from lsa.notebook import Setup


def curve_label(table: pd.DataFrame, *first: str) -> pd.Series:
    """One plotted curve per row's ``first`` columns, model (evaluate design) and loss:
    "qa1, CE" in the train design, "qa1, clex@1024, CE" in the evaluate design."""
    label = pd.Series("", index=table.index)
    for column in first:
        label = label + table[column].astype(str) + ", "
    if {"method", "l_train"} <= set(table.columns):
        label = label + table["method"].astype(str) + "@" + table["l_train"].astype(str) + ", "
    return label + table["loss"].astype(str)


def _tokens(n: int) -> str:
    return f"{n // 1024}K" if n % 1024 == 0 else str(n)


def babilong_axes(pipe: PipelineConfig) -> dict[str, Any]:
    """How the figures show the configured design: the length column, its ticks and labels,
    the x label, and the depth figure's title."""
    bl = pipe.babilong
    if bl.design == "evaluate":
        return {"x": "length", "ticks": list(bl.eval_lengths),
                "labels": [_tokens(n) for n in bl.eval_lengths],
                "xlabel": "input length (tokens)",
                "depth_title": f"{bl.depth_task} at {bl.eval_depth_length} tokens"}
    return {"x": "multiple", "ticks": list(bl.eval_multiples),
            "labels": [f"{m}x" for m in bl.eval_multiples],
            "xlabel": "input length / training window",
            "depth_title": f"{bl.depth_task} at {bl.depth_multiple}x the training window"}


def accuracy_by_length(setup: Setup, result: Result) -> pd.DataFrame:
    """Table 6's tidy table, what its figure plots: accuracy with its Wilson interval by input
    length, ``panel`` "all tasks" (Table 6) and "by task", ``line`` the model and loss (one
    colour each, in both panels), ``task`` ("all tasks" in the first panel)."""
    by_length = result.table6_accuracy_by_length
    by_task = result.accuracy_by_task_length
    return pd.concat([by_length.assign(panel="all tasks", task="all tasks",
                                       line=curve_label(by_length)),
                      by_task.assign(panel="by task", line=curve_label(by_task))],
                     ignore_index=True)


def figure_by_depth(setup: Setup, result: Result):
    """Table 7 as a figure: QA1 accuracy by the depth of its facts."""
    by_depth = result.table7_qa1_by_depth.assign(curve=curve_label(
        result.table7_qa1_by_depth))
    fig, ax = plots.plt.subplots(figsize=(5.5, 3.6))
    plots.interval_lines(by_depth, "depth", "accuracy", "ci_low", "ci_high", "curve", ax=ax,
                         palette=plots.hue_palette(curve_label(
                             result.table6_accuracy_by_length)))
    ax.set(xlabel="depth of the facts (fraction of the context)", ylabel="accuracy (%)",
           title=babilong_axes(setup.pipe)["depth_title"])
    plots.axes_legend_outside(ax, "curve")
    save_figure(setup, result, fig, "fig_table7_qa1_by_depth")
    return fig
