"""Section 3, Figure 1 (notebook ``01_synthetic_study``): regression on binary sequences,
trained short and tested long, for each task x positional encoding, and output
reparameterization (OutRep). The models, tasks and training are a run of their own
(``lsa.synthetic``, kind ``synthetic``), which the driver's reader gives this section as
``RunTables.synthetic``; its tables: ``tables``; its claims: ``claims``; its figures and the
main figure's tidy table (``loss_by_length``, which the notebook plots): ``figures``."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from lsa.config import PipelineConfig, SyntheticConfig
from lsa.gates import Gate
from lsa.notebook import Setup
from lsa.runtable import RunTables
from lsa.sections import Result
from lsa.sections.synthetic import claims, tables
from lsa.sections.synthetic.figures import figure_outrep, loss_by_length, train_span
from lsa.synthetic import make_batch, run_specs

__all__ = ["SyntheticResult", "analyse", "describe", "examples", "figure_outrep",
           "loss_by_length", "train_span"]


def examples(setup: Setup) -> list[str]:
    """Two sequences of each task with their targets (what the model must predict)."""
    import torch

    cfg, gen = setup.settings, torch.Generator().manual_seed(setup.settings.seed)
    lines = []
    for task in cfg.tasks:
        tokens, target = make_batch(task, torch.tensor([4, 7]), gen)
        for row, y in zip(tokens, target):
            lines.append(f"{task:>12}: {''.join(map(str, row[1:].tolist()))!s:<8} -> "
                         f"{y.item():.3f}")
    return lines


@dataclass
class SyntheticResult(Result):
    """Section 3's tables: the test loss of every run at every length, and its summary;
    ``settings``: the configuration the grid ran with (what the figures read)."""

    per_length: pd.DataFrame | None = None
    summary: pd.DataFrame | None = None
    settings: SyntheticConfig | None = None


def analyse(pipe: PipelineConfig, runs: RunTables, gates: list[Gate]) -> SyntheticResult:
    """The grid's test loss at every length (``runs.synthetic``: every (task, encoding,
    transform, seed) trained and tested by its run, ``lsa.synthetic.make``), its summary and
    the claims."""
    runs.need("synthetic")
    cfg, per_length = pipe.synthetic, runs.synthetic
    summary = tables.summarize(per_length, cfg)
    return SyntheticResult(per_length=per_length, summary=summary, settings=cfg,
                           claims=claims.synthetic_claims(per_length, cfg),
                           metrics={"summary": summary.to_dict(orient="records")})


def describe(setup: Setup, result: SyntheticResult) -> str:
    cfg = result.settings
    return (f"profile {setup.profile}: {len(run_specs(cfg))} runs (tasks {cfg.tasks}, "
            f"encodings {cfg.encodings}, OutRep {cfg.outrep_transforms} on "
            f"{cfg.outrep_tasks}, {cfg.seeds} seed(s)), trained on lengths "
            f"{cfg.train_min_len}-{cfg.train_max_len} for {cfg.steps} steps, tested up to "
            f"{cfg.test_max_len}")
