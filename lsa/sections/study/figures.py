"""Section 07's figure and its exploratory part, presentation only (nothing here computes: the
analysis is ``lsa.study``'s, locked). The figure: each test's per-base effects with its estimate
and interval; its tidy table (``effects_long``) is what the notebook's main-figure cell draws.

The exploratory part, as the pre-registration planned it (issue 74, item 6;
``docs/preregistration.md``): reported, never a verdict, read from the analysis' own numbers
(``lsa.study.Analysis``) so that the study's claims and its locked files stay as they were: the
moderators (the correlation over bases of H1's per-base effect with each base model's G1 gain
and its own book NLL at 4x ``l_train``), the exploratory estimates (dose, additivity), each
labelled so with its interval's level, and every test's signed-rank p (scipy's Wilcoxon over the
bases' effects) beside the t test's p its verdict read. ``exploratory_part`` gathers them as
JSON (the notebook saves it with the section's metrics), ``exploratory_markdown`` writes them
for the notebook and the study's results page."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lsa import plots, study
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
        ax.set(xlabel=label, ylabel="")
    axes[0, 0].set_title("per-base effects (arm minus comparator) and each test's interval\n"
                         "(its level beside the test's id)")
    fig.tight_layout()
    save_figure(setup, result, fig, "07_per_base_effects")


def exploratory_part(analysis: study.Analysis) -> dict[str, Any]:
    """The exploratory part of a judged analysis, as JSON-ready records."""
    table = analysis.table()
    estimates = table[table["family"] == "exploratory"]
    return {"moderators": dict(analysis.moderators),
            "estimates": estimates[["id", "hypothesis", "estimate", "low", "high", "level",
                                    "bases", "on_predicted_side"]].to_dict(orient="records"),
            "signed_rank": table[["id", "family", "p", "signed_rank_p"]].to_dict(
                orient="records")}


def exploratory_markdown(found: dict[str, Any]) -> str:
    """``exploratory_part``'s content as a reader sees it: three short tables, each labelled
    exploratory."""
    import pandas as pd

    lines = ["**Exploratory, as pre-registered (no verdict)**", "",
             "Moderators: the correlation over bases of H1's per-base effect with each base "
             "model's own measures.", "",
             pd.DataFrame([{"moderator": k, "r": v} for k, v in found["moderators"].items()]
                          ).to_markdown(index=False, floatfmt=".3f"), ""]
    if found["estimates"]:
        estimates = pd.DataFrame(found["estimates"]).assign(
            level=lambda d: d["level"].map(lambda v: f"{v:.2%}"))
        lines += ["Exploratory estimates (dose, additivity): estimate and interval at the "
                  "level shown, no verdict.", "",
                  estimates.to_markdown(index=False, floatfmt=".4g"), ""]
    lines += ["Every test's signed-rank p (Wilcoxon over the bases' effects, a sensitivity "
              "analysis) beside the t test's p its verdict read.", "",
              pd.DataFrame(found["signed_rank"]).to_markdown(index=False, floatfmt=".3g"), ""]
    return "\n".join(lines)
