"""Sections 5.1-5.2, Tables 2-3 (notebook ``03_regularized_finetuning``): every method with CE
and with CE + alpha * SCE, perplexity by window, the paired effect of the regularizer, the
paper's numbers beside ours. Its tables: ``tables``; its claims: ``claims``; its figures and
the main figure's tidy table (``ppl_by_window``, which the notebook plots): ``figures``."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from lsa import runtable
from lsa.config import PipelineConfig
from lsa.gates import Gate
from lsa.notebook import Setup
from lsa.runtable import RunTables
from lsa.sections import Result
from lsa.sections.finetuning import claims, tables
from lsa.sections.finetuning.figures import (
    figure_misalignment,
    figure_training_curves,
    ppl_by_window,
)

__all__ = ["FinetuningResult", "analyse", "describe", "figure_misalignment",
           "figure_training_curves", "ppl_by_window"]


@dataclass
class FinetuningResult(Result):
    """Sections 5.1-5.2's tables: the runs, perplexity by method and window, the regularizer's
    paired effect, the paper's rows beside ours, LongBench-E; ``curves``: the runs' training
    logs (for the figure, not saved); ``l_train``: the training window."""

    runs: pd.DataFrame | None = None
    table_ppl: pd.DataFrame | None = None
    effect_ppl_long: pd.DataFrame | None = None
    paper_beside: pd.DataFrame | None = None
    table23_longbench: pd.DataFrame | None = None
    curves: pd.DataFrame | None = field(default=None, metadata={"saved": False})
    l_train: int = 0


def analyse(pipe: PipelineConfig, runs: RunTables, gates: list[Gate]) -> FinetuningResult:
    """The grid's runs (``runs.grid``) by method and window, the regularizer's paired effect
    at ``view.alpha``, LongBench-E where it ran, the claims (the paper's on every base model
    of ``finetune.bases``, ``runs.base_factor``)."""
    runs.need("grid", "base_factor", "curves", "longbench")
    alpha, grid = pipe.view.alpha, runs.grid
    table = runtable.by_method(grid, runtable.window_columns(grid) + [
        "ppl_long", "ppl_growth", "misalignment", "misalignment_all"])
    effects = tables.paired_effect(grid, "ppl_long", alpha)
    longbench = tables.longbench_table(runs.longbench, alpha)
    return FinetuningResult(
        runs=grid, table_ppl=table, effect_ppl_long=effects,
        paper_beside=tables.paper_table(grid, alpha), table23_longbench=longbench,
        curves=runs.curves, l_train=pipe.finetune.l_train,
        claims=claims.extension_claims(grid, alpha, bases=runs.base_factor),
        metrics={"runs": grid.to_dict(orient="records"),
                 "effects": effects.to_dict(orient="records"),
                 "longbench": longbench.to_dict(orient="records")})


def describe(setup: Setup, result: FinetuningResult) -> str:
    ft = setup.pipe.finetune
    return (f"profile {setup.profile}: {len(result.runs)} of {len(setup.plan.grid)} runs "
            f"finished (methods {ft.methods}, alphas {ft.alphas}, seeds {ft.seeds}), l_train "
            f"{ft.l_train}, {ft.optim.steps} steps each")
