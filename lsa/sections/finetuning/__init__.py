"""Sections 5.1-5.2, Tables 2-3 (notebook ``03_regularized_finetuning``): every method with CE
and with CE + alpha * SCE, perplexity by window, the paired effect of the regularizer, the
paper's numbers beside ours. The tables: ``tables`` (this package) over ``lsa.runtable``; the
main figure's tidy table: ``ppl_by_window`` (the notebook plots it)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from lsa import plots, runtable
from lsa.notebook import Setup
from lsa.runs import runs_of
from lsa.sections import Result, save_figure, with_premise
from lsa.sections.finetuning import tables as ft_tables


def describe(setup: Setup) -> str:
    ft = setup.pipe.finetune
    return (f"profile {setup.profile}: {len(runs_of(setup.pipe).finetune)} runs (methods "
            f"{ft.methods}, alphas {ft.alphas}, seeds {ft.seeds}), l_train {ft.l_train}, "
            f"{ft.optim.steps} steps each")


@dataclass
class FinetuningResult(Result):
    """Sections 5.1-5.2's tables: the runs, perplexity by method and window, the regularizer's
    paired effect, the paper's rows beside ours, LongBench-E."""

    runs: pd.DataFrame | None = None
    table_ppl: pd.DataFrame | None = None
    effect_ppl_long: pd.DataFrame | None = None
    paper_beside: pd.DataFrame | None = None
    table23_longbench: pd.DataFrame | None = None


def analyse(setup: Setup) -> FinetuningResult:
    alpha = setup.settings.alpha
    setup.ensure_runs()
    runs = runtable.collect_runs(setup.pipe)
    table = runtable.by_method(runs, runtable.window_columns(runs) + ["ppl_long", "ppl_growth",
                                                        "misalignment", "misalignment_all"])
    effects = ft_tables.paired_effect(runs, "ppl_long", alpha)
    longbench = ft_tables.longbench_table(ft_tables.collect_longbench(setup.pipe), alpha)
    return with_premise(setup, FinetuningResult(
        runs=runs, table_ppl=table, effect_ppl_long=effects,
        paper_beside=ft_tables.paper_table(runs, alpha), table23_longbench=longbench,
        claims=ft_tables.extension_claims(runs, alpha),
        metrics={"runs": runs.to_dict(orient="records"),
                 "effects": effects.to_dict(orient="records"),
                 "longbench": longbench.to_dict(orient="records")}))


def ppl_by_window(setup: Setup, result: FinetuningResult) -> pd.DataFrame:
    """Table 2's tidy table, what its figure plots: one row per run and window (``method``,
    ``loss``, ``seed``, ``window``: its multiple of ``l_train`` and tokens, an ordered
    category; ``perplexity``)."""
    runs, l_train = result.runs, setup.pipe.finetune.l_train
    columns = runtable.window_columns(runs)
    ticks = dict(zip(columns, plots.window_ticks(columns, l_train)))
    long = runs.melt(id_vars=["method", "loss", "seed"], value_vars=columns,
                     var_name="window", value_name="perplexity")
    long["window"] = pd.Categorical(long["window"].map(ticks), categories=list(ticks.values()),
                                    ordered=True)
    return long


def figure_training_curves(setup: Setup, result: FinetuningResult):
    log = runtable.curves(setup.pipe)
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


def figure_misalignment(setup: Setup, result: FinetuningResult):
    fig, ax = plots.plt.subplots(figsize=(6, 3.2))
    plots.sns.barplot(data=result.runs, x="method", y="misalignment", hue="loss",
                      errorbar="sd", ax=ax)
    ax.set(ylabel="L_misalign (SCE, nats;\nboth contexts >= l/2)",
           title="long-short misalignment of the final models")
    plots.axes_legend_outside(ax, "loss")
    save_figure(setup, result, fig, "fig_misalignment_by_method")
    return fig
