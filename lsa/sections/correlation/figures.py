"""Section 4.1's figures: the main figure's tidy table (``score_against_predictors``: the main
score against Table 1's two predictors, which the notebook plots in its ``main-figure`` cell,
with ``score_label`` and ``predictor_title``), and the audits' figures (the metric's parts, L2
against SCE, the top-1 change by ``l_extra``, each unit's influence). ``result`` is the
section's ``CorrelationResult``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from lsa import plots
from lsa.sections import Result, save_figure
from lsa.sections.correlation.claims import r_text
from lsa.sections.correlation.tables import pearson

if TYPE_CHECKING:
    from lsa.notebook import Setup

#: Table 1's two predictors, the main figure's panels
TABLE1_PREDICTORS = ("misalignment", "train_loss")


def score_label(score: str, l_train: int) -> str:
    """The main score's axis label, on two lines (``score_beyond_4x``: -NLL beyond l_train in
    the 4x windows, in tokens)."""
    return plots.column_label(score, l_train).replace(", ", ",\n", 1)


def score_against_predictors(setup: Setup, result: Result) -> pd.DataFrame:
    """Table 1's tidy table, what its figure plots: one row per (primary unit, predictor) with
    the unit's ``kind``, the predictor's ``value`` and the main score (its own column,
    ``result.metrics["main_score"]``)."""
    table, main = result.units_primary, result.metrics["main_score"]
    long = table.melt(id_vars=["unit", "kind"], value_vars=list(TABLE1_PREDICTORS),
                      var_name="predictor", value_name="value")
    return long.merge(table[["unit", main]], on="unit")


def predictor_title(result: Result, predictor: str) -> str:
    """A Table 1 panel's title: the predictor and its Pearson r with the main score."""
    row = pearson(result.table1, predictor, result.metrics["main_score"])
    return predictor if row is None else f"{predictor}\nPearson r = {r_text(row)}"


def figure_parts(setup: Setup, result: Result):
    """Audit 1: the score against the metric's parts (alignment, sharpness) and the loss."""
    table, main = result.units_primary, result.metrics["main_score"]
    fig, axes = plots.plt.subplots(1, 3, figsize=(11, 3.4), sharey=True)
    for ax, pred in zip(axes, ["jeffreys", "entropy", "train_loss"]):
        plots.sns.scatterplot(data=table, x=pred, y=main, hue="kind", ax=ax,
                              legend=ax is axes[0])
        ax.set(xlabel=plots.column_label(pred).replace(", ", ",\n", 1), ylabel="")
    axes[0].set_ylabel(score_label(main, result.l_train))  # shared by the row
    fig.tight_layout()
    plots.figure_legend(fig, axes, "model")
    save_figure(setup, result, fig, "fig_audit_parts")
    return fig


def figure_l2_sce(setup: Setup, result: Result):
    """Audit 2: the theory's L2 distance against SCE."""
    fig, ax = plots.plt.subplots(figsize=(4.5, 3.4))
    plots.sns.scatterplot(data=result.units_primary, x="l2", y="misalignment",
                          hue="kind", ax=ax)
    ax.set(xlabel="L2 distance ||p - q||", ylabel="SCE (L_misalign, nats)")
    plots.axes_legend_outside(ax, "model")
    save_figure(setup, result, fig, "fig_audit_l2_sce")
    return fig


def figure_influence(setup: Setup, result: Result):
    """Audit 5: T1.1's and T1.2's r and T1.3's and T1.4's signed differences with each cluster
    of units (one trained model) left out in turn, against the fit on every unit (None
    without the table)."""
    table = result.audit_influence
    if not len(table):
        return None
    stats_ = list(dict.fromkeys(table["statistic"]))
    fig, axes = plots.plt.subplots(1, len(stats_), figsize=(5 * len(stats_), 0.2 * len(
        table) / len(stats_) + 1.5), sharey=True, squeeze=False)
    for ax, name in zip(axes[0], stats_):
        sub = table[table["statistic"] == name].reset_index(drop=True)
        ax.errorbar(sub["value"], sub.index, xerr=[sub["value"] - sub["low"],
                                                    sub["high"] - sub["value"]],
                    fmt="o", ms=3, capsize=2, color="tab:blue")
        ax.axvline(0, color="grey", lw=0.8)
        ax.axvline((sub["value"] - sub["shift"]).iloc[0], color="black", ls="--", lw=0.8)
        ax.set(xlabel=f"{name} without the cluster\n(dashed: every unit; 95 % interval)",
               yticks=sub.index, yticklabels=sub["unit"])
    axes[0][0].invert_yaxis()  # the shared y axis: once, the first cluster on top
    axes[0][0].set_ylabel("cluster left out (a trained model)")
    fig.tight_layout()
    save_figure(setup, result, fig, "fig_audit_influence")
    return fig


def figure_top1(setup: Setup, result: Result):
    """Audit 3: how often cutting the context changes the top-1 token (None without data)."""
    top1 = result.audit_top1
    if not len(top1):
        return None
    fig, ax = plots.plt.subplots(figsize=(6, 3.4))
    for model, sub in top1.groupby("model"):
        ax.errorbar(sub["l_extra_mid"], sub["top1_changed"],
                    yerr=[sub["top1_changed"] - sub["low"], sub["high"] - sub["top1_changed"]],
                    marker="o", capsize=3, label=model)
    ax.set(xlabel="l_extra (tokens cut)", ylabel="fraction of positions whose\ntop-1 token changed",
           title=f"cutting the context from l = {result.l_train} tokens", ylim=(0, 1))
    plots.axes_legend_outside(ax, "model")
    save_figure(setup, result, fig, "fig_audit_top1")
    return fig
