"""Section 07's figure: each test's per-base effects with its estimate and interval; its tidy
table (``effects_long``) is what the notebook's main-figure cell draws."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsa import plots
from lsa.sections import Result, save_figure
from lsa.sections.study.tables import effects_long
from lsa.study import TESTS

if TYPE_CHECKING:
    from lsa.notebook import Setup


#: the panels: which outcomes each draws (``lsa.study.Test.outcome``) and its x label; the
#: copy NLL's effects are ten times the others', so that a shared axis would flatten theirs
PANELS = ((("nll4", "nll1", "growth"), "effect on the book NLL (nats)"),
          (("copy1",), "effect on the copy NLL inside the window (nats)"))


def figure_effects(setup: Setup, result: Result) -> None:
    """Per-base effects of every test (dots), its estimate and interval (bar), 0 marked; one
    test a row (its id and its interval's level on the y axis: H1's is the level of its look,
    the others 95 %; the exploratory estimates marked), a panel per kind of outcome."""
    data = effects_long(result.analysis)
    if data.empty:
        return
    outcome = {t.id: t.outcome for t in TESTS}
    # each row's label says its interval's level (H1's is its look's) and marks the exploratory
    label = {r.test.id: f"{r.test.id} ({r.est.level:.2%}"
             + (", exploratory)" if r.test.family == "exploratory" else ")")
             for r in result.analysis.rows}
    data = data.assign(row=data["test"].map(label))
    parts = [(data[data["test"].map(outcome).isin(kinds)], label) for kinds, label in PANELS]
    parts = [(d, label) for d, label in parts if not d.empty]
    sizes = [d["test"].nunique() for d, _ in parts]
    fig, axes = plots.plt.subplots(len(parts), 1, figsize=(7, 1.2 + 0.38 * sum(sizes)),
                                   gridspec_kw={"height_ratios": sizes}, squeeze=False)
    for ax, (part, label) in zip(axes[:, 0], parts):
        plots.sns.stripplot(data=part, y="row", x="effect", ax=ax, color="0.4", size=4)
        summary = part.drop_duplicates("test")
        ax.errorbar(summary["estimate"], range(len(summary)),
                    xerr=[summary["estimate"] - summary["low"],
                          summary["high"] - summary["estimate"]],
                    fmt="o", color="C3", capsize=4)
        ax.axvline(0, color="0.6", lw=0.8)
        ax.set(xlabel=label, ylabel="test (its interval's level)")
    axes[0, 0].set_title("per-base effects (arm minus comparator) and each test's interval")
    fig.tight_layout()
    save_figure(setup, result, fig, "07_per_base_effects")
