"""The replication report (notebook ``06_replication_report``): every section's claims with
the paper's value, ours and the verdict, the figure gallery and the provenance of each
section's run. The paper's values and the claim table: ``lsa.claims``. Its tables: ``tables``;
the counts in words: ``claims``; the gallery: ``figures``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from lsa.claims import (
    claims_table,
    verdict_counts,
    verdicts_by_method,
    with_family_rule,
    with_holm,
)
from lsa.config import PipelineConfig
from lsa.gates import Gate, gates_table
from lsa.headline import headline
from lsa.notebook import Setup
from lsa.runtable import RunTables
from lsa.sections import Result
from lsa.sections.report import tables
from lsa.sections.report.claims import claims_by_kind, counts_text
from lsa.sections.report.figures import gallery

__all__ = ["ReportResult", "analyse", "answers", "bases_of", "claims_by_kind", "counts_text",
           "describe", "gallery", "headline_text"]


@dataclass
class ReportResult(Result):
    """The report's tables: every found section's claims (saved as ``claims``), their
    provenance, the verdicts per fine-tuning method; the gates as the sections saw them;
    ``section_figures``: each found section's figure names (the gallery)."""

    claims_table: pd.DataFrame | None = field(default=None, metadata={"saved_as": "claims"})
    provenance: pd.DataFrame | None = None
    verdicts_by_method: pd.DataFrame | None = None
    section_figures: dict[str, list[str]] = field(default_factory=dict)


def analyse(pipe: PipelineConfig, runs: RunTables, gates: list[Gate]) -> ReportResult:
    """The claims of the sections that have results (``runs.sections``, of
    ``report.sections``) under the one verdict rule (Holm's correction within each declared
    family, ``lsa.claims.with_holm``, and the verdicts it replaces, ``with_family_rule``),
    their counts by verdict, their figures and their provenance; the report makes no claim of
    its own."""
    runs.need("sections")
    found = list(runs.sections)
    missing = [s for s in pipe.report.sections if s not in found]
    table = with_family_rule(with_holm(claims_table(
        [c for s in found for c in runs.sections[s]["metrics"].get("claims", [])])))
    counts, apart = verdict_counts(table)
    return ReportResult(gates=gates_table(gates), claims_table=table,
                        provenance=tables.provenance(runs.sections),
                        verdicts_by_method=verdicts_by_method(table),
                        section_figures={s: runs.sections[s]["metrics"].get("figures", [])
                                         for s in found},
                        metrics={"sections_found": found, "sections_missing": missing,
                                 "answers": answers(runs.sections),
                                 "bases": bases_of(pipe),
                                 "verdicts": counts, "counted_apart": apart,
                                 "gates": [g.to_dict() for g in gates]})


def answers(sections: dict[str, Any]) -> dict[str, str]:
    """The sections' sentences that answer one of the paper's known objections
    (``lsa.headline.OBJECTIONS``): Section 4.1's audit 3 on labels that change under
    truncation."""
    out = {}
    for found in sections.values():
        text = found["metrics"].get("label_change")
        if text:
            out["label_change"] = text
    return out


def bases_of(pipe: PipelineConfig) -> dict[str, Any]:
    """The independently pretrained base models the fine-tuning verdicts rest on, for the
    headline (``lsa.headline.bases_line``): how many, the methods of ``finetune.bases`` and
    whether Section 5.3 runs on the further ones (``ablation.base_seeds``)."""
    ft, ab = pipe.finetune.bases, pipe.ablation
    return {"count": 1 + len({*ft.seeds, *ab.base_seeds}),
            "methods": list(ft.methods) if ft.seeds else [], "ablation": bool(ab.base_seeds)}


def headline_text(setup: Setup, result: ReportResult) -> str:
    """"What this replication found" (``lsa.headline``) from the report's claims and gates,
    and the confirmatory study's state as the repository holds it (``lsa.kept.status``)."""
    from lsa import kept

    return headline(result.claims_table, [Gate(**g) for g in result.metrics.get("gates", [])],
                    setup.profile, result.metrics.get("answers"), result.metrics.get("bases"),
                    kept.status())


def describe(setup: Setup, result: ReportResult) -> str:
    m = result.metrics
    return (f"profile {setup.profile}: sections with results: {m['sections_found']}; not run "
            f"yet: {m['sections_missing']}")
