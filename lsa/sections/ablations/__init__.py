"""Section 5.3 (notebook ``04_ablations``): the regularizer taken apart. Every run is a
fine-tuning run of the one trainer from the pipeline's base model, paired by seed (further
base models, ``ablation.base_seeds``: the core comparisons again, paired by base and seed);
every effect is the mean paired difference over seeds with its Student t interval
(``lsa.sections.ablations.items``), a verdict only outside it (``lsa.stats``). Items: 1 alignment or
sharpening (``divergence``), 2 the alpha sweep, 3 the l_extra range, 4 the longer-exposure
control, 5 equal compute (counted work: the tokens a step runs forward and backward, never a
timing), 6 each part alone. A profile that does not run an item says so."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from lsa import plots, runtable
from lsa.notebook import Setup
from lsa.runs import runs_of
from lsa.sections import Result, save_figure, with_premise
from lsa.sections.ablations import items as ablation

ITEMS = ["divergence", "alpha_sweep", "l_extra", "exposure", "compute", "parts"]


def describe(setup: Setup) -> str:
    cfg, ft = setup.settings, setup.pipe.finetune
    return (f"profile {setup.profile}: items {cfg.items}, "
            f"{len(runs_of(setup.pipe).ablation)} runs ({cfg.method}, seeds {cfg.seeds}), "
            f"l_train {ft.l_train}, {ft.optim.steps} steps each")


@dataclass
class AblationsResult(Result):
    """Section 5.3's tables: the runs, each item's paired effects (``effects_<item>``, None
    where the item is not run), the far-context question per method, the core comparisons on
    every base model, the claims split by kind; ``long`` / ``long_nll``: the longest window's
    perplexity and NLL columns, ``columns``: the summary's, ``compute``: item 5's accounting."""

    runs: pd.DataFrame | None = None
    effects_divergence: pd.DataFrame | None = None
    effects_alpha_sweep: pd.DataFrame | None = None
    effects_l_extra: pd.DataFrame | None = None
    effects_exposure: pd.DataFrame | None = None
    effects_compute: pd.DataFrame | None = None
    effects_parts: pd.DataFrame | None = None
    effects_far_context: pd.DataFrame | None = None
    bases: pd.DataFrame | None = None
    runs_every_base: pd.DataFrame | None = None
    claims_paper: pd.DataFrame | None = None
    claims_controls: pd.DataFrame | None = None
    long: str = ""
    long_nll: str = ""
    columns: list[str] = field(default_factory=list)
    compute: dict[str, Any] | None = None


def analyse(setup: Setup) -> AblationsResult:
    """The runs of every configured item, their paired effects and claims, item by item; each
    distinct comparison is claimed once (``ablation.Claims``)."""
    pipe, cfg = setup.pipe, setup.settings
    names = runs_of(pipe).ablation
    setup.ensure_runs()
    every = ablation.with_entropy(runtable.collect_runs(pipe, names))
    runs = every[every["base_seed"] == pipe.pretrain.seed]  # items 1-6: the pipeline's base
    long, long_ppl = ablation.longest_column(runs), ablation.longest_column(runs, "ppl")
    columns = runtable.window_columns(runs) + ["ppl_growth", "misalignment", "jeffreys",
                                               "mean_entropy"]
    judged = [long, long_ppl]
    metrics = [*judged, *ablation.METRIC_COLUMNS, *ablation.far_columns(runs)]
    result = AblationsResult(runs=runs, long=long_ppl, long_nll=long, columns=columns)
    ft = pipe.finetune  # CE + alpha SCE vs CE-only per method: Section 5's claims already
    out = ablation.Claims({(m, a) for m in ft.methods for a in ft.alphas if a > 0})
    items: dict[str, Any] = {
        "divergence": (ablation.divergence_pairs, metrics, ablation.divergence_claims),
        "alpha_sweep": (ablation.sweep_pairs, judged,
                        lambda o, eff, cfg, col: ablation.sweep_claims(o, runs, eff, cfg, col)),
        "l_extra": (ablation.l_extra_pairs, judged, ablation.l_extra_claims),
        "exposure": (ablation.exposure_pairs, metrics, ablation.exposure_claims),
        "compute": (ablation.compute_pairs, judged, _compute_claims(setup, result)),
        "parts": (ablation.parts_pairs, judged, ablation.parts_claims),
    }
    for item, (pairs, cols, claims) in items.items():
        if item not in cfg.items:
            result.claims.append(ablation.not_run(item))
            continue
        eff = ablation.effects(runs, pairs(cfg), cols)
        setattr(result, f"effects_{item}", eff)
        claims(out, eff, cfg, long)
    far = None
    if "exposure" in cfg.items:  # item 4's question per method, against the same-cost control
        far = ablation.effects(runs, ablation.far_context_pairs(cfg), ablation.far_columns(runs))
        result.effects_far_context = far
        if len(far):
            ablation.far_context_claims(out, far, cfg)
    result.claims += [c.to_dict() for c in out.claims]
    bases = None
    if cfg.base_seeds:  # the core comparisons on every base model (no further claims)
        bases = ablation.base_effects(every, cfg, [c for c in dict.fromkeys(("nll_2x", long))
                                                   if c in every.columns])
        result.bases, result.runs_every_base = bases, every
    divergence = result.effects_divergence
    result.metrics = {"items": list(cfg.items), "runs": runs.to_dict(orient="records"),
                      "closing": ablation.closing_text(divergence, long),
                      "far_context": ablation.far_context_text(divergence, far),
                      "bases": ablation.bases_text(bases, base_gains(pipe)),
                      "multiplicity": ablation.multiplicity_text(result.claims)}
    result = with_premise(setup, result, cfg.method)  # its items are about one method
    if not result.metrics["premise_met"]:  # the texts say what the numbers would, not a verdict
        for key in ("closing", "far_context", "bases"):
            result.metrics[key] = ("**Premise not met** (the gates above): what follows is what "
                                   "the numbers would say on this testbed, not a verdict on the "
                                   "paper.\n\n" + result.metrics[key])
    result.claims_paper = _claims_of(result.claims, "paper")
    result.claims_controls = _claims_of(result.claims, "control")
    return result


def base_gains(pipe) -> dict[str, str]:
    """Each finished base model's far-copy gain at its window (gate G1's number, computed by
    ``lsa.gates.gate_g1``), with its 95 % interval."""
    from lsa.gates import gate_g1

    out = {}
    for name, base in runs_of(pipe).bases.items():
        if base.finished:
            g = gate_g1(base.metrics(), pipe.pretrain.model.base_window, pipe.gates.g1_min_gain)
            if g.passed is not None:
                out[name] = f"{g.value:.3g} [{g.low:.3g}, {g.high:.3g}] nats"
    return out


def _claims_of(claims: list[dict[str, Any]], kind: str) -> pd.DataFrame:
    from lsa.claims import claims_table

    table = claims_table(claims)
    return table[table["kind"] == kind].drop(columns=["section", "kind"])


def counts(result: AblationsResult) -> str:
    """The section's claims counted apart: the paper's by verdict, the controls by outcome."""
    from lsa.claims import claims_table, counts_sentence, verdict_counts

    return counts_sentence(*verdict_counts(claims_table(result.claims))) + "."


def _compute_claims(setup: Setup, result: AblationsResult):
    """Item 5's claims, against the CE-only run nearest to equal counted work
    (``ablation.equal_compute_steps``); the accounting goes into the result (``compute``)."""
    def claims(out, eff, cfg, column):
        steps = setup.pipe.finetune.optim.steps
        accounting = ablation.equal_compute_steps(steps, setup.pipe.finetune.l_train)
        result.compute = accounting
        ablation.compute_claims(out, eff, cfg, column, steps,
                                accounting["equal forward and backward tokens"])
    return claims


def effects(result: AblationsResult, item: str, columns: list[str] | None = None
            ) -> pd.DataFrame | None:
    """Item ``item``'s paired effects (the rows of ``columns``), or None when not run."""
    eff = getattr(result, f"effects_{item}")
    if eff is None or columns is None:
        return eff
    return eff[eff["column"].isin(columns)]


