"""Section 4.1, Table 1 (notebook ``02_misalignment_correlation``): does the long-short
misalignment predict a model's long-context score better than its training loss? Over a
population of models measured by one protocol, with four audits the paper did not do (the
metric's parts, the partial correlation given the training loss, the theory's L2 distance, the
top-1 assumption) and a held-out subset. The population and its tables: ``table1`` (this
package); correlations: ``lsa.stats``."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from lsa import plots, stats
from lsa.claims import paper
from lsa.notebook import Setup
from lsa.sections import Result, save_figure, with_premise
from lsa.sections.correlation import table1 as population
from lsa.stats import p_text

#: the columns population.csv starts with (one row per model); every predictor and score follow
POPULATION_FIRST = ["model", "unit", "kind", "trained_on", "excluded", "group", "method",
                    "setting", "alpha", "seed"]


def _paper_r(row) -> float | None:
    key = {("misalignment", "pearson"): "table1/pearson_misalign",
           ("train_loss", "pearson"): "table1/pearson_train_loss"}.get(
        (row["predictor"], row["method"]))
    return paper(key).value if key else None


@dataclass
class CorrelationResult(Result):
    """Section 4.1's tables: every model measured (``population``), the primary units, Table 1
    and its views, the comparisons, the five audits, the decomposition, within-method
    correlations; ``scores``: the long-context scores measured."""

    population: pd.DataFrame | None = None
    composition: pd.DataFrame | None = None
    units_primary: pd.DataFrame | None = None
    table1: pd.DataFrame | None = None
    table1_views: pd.DataFrame | None = None
    comparisons: pd.DataFrame | None = None
    audit_parts: pd.DataFrame | None = None
    audit_partial: pd.DataFrame | None = None
    audit_top1: pd.DataFrame | None = None
    audit_leave_one_out: pd.DataFrame | None = None
    audit_influence: pd.DataFrame | None = None
    decomposition: pd.DataFrame | None = None
    within_method: pd.DataFrame | None = None
    scores: list[str] = field(default_factory=list)


def analyse(setup: Setup) -> CorrelationResult:
    """Table 1 on the primary population (units), the secondary views, the audits and the
    claims; ``population.csv``: one row per model."""
    pipe, cfg, seed = setup.pipe, setup.settings, setup.seed
    setup.ensure_runs()
    table = population.population_table(pipe)
    scores = population.scores(table)
    main = population.main_score(scores)
    views = population.views(table, cfg.secondary_max_alpha, scores)
    primary = views["primary"]
    kw = {"n_resamples": cfg.bootstrap, "seed": seed}
    # train_loss: one protocol for every model (the main predictor); train_loss_logged: the
    # paper's sense, each run's logged fine-tuning CE at its end (beside it)
    rows = population.table1(primary, ["misalignment", "train_loss", "train_loss_logged"],
                             scores, **kw)
    rows["paper r"] = rows.apply(_paper_r, axis=1)
    by_view = pd.concat([population.table1(v, ["misalignment", "train_loss"], [main], **kw)
                         .assign(view=name, label=population.VIEWS[name], units=len(v))
                         for name, v in views.items() if len(v) >= 3], ignore_index=True)
    for frame in (rows, by_view):  # a p at the floor of the permutations reads "< 1/(B+1)"
        if len(frame):
            frame["p"] = frame["p_permutation"].map(lambda v: p_text(v, cfg.bootstrap))
    comp = population.comparisons(primary, [main], [("misalignment", "train_loss"),
                                                    ("jeffreys", "entropy")], **kw)
    parts = population.table1(primary, ["jeffreys", "entropy"], [main], **kw)
    partial = population.partial_rows(primary, [main], **kw)
    ranking = (stats.correlation(primary["l2"], primary["misalignment"], "spearman",
                                 n_resamples=cfg.bootstrap, n_permutations=cfg.bootstrap,
                                 seed=seed, predictor="l2", score="misalignment").to_dict()
               if len(primary) >= 3 else None)
    method = pipe.ablation.method
    chosen = [m for m in ["base", f"{method}_a0_s0", f"{method}_a0.1_s0", f"base_{method}_x2"]
              if m in set(table.get("model", []))]
    top1 = population.top1_by_l_extra(pipe, chosen)
    loo = (population.leave_one_out(primary, main, **kw) if len(primary) >= 5
           else pd.DataFrame())
    influence = population.unit_influence(primary, main, **kw)
    claims = population.claims(pd.concat([rows, parts], ignore_index=True), comp, partial,
                               loo, ranking, main, cfg.bootstrap, influence)
    ordered = table[[c for c in POPULATION_FIRST if c in table]
                    + [c for c in table.columns if c not in POPULATION_FIRST]] \
        if len(table) else table
    excluded = sorted(table.loc[table["excluded"], "model"]) if len(table) else []
    return with_premise(setup, CorrelationResult(
        population=ordered, composition=population.composition(table), units_primary=primary,
        table1=rows, table1_views=by_view, comparisons=comp, audit_parts=parts,
        audit_partial=partial, audit_top1=top1, audit_leave_one_out=loo,
        audit_influence=influence, decomposition=population.decomposition(pipe, primary),
        within_method=population.within_method(primary, main), scores=scores, claims=claims,
        metrics={"models": len(table), "units_primary": len(primary), "main_score": main,
                 "excluded": excluded, "table1": rows.to_dict(orient="records"),
                 "views": by_view.to_dict(orient="records"),
                 "comparisons": comp.to_dict(orient="records"), "ranking_l2_sce": ranking,
                 "noise": population.noise_text(primary),
                 "narrative": population.narrative(primary, pd.concat([rows, parts]), main)}))


def describe(setup: Setup, result: CorrelationResult) -> str:
    m = result.metrics
    excluded = ", ".join(m["excluded"]) or "none"
    return (f"{m['models']} models, {m['units_primary']} units in the primary population; "
            f"scores {result.scores}; main score {m['main_score']} (NLL beyond the training "
            f"window, longest multiple); excluded by the rule: {excluded}")


def score_label(score: str, l_train: int) -> str:
    """The main score's axis label, on two lines (``score_beyond_4x``: -NLL beyond l_train in
    the 4x windows, in tokens)."""
    return plots.column_label(score, l_train).replace(", ", ",\n", 1)


PREDICTORS = ("misalignment", "train_loss")  # Table 1's two predictors


def score_against_predictors(setup: Setup, result: CorrelationResult) -> pd.DataFrame:
    """Table 1's tidy table, what its figure plots: one row per (primary unit, predictor) with
    the unit's ``kind``, the predictor's ``value`` and the main score (its own column,
    ``result.metrics["main_score"]``)."""
    table, main = result.units_primary, result.metrics["main_score"]
    long = table.melt(id_vars=["unit", "kind"], value_vars=list(PREDICTORS),
                      var_name="predictor", value_name="value")
    return long.merge(table[["unit", main]], on="unit")


def predictor_title(result: CorrelationResult, predictor: str) -> str:
    """A Table 1 panel's title: the predictor and its Pearson r with the main score."""
    row = population.pearson(result.table1, predictor, result.metrics["main_score"])
    return predictor if row is None else f"{predictor}\nPearson r = {population.r_text(row)}"


