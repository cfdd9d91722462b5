"""Section 4.1, Table 1 (notebook ``02_misalignment_correlation``): does the long-short
misalignment predict a model's long-context score better than its training loss? Over a
population of models measured by one protocol, with the audits the paper did not do (the
metric's parts, the partial correlation given the training loss, the theory's L2 distance, the
top-1 assumption, leaving a method, a kind or a unit out). Its tables: ``tables``; its claims
and texts: ``claims``; its figures and the main figure's tidy table
(``score_against_predictors``, which the notebook plots): ``figures``; correlations:
``lsa.stats``."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from lsa import runtable
from lsa.config import PipelineConfig
from lsa.gates import Gate
from lsa.notebook import Setup
from lsa.runtable import RunTables
from lsa.sections import Result
from lsa.sections.correlation import claims, tables
from lsa.sections.correlation.figures import (
    figure_influence,
    figure_l2_sce,
    figure_parts,
    figure_top1,
    predictor_title,
    score_against_predictors,
    score_label,
)
from lsa.stats import p_text

__all__ = ["CorrelationResult", "analyse", "describe", "figure_influence", "figure_l2_sce",
           "figure_parts", "figure_top1", "predictor_title", "score_against_predictors",
           "score_label"]


@dataclass
class CorrelationResult(Result):
    """Section 4.1's tables: every model measured (``population``), the primary units, Table 1
    and its views, the comparisons, the five audits, the decomposition, within-method
    correlations; ``scores``: the long-context scores measured; ``l_train``: the training
    window the models are measured at."""

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
    l_train: int = 0


def analyse(pipe: PipelineConfig, runs: RunTables, gates: list[Gate]) -> CorrelationResult:
    """Table 1 on the primary population (units) of ``runs.models``, the secondary views, the
    audits (audit 3 on ``runs.last_positions``, the decomposition with ``runs.references``)
    and the claims; ``population.csv``: one row per model."""
    runs.need("models", "last_positions", "references")
    cfg, seed = pipe.population, pipe.seed
    table = tables.population(runs.models, cfg.exclude_ppl_ratio)
    scores = tables.scores(table)
    main = tables.main_score(scores)
    views = tables.views(table, cfg.secondary_max_alpha, scores)
    primary = views["primary"]
    kw = {"n_resamples": cfg.bootstrap, "seed": seed}
    # train_loss: one protocol for every model (the main predictor); train_loss_logged: the
    # paper's sense, each run's logged fine-tuning CE at its end (beside it)
    rows = tables.table1(primary, ["misalignment", "train_loss", "train_loss_logged"],
                         scores, **kw)
    rows["paper r"] = rows.apply(tables.paper_r, axis=1)
    by_view = pd.concat([tables.table1(v, ["misalignment", "train_loss"], [main], **kw)
                         .assign(view=name, label=tables.VIEWS[name], units=len(v))
                         for name, v in views.items() if len(v) >= 3], ignore_index=True)
    for frame in (rows, by_view):  # a p at the floor of the permutations reads "< 1/(B+1)"
        if len(frame):
            frame["p"] = frame["p_permutation"].map(lambda v: p_text(v, cfg.bootstrap))
    comp = tables.comparisons(primary, [main], [("misalignment", "train_loss"),
                                                ("jeffreys", "entropy")], **kw)
    parts = tables.table1(primary, ["jeffreys", "entropy"], [main], **kw)
    partial = tables.partial_rows(primary, [main], **kw)
    ranking = tables.l2_ranking(primary, cfg.bootstrap, seed)
    measured = set(table.get("model", []))  # audit 3: the models of Table 1 among its four
    top1 = tables.top1_by_l_extra(runs.last_positions, [
        m for m in runtable.audit_models(pipe.ablation.method) if m in measured])
    loo = (tables.leave_one_out(primary, main, **kw) if len(primary) >= 5
           else pd.DataFrame())
    influence = tables.unit_influence(primary, main, **kw)
    found = claims.table1_claims(pd.concat([rows, parts], ignore_index=True), comp, partial,
                                 loo, ranking, main, cfg.bootstrap, influence)
    return CorrelationResult(
        population=tables.population_csv(table), composition=tables.composition(table),
        units_primary=primary, table1=rows, table1_views=by_view, comparisons=comp,
        audit_parts=parts, audit_partial=partial, audit_top1=top1, audit_leave_one_out=loo,
        audit_influence=influence,
        decomposition=tables.decomposition(primary, runs.references, pipe.finetune.l_train),
        within_method=tables.within_method(primary, main), scores=scores,
        l_train=pipe.finetune.l_train, claims=found,
        metrics={"models": len(table), "units_primary": len(primary), "main_score": main,
                 "excluded": tables.excluded_models(table),
                 "table1": rows.to_dict(orient="records"),
                 "views": by_view.to_dict(orient="records"),
                 "comparisons": comp.to_dict(orient="records"), "ranking_l2_sce": ranking,
                 "noise": claims.noise_text(primary),
                 "label_change": claims.label_change_text(
                     top1, runtable.beyond_window(pipe), next(
                         (g for g in gates if g.gate == "G1"), None)),
                 "narrative": claims.narrative(primary, pd.concat([rows, parts]), main)})


def describe(setup: Setup, result: CorrelationResult) -> str:
    m = result.metrics
    excluded = ", ".join(m["excluded"]) or "none"
    return (f"{m['models']} models, {m['units_primary']} units in the primary population; "
            f"scores {result.scores}; main score {m['main_score']} (NLL beyond the training "
            f"window, longest multiple); excluded by the rule: {excluded}")
