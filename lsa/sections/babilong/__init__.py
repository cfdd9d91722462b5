"""Section 5.4, Tables 6-7 (notebook ``05_babilong``): BABILong accuracy by task x length and
QA1 by fact depth, CE against CE + alpha * SCE, paired by test prompt. The tables:
``lsa.runtable``."""

from __future__ import annotations

from lsa import plots
from lsa.notebook import Setup
from lsa.sections import Result, save_figure, with_premise
from lsa.sections.babilong import tables as bl_tables


def analyse(setup: Setup) -> Result:
    """Train design: the BABILong fine-tuning runs; evaluate design: the evaluations (each
    after its fine-tuning run)."""
    pipe, alpha = setup.pipe, setup.settings.alpha
    setup.ensure_runs()
    acc, depth = bl_tables.collect_babilong(pipe)
    sources = bl_tables.babilong_sources(pipe)
    scorers = sorted(set(acc["scorer"]) | set(depth["scorer"]))
    tables = bl_tables.babilong_tables(acc, depth, alpha)
    by_length, by_depth = tables["table6_accuracy_by_length"], tables["table7_qa1_by_depth"]
    return with_premise(setup, Result(
        tables=tables, claims=bl_tables.babilong_claims(acc, depth, alpha),
        metrics={**sources, "scorer": scorers,
                 "accuracy_by_length": by_length.to_dict(orient="records"),
                 "paired_difference_by_length":
                     tables["table6_paired_difference"].to_dict(orient="records"),
                 "qa1_by_depth": by_depth.to_dict(orient="records"),
                 "paired_difference_by_depth":
                     tables["table7_paired_difference"].to_dict(orient="records")}))


def describe_sources(result: Result) -> str:
    lines = [f"{bl_tables.SOURCE_LABELS[key]}: {value}" for key, value in result.metrics.items()
             if key in bl_tables.SOURCE_LABELS]
    return "\n".join(lines + ["answers scored with: " + ", ".join(result.metrics["scorer"])])


def _with_intervals(ax, table, x, hue, **style):
    """Accuracy per ``hue`` group against ``x``, with the Wilson intervals as error bars."""
    for name, sub in table.groupby(hue):
        ax.errorbar(sub[x], sub["accuracy"], yerr=[sub["accuracy"] - sub["ci_low"],
                    sub["ci_high"] - sub["accuracy"]], marker="o", capsize=3, label=str(name),
                    **style)


def figure_by_length(setup: Setup, result: Result):
    """Table 6 as a figure: accuracy by input length, all tasks and by task."""
    axes_of = bl_tables.babilong_axes(setup.pipe)
    by_length = result.tables["table6_accuracy_by_length"]
    by_task = result.tables["accuracy_by_task_length"]
    x = axes_of["x"]
    fig, axes = plots.plt.subplots(1, 2, figsize=(10, 3.6))
    _with_intervals(axes[0], by_length.assign(curve=bl_tables.curve_label(by_length)), x,
                    "curve")
    _with_intervals(axes[1], by_task.assign(curve=bl_tables.curve_label(by_task, "task")), x,
                    "curve")
    for ax, title in zip(axes, ["BABILong, all tasks", "by task"]):
        ax.set(xscale="log", xticks=axes_of["ticks"], xticklabels=axes_of["labels"],
               xlabel=axes_of["xlabel"], ylabel="accuracy (%)",
               title=f"{title} (95% Wilson intervals, scorer "
                     f"{', '.join(result.metrics['scorer'])})")
        ax.minorticks_off()
    fig.tight_layout()
    plots.figure_legend(fig, axes, "curve")
    save_figure(setup, result, fig, "fig_table6_babilong_by_length")
    return fig


def figure_by_depth(setup: Setup, result: Result):
    """Table 7 as a figure: QA1 accuracy by the depth of its facts."""
    by_depth = result.tables["table7_qa1_by_depth"]
    fig, ax = plots.plt.subplots(figsize=(5.5, 3.6))
    _with_intervals(ax, by_depth.assign(curve=bl_tables.curve_label(by_depth)), "depth",
                    "curve")
    ax.set(xlabel="depth of the facts (fraction of the context)", ylabel="accuracy (%)",
           title=bl_tables.babilong_axes(setup.pipe)["depth_title"])
    plots.axes_legend_outside(ax, "curve")
    save_figure(setup, result, fig, "fig_table7_qa1_by_depth")
    return fig