def summary(setup: Setup, result: AblationsResult) -> pd.DataFrame:
    """Item 1's runs: mean and spread by setting of every column."""
    runs = result.runs
    return ablation.summary(runs[runs["method"] == setup.settings.method],
                            result.columns)


def divergence_effects(setup: Setup, result: AblationsResult) -> pd.DataFrame | None:
    """Item 1's tidy table, what its figure plots: the paired change of the longest-window NLL
    per (``baseline``, ``divergence``, ``alpha``) with its 95 % t interval (``low``, ``high``;
    none with one seed), the same-cost control (CE on both windows) first; None when the item
    is not run."""
    eff, long = result.effects_divergence, result.long_nll
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


def _pointplot(setup: Setup, result: Result, data: pd.DataFrame, x: str, hue: str, title: str,
               name: str, xlabel: str):
    fig, ax = plots.plt.subplots(figsize=(6, 3.6))
    plots.sns.pointplot(data=data, x=x, y=result.long, hue=hue, errorbar="sd",
                        dodge=0.2 if data[hue].nunique() > 1 else False, ax=ax)
    ax.set(title=title, xlabel=xlabel,
           ylabel=plots.column_label(result.long, setup.pipe.finetune.l_train))
    plots.axes_legend_outside(ax, hue.replace("_", " "))
    save_figure(setup, result, fig, name)
    return fig


