"""Section 07's exploratory part, as the pre-registration planned it (issue 74, item 6;
``docs/preregistration.md``): reported, never a verdict. Read from the locked analysis' own
numbers (``lsa.study.Analysis``: nothing here computes), so the study's claims and its locked
files stay as they were:

- the moderators: the correlation over bases of H1's per-base effect with each base model's
  G1 gain and its own book NLL at 4x ``l_train`` (``Analysis.moderators``);
- the exploratory estimates (dose, additivity: family ``exploratory``), each labelled so, with
  its interval and its level;
- the sensitivity analyses' signed-rank p (scipy's Wilcoxon over the bases' effects) of every
  test, beside the t test's p its verdict read.

``part`` gathers them as JSON (the notebook saves it with the section's metrics), ``markdown``
writes them for the notebook and the study's results page.
"""

from __future__ import annotations

from typing import Any

from lsa import study


def part(analysis: study.Analysis) -> dict[str, Any]:
    """The exploratory part of a judged analysis, as JSON-ready records."""
    table = analysis.table()
    estimates = table[table["family"] == "exploratory"]
    return {"moderators": dict(analysis.moderators),
            "estimates": estimates[["id", "hypothesis", "estimate", "low", "high", "level",
                                    "bases", "on_predicted_side"]].to_dict(orient="records"),
            "signed_rank": table[["id", "family", "p", "signed_rank_p"]].to_dict(
                orient="records")}


def markdown(found: dict[str, Any]) -> str:
    """``part``'s content as a reader sees it: three short tables, each labelled exploratory."""
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