def figure_parts(setup: Setup, result: CorrelationResult):
    """Audit 1: the score against the metric's parts (alignment, sharpness) and the loss."""
    table, main = result.units_primary, result.metrics["main_score"]
    fig, axes = plots.plt.subplots(1, 3, figsize=(11, 3.4), sharey=True)
    for ax, pred in zip(axes, ["jeffreys", "entropy", "train_loss"]):
        plots.sns.scatterplot(data=table, x=pred, y=main, hue="kind", ax=ax,
                              legend=ax is axes[0])
        ax.set(xlabel=plots.column_label(pred).replace(", ", ",\n", 1), ylabel="")
    axes[0].set_ylabel(score_label(main, setup.pipe.finetune.l_train))  # shared by the row
    fig.tight_layout()
    plots.figure_legend(fig, axes, "model")
    save_figure(setup, result, fig, "fig_audit_parts")
    return fig


def figure_l2_sce(setup: Setup, result: CorrelationResult):
    """Audit 3: the theory's L2 distance against SCE."""
    fig, ax = plots.plt.subplots(figsize=(4.5, 3.4))
    plots.sns.scatterplot(data=result.units_primary, x="l2", y="misalignment",
                          hue="kind", ax=ax)
    ax.set(xlabel="L2 distance ||p - q||", ylabel="SCE (L_misalign, nats)")
    plots.axes_legend_outside(ax, "model")
    save_figure(setup, result, fig, "fig_audit_l2_sce")
    return fig


def figure_influence(setup: Setup, result: CorrelationResult):
    """Audit 5: T1.1's r and T1.4's signed difference with each unit left out in turn, against
    the fit on every unit (None without the table)."""
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
        ax.set(xlabel=f"{name} without the unit\n(dashed: every unit; 95 % interval)",
               yticks=sub.index, yticklabels=sub["unit"])
    axes[0][0].invert_yaxis()  # the shared y axis: once, the first unit on top
    axes[0][0].set_ylabel("unit left out")
    fig.tight_layout()
    save_figure(setup, result, fig, "fig_audit_influence")
    return fig


def figure_top1(setup: Setup, result: CorrelationResult):
    """Audit 4: how often cutting the context changes the top-1 token (None without data)."""
    top1 = result.audit_top1
    if not len(top1):
        return None
    fig, ax = plots.plt.subplots(figsize=(6, 3.4))
    for model, sub in top1.groupby("model"):
        ax.errorbar(sub["l_extra_mid"], sub["top1_changed"],
                    yerr=[sub["top1_changed"] - sub["low"], sub["high"] - sub["top1_changed"]],
                    marker="o", capsize=3, label=model)
    ax.set(xlabel="l_extra (tokens cut)", ylabel="fraction of positions whose\ntop-1 token changed",
           title=f"cutting the context from l = {setup.pipe.finetune.l_train} tokens",
           ylim=(0, 1))
    plots.axes_legend_outside(ax, "model")
    save_figure(setup, result, fig, "fig_audit_top1")
    return fig
