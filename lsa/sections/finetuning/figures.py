"""Sections 5.1-5.2's figures: the main figure's tidy table (``ppl_by_window``: Table 2 by
window, which the notebook plots in its ``main-figure`` cell), the training curves and the
misalignment of the final models."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from lsa import plots, runtable
from lsa.sections import Result, save_figure

if TYPE_CHECKING:
    from lsa.notebook import Setup


def ppl_by_window(setup: Setup, result: Result) -> pd.DataFrame:
    """Table 2's tidy table, what its figure plots: one row per run and window (``method``,
    ``loss``, ``seed``, ``window``: its multiple of ``l_train`` and tokens, an ordered
    category; ``perplexity``)."""
    runs, l_train = result.runs, result.l_train
    columns = runtable.window_columns(runs)
    ticks = dict(zip(columns, plots.window_ticks(columns, l_train)))
    long = runs.melt(id_vars=["method", "loss", "seed"], value_vars=columns,
                     var_name="window", value_name="perplexity")
    long["window"] = pd.Categorical(long["window"].map(ticks), categories=list(ticks.values()),
                                    ordered=True)
    return long


def figure_training_curves(setup: Setup, result: Result):
    log = result.curves
    value_vars = [c for c in ("ce", "misalign") if c in log.columns]
    curve = log.melt(id_vars=["method", "loss", "seed", "step"], value_vars=value_vars,
                     var_name="term", value_name="value").dropna()
    g = plots.sns.relplot(data=curve, x="step", y="value", hue="loss", col="method",
                          row="term", kind="line", errorbar="sd", height=2.6, aspect=1.1,
                          facet_kws={"sharey": "row"}, row_order=value_vars)
    g.set_titles("{col_name}")
    for row, term in zip(g.axes, value_vars):  # a row shares its y: labelled once
        for ax in row:
            ax.set_ylabel("")
        row[0].set_ylabel(plots.column_label(term).replace(" (", "\n("))
    g.set_xlabels("optimizer step")
    g.tight_layout()
    save_figure(setup, result, g.figure, "fig_training_curves")
    return g.figure


def figure_misalignment(setup: Setup, result: Result):
    fig, ax = plots.plt.subplots(figsize=(6, 3.2))
    plots.sns.barplot(data=result.runs, x="method", y="misalignment", hue="loss",
                      errorbar="sd", ax=ax)
    ax.set(ylabel="L_misalign (SCE, nats;\nboth contexts >= l/2)",
           title="long-short misalignment of the final models")
    plots.axes_legend_outside(ax, "loss")
    save_figure(setup, result, fig, "fig_misalignment_by_method")
    return fig
