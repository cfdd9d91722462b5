"""Section 3, Figure 1 (notebook ``01_synthetic_study``): regression on binary sequences,
trained short and tested long, for each task x positional encoding, and output
reparameterization (OutRep). The models and tasks: ``lsa.sections.synthetic.study``."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from lsa import plots
from lsa.notebook import Setup
from lsa.sections import Result, save_figure
from lsa.sections.synthetic import study as synthetic


def examples(setup: Setup) -> list[str]:
    """Two sequences of each task with their targets (what the model must predict)."""
    import torch

    cfg, gen = setup.settings, torch.Generator().manual_seed(setup.settings.seed)
    lines = []
    for task in cfg.tasks:
        tokens, target = synthetic.make_batch(task, torch.tensor([4, 7]), gen)
        for row, y in zip(tokens, target):
            lines.append(f"{task:>12}: {''.join(map(str, row[1:].tolist()))!s:<8} -> "
                         f"{y.item():.3f}")
    return lines


@dataclass
class SyntheticResult(Result):
    """Section 3's tables: the test loss of every run at every length, and its summary."""

    per_length: pd.DataFrame | None = None
    summary: pd.DataFrame | None = None


def analyse(setup: Setup) -> SyntheticResult:
    """Train every (task, encoding, transform, seed) and test it at every length."""
    cfg = setup.settings
    per_length = synthetic.run_grid(cfg)
    summary = synthetic.summarize(per_length, cfg)
    return SyntheticResult(per_length=per_length, summary=summary,
                           claims=synthetic.claims(per_length, cfg),
                           metrics={"summary": summary.to_dict(orient="records")})


def loss_by_length(setup: Setup, result: SyntheticResult) -> pd.DataFrame:
    """Figure 1's tidy table, what its figure plots: the identity-output runs, one row per
    (task, encoding, seed, length) with its test ``mse``, in the configured task order."""
    per_length = result.per_length
    ident = per_length[per_length["transform"] == "identity"].copy()
    ident["task"] = pd.Categorical(ident["task"].str.replace("_", " "), ordered=True,
                                   categories=[t.replace("_", " ") for t in setup.settings.tasks])
    return ident


def train_span(setup: Setup) -> tuple[float, float]:
    """The training lengths as an x range to shade (half a token either side)."""
    return setup.settings.train_min_len - 0.5, setup.settings.train_max_len + 0.5


def figure_outrep(setup: Setup, result: SyntheticResult):
    """Figure 1 (c): OutRep transforms against the identity."""
    cfg, per_length = setup.settings, result.per_length
    outrep = per_length[per_length["task"].isin(cfg.outrep_tasks)
                        & per_length["encoding"].isin(cfg.outrep_encodings)]
    cells = [(t, e) for t in cfg.outrep_tasks for e in cfg.outrep_encodings]
    fig, axes = plots.plt.subplots(1, len(cells), figsize=(4.2 * len(cells), 3.6),
                                   squeeze=False)
    for ax, (task, enc) in zip(axes[0], cells):
        sub = outrep[(outrep["task"] == task) & (outrep["encoding"] == enc)]
        plots.loss_vs_length(ax, sub, "transform", (cfg.train_min_len, cfg.train_max_len),
                             f"OutRep: {task} ({enc})")
    fig.tight_layout()
    plots.figure_legend(fig, axes[0], "output transform")
    save_figure(setup, result, fig, "fig1c_outrep")
    return fig
