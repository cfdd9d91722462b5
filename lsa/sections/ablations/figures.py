"""Section 5.3's figures: item 1's tidy table (``divergence_effects``, which the notebook plots in
its ``main-figure`` cell, with ``alpha_axis``), the alpha sweep, the l_extra range, the
longer-exposure control and each part alone. Each reads the result (its runs, effects and
settings) and draws nothing for an item the profile does not run."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from lsa import plots, runtable
from lsa.sections import Result, save_figure
from lsa.sections.ablations.tables import l_extra_arms

if TYPE_CHECKING:
    from lsa.notebook import Setup


def divergence_effects(setup: Setup, result: Result) -> pd.DataFrame | None:
    """Item 1's tidy table, what its figure plots: the paired change of the longest-window NLL
    per (``baseline``, ``divergence``, ``alpha``) with its 95 % t interval (``low``, ``high``;
    none with one seed), the same-cost control (CE on both windows) first; None when the item
    is not run."""
    eff, long = result.effects.get("divergence"), result.long_nll
    if eff is None:
        return None
    data = eff[eff["column"] == long].copy()
    data["divergence"] = data["setting"].str.split(" ").str[0]
    data["alpha"] = data["setting"].str.split(" ").str[1].astype(float)
    if data["seeds"].min() <= 1:
        data[["low", "high"]] = data[["delta", "delta"]].to_numpy()
    order = sorted(data["baseline"].unique(), key=lambda b: "both" not in b)
    data["baseline"] = pd.Categorical(data["baseline"], categories=order, ordered=True)
    return data.sort_values(["baseline", "divergence", "alpha"])


def alpha_axis(ax, alphas) -> None:
    """alpha on a log axis, symmetric-log (linear below the smallest positive alpha) when alpha
    0 is shown: a sweep spans orders of magnitude, and its claim lives at the small ones."""
    positive = sorted(a for a in set(alphas) if a > 0)
    if min(alphas) <= 0 and positive:
        ax.set_xscale("symlog", linthresh=positive[0], linscale=0.5)
    elif positive:
        ax.set_xscale("log")
    shown = sorted(set(alphas))
    ax.set_xticks(shown, [f"{a:g}" for a in shown])  # the alphas run, as numbers
    ax.minorticks_off()
    ax.set_xlabel("alpha (weight of L_misalign; symlog)" if min(alphas) <= 0
                  else "alpha (weight of L_misalign)")


def _pointplot(setup: Setup, result: Result, data: pd.DataFrame, x: str, hue: str,
               title: str, name: str, xlabel: str):
    fig, ax = plots.plt.subplots(figsize=(6, 3.6))
    plots.sns.pointplot(data=data, x=x, y=result.long, hue=hue, errorbar="sd",
                        dodge=0.2 if data[hue].nunique() > 1 else False, ax=ax)
    ax.set(title=title, xlabel=xlabel, ylabel=plots.column_label(result.long, result.l_train))
    plots.axes_legend_outside(ax, hue.replace("_", " "))
    save_figure(setup, result, fig, name)
    return fig


def figure_alpha_sweep(setup: Setup, result: Result):
    """Item 2 (Table 4): the longest-window perplexity against alpha, per method."""
    cfg, runs = result.settings, result.runs
    if "alpha_sweep" not in result.effects:
        return None
    sweep = runs[runs["method"].isin(cfg.sweep_methods) & runs["setting"].isin(
        ["CE"] + [f"SCE {a:g}" for a in cfg.sweep_alphas])]
    long = result.long
    fig, ax = plots.plt.subplots(figsize=(6, 3.6))
    for method, sub in sweep.groupby("method"):  # alpha as a number: its axis is to scale
        stats = sub.groupby("alpha")[long].agg(["mean", "std"]).reset_index()
        ax.errorbar(stats["alpha"], stats["mean"], yerr=stats["std"].fillna(0), marker="o",
                    capsize=3, label=method)
    alpha_axis(ax, sweep["alpha"])
    values = sweep[long].dropna()
    if len(values) and values.min() > 0 and values.max() / values.min() > 10:
        ax.set_yscale("log")  # perplexity spans decades: the small alphas stay readable
    ax.set(title="alpha sweep (mean and sd over seeds)",
           ylabel=plots.column_label(long, result.l_train)
           + (" (log)" if ax.get_yscale() == "log" else ""))
    plots.axes_legend_outside(ax, "method")
    save_figure(setup, result, fig, "fig_ablation_alpha_sweep")
    return fig


def figure_l_extra(setup: Setup, result: Result):
    """Item 3 (Table 5): the longest-window perplexity by l_extra setting, per alpha."""
    cfg, runs = result.settings, result.runs
    if "l_extra" not in result.effects:
        return None
    arms = {f"{d} {a:g}" for d, a in l_extra_arms(cfg)}
    lx = runs[(runs["method"] == cfg.method) & (runs["alpha"] > 0) & (runs["ce_on"] == "a")
              & runs["steps"].eq(result.steps)]
    lx = lx.assign(arm=lx["divergence"] + " " + lx["alpha"].map("{:g}".format))
    lx = lx[lx["arm"].isin(arms)]
    return _pointplot(setup, result, lx, "l_extra_setting", "arm",
                      f"l_extra setting ({cfg.method}; mean and sd over seeds)",
                      "fig_ablation_l_extra", "l_extra setting (range of the tokens cut)")


def figure_exposure(setup: Setup, result: Result):
    """Item 4: perplexity by window for CE, CE on both windows and SCE."""
    cfg, runs = result.settings, result.runs
    if "exposure" not in result.effects:
        return None
    keep = ["CE", "CE (both windows)", f"SCE {cfg.alpha:g}"]
    ex = runs[(runs["method"] == cfg.method) & runs["setting"].isin(keep)]
    l_train, columns = result.l_train, runtable.window_columns(runs)
    ticks = dict(zip(columns, plots.window_ticks(columns, l_train)))
    long = ex.melt(id_vars=["setting", "seed"], value_vars=columns,
                   var_name="window", value_name="perplexity")
    long["window"] = long["window"].map(ticks)
    fig, ax = plots.plt.subplots(figsize=(6, 3.6))
    plots.sns.pointplot(data=long, x="window", y="perplexity", hue="setting", hue_order=keep,
                        errorbar="sd", dodge=0.25, ax=ax, order=list(ticks.values()))
    ax.set(title=f"longer-exposure control ({cfg.method}; mean and sd over seeds)",
           xlabel=f"evaluation window (l_train = {l_train} tokens)", ylabel="perplexity")
    plots.axes_legend_outside(ax, "setting")
    save_figure(setup, result, fig, "fig_ablation_exposure")
    return fig


def figure_parts(setup: Setup, result: Result):
    """Item 6: each part alone, raw fine-tuning to both."""
    cfg, runs = result.settings, result.runs
    if "parts" not in result.effects:
        return None
    reg = f"SCE {cfg.alpha:g}"
    parts = runs[runs["method"].isin(["none", cfg.method]) & runs["setting"].isin(["CE", reg])]
    fig, ax = plots.plt.subplots(figsize=(5, 3.4))
    plots.sns.barplot(data=parts, x="method", y=result.long, hue="setting",
                      errorbar="sd", ax=ax)
    ax.set(title="each part alone (mean and sd over seeds)", xlabel="method",
           ylabel=plots.column_label(result.long, result.l_train))
    plots.axes_legend_outside(ax, "setting")
    save_figure(setup, result, fig, "fig_ablation_parts")
    return fig
