"""Section 3's figures: the main figure's tidy table (``loss_by_length``: Figure 1 (a, b) and the
appendix tasks, which the notebook plots in its ``main-figure`` cell, shading ``train_span``)
and Figure 1 (c), OutRep against the identity. ``result`` is the section's
``SyntheticResult``; its ``settings`` are the configuration the grid ran with."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from lsa import plots
from lsa.sections import Result, save_figure

if TYPE_CHECKING:
    from lsa.notebook import Setup


def loss_by_length(setup: Setup, result: Result) -> pd.DataFrame:
    """Figure 1's tidy table, what its figure plots: the identity-output runs, one row per
    (task, encoding, seed, length) with its test ``mse``, in the configured task order."""
    per_length = result.per_length
    ident = per_length[per_length["transform"] == "identity"].copy()
    ident["task"] = pd.Categorical(ident["task"].str.replace("_", " "), ordered=True,
                                   categories=[t.replace("_", " ") for t in result.settings.tasks])
    return ident


def train_span(setup: Setup, result: Result) -> tuple[float, float]:
    """The training lengths as an x range to shade (half a token either side)."""
    cfg = result.settings
    return cfg.train_min_len - 0.5, cfg.train_max_len + 0.5


def figure_outrep(setup: Setup, result: Result):
    """Figure 1 (c): OutRep transforms against the identity."""
    cfg, per_length = result.settings, result.per_length
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
