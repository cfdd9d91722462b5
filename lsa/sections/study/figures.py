"""Section 07's figure: each test's per-base effects with its estimate and interval; its tidy
table (``effects_long``) is what the notebook's main-figure cell draws."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsa import plots
from lsa.sections import Result, save_figure
from lsa.sections.study.tables import effects_long

if TYPE_CHECKING:
    from lsa.notebook import Setup


def figure_effects(setup: Setup, result: Result) -> None:
    """Per-base effects of every test (dots), its estimate and interval (bar), 0 marked."""
    data = effects_long(result.analysis)
    if data.empty:
        return
    fig, ax = plots.plt.subplots(figsize=(7, 3.8))
    plots.sns.stripplot(data=data, x="test", y="effect", ax=ax, color="0.4", size=4)
    summary = data.drop_duplicates("test")
    ax.errorbar(range(len(summary)), summary["estimate"],
                yerr=[summary["estimate"] - summary["low"], summary["high"] - summary["estimate"]],
                fmt="o", color="C3", capsize=4)
    ax.axhline(0, color="0.6", lw=0.8)
    ax.set(title="per-base effects (arm minus comparator) and their interval",
           xlabel="test", ylabel="effect (nats)")
    save_figure(setup, result, fig, "07_per_base_effects")