def figure_alpha_sweep(setup: Setup, result: AblationsResult):
    """Item 2 (Table 4): the longest-window perplexity against alpha, per method."""
    cfg, runs = setup.settings, result.runs
    if result.effects_alpha_sweep is None:
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
    ax.set(title="alpha sweep (mean and sd over seeds)",
           ylabel=plots.column_label(long, setup.pipe.finetune.l_train))
    plots.axes_legend_outside(ax, "method")
    save_figure(setup, result, fig, "fig_ablation_alpha_sweep")
    return fig


def figure_l_extra(setup: Setup, result: AblationsResult):
    """Item 3 (Table 5): the longest-window perplexity by l_extra setting, per alpha."""
    cfg, runs = setup.settings, result.runs
    if result.effects_l_extra is None:
        return None
    arms = {f"{d} {a:g}" for d, a in ablation.l_extra_arms(cfg)}
    lx = runs[(runs["method"] == cfg.method) & (runs["alpha"] > 0) & (runs["ce_on"] == "a")
              & runs["steps"].eq(setup.pipe.finetune.optim.steps)]
    lx = lx.assign(arm=lx["divergence"] + " " + lx["alpha"].map("{:g}".format))
    lx = lx[lx["arm"].isin(arms)]
    return _pointplot(setup, result, lx, "l_extra_setting", "arm",
                      f"l_extra setting ({cfg.method}; mean and sd over seeds)",
                      "fig_ablation_l_extra", "l_extra setting (range of the tokens cut)")


def best_of_item1(result: AblationsResult) -> str | None:
    """Item 1's lowest longest-window perplexity, beside item 3's fixed alphas."""
    eff, long = result.effects_divergence, result.long_nll
    if eff is None or result.effects_l_extra is None:
        return None
    best = eff[(eff["column"] == long) & (eff["baseline"].str.endswith(" CE"))].sort_values(
        "delta").iloc[0]
    return f"item 1's lowest {long}: {best.setting} (paired change {best.delta:+.3g})"


def figure_exposure(setup: Setup, result: AblationsResult):
    """Item 4: perplexity by window for CE, CE on both windows and SCE."""
    cfg, runs = setup.settings, result.runs
    if result.effects_exposure is None:
        return None
    keep = ["CE", "CE (both windows)", f"SCE {cfg.alpha:g}"]
    ex = runs[(runs["method"] == cfg.method) & runs["setting"].isin(keep)]
    l_train, columns = setup.pipe.finetune.l_train, runtable.window_columns(runs)
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


def compute_text(setup: Setup, result: AblationsResult) -> str | None:
    """Item 5's accounting: CE-only steps of equal cost, by what is counted."""
    accounting = result.compute
    if accounting is None:
        return None
    steps = setup.pipe.finetune.optim.steps
    return "\n".join([f"- {k}: {v:.3g} CE-only steps" for k, v in accounting.items()] + [
        "", f"A regularized step runs two windows of l_train tokens, forward and backward: at "
        f"equal counted work {steps} regularized steps cost "
        f"{accounting['equal forward and backward tokens']:.0f} CE-only steps on window A. "
        "The paper's 47/95/190 against 50/100/200 steps (a 3-5 % overhead) counts a baseline "
        "that also runs both windows. Measured times: `python -m lsa bench misalign` (README)."])


def figure_parts(setup: Setup, result: AblationsResult):
    """Item 6: each part alone, raw fine-tuning to both."""
    cfg, runs = setup.settings, result.runs
    if result.effects_parts is None:
        return None
    reg = f"SCE {cfg.alpha:g}"
    parts = runs[runs["method"].isin(["none", cfg.method]) & runs["setting"].isin(["CE", reg])]
    fig, ax = plots.plt.subplots(figsize=(5, 3.4))
    plots.sns.barplot(data=parts, x="method", y=result.long, hue="setting",
                      errorbar="sd", ax=ax)
    ax.set(title="each part alone (mean and sd over seeds)", xlabel="method",
           ylabel=plots.column_label(result.long, setup.pipe.finetune.l_train))
    plots.axes_legend_outside(ax, "setting")
    save_figure(setup, result, fig, "fig_ablation_parts")
    return fig
