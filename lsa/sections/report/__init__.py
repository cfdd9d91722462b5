"""The replication report (notebook ``06_replication_report``): every section's claims with
the paper's value, ours and the verdict, the figure gallery and the provenance of each
section's run. The paper's values and the claim table: ``lsa.claims``."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from lsa import files, gates, paths
from lsa.claims import (
    by_kind,
    claims_table,
    collect_claims,
    counts_sentence,
    verdict_counts,
    verdicts_by_method,
)
from lsa.notebook import Setup
from lsa.sections import Result


@dataclass
class ReportResult(Result):
    """The report's tables: every found section's claims (saved as ``claims``), their
    provenance, the verdicts per fine-tuning method; the gates as the sections saw them."""

    claims_table: pd.DataFrame | None = field(default=None, metadata={"saved_as": "claims"})
    provenance: pd.DataFrame | None = None
    verdicts_by_method: pd.DataFrame | None = None


def analyse(setup: Setup) -> ReportResult:
    """The claims of the sections that have results (``settings.sections``), their counts by
    verdict, their figures and their provenance; the report makes no claim of its own."""
    profile, wanted = setup.profile, setup.settings.sections
    found = [s for s in wanted if paths.metrics_file(profile, s).exists()]
    missing = [s for s in wanted if s not in found]
    table = claims_table(collect_claims([paths.metrics_file(profile, s) for s in found]))
    counts, control_counts = verdict_counts(table)
    found_gates = gates.compute_gates(setup.pipe)
    rows = []
    for s in found:
        info = files.read_json(paths.section_dir(profile, s) / "run_info.json")
        rows.append({"section": s, "git_commit": info.get("git_commit"),
                     "wall_time_s": info.get("wall_time_s"),
                     "finished_utc": info.get("finished_utc"),
                     "torch": info["packages"].get("torch"),
                     "transformers": info["packages"].get("transformers"),
                     "device": info["device"].get("platform")})
    return ReportResult(gates=gates.gates_table(found_gates), claims_table=table,
                        provenance=pd.DataFrame(rows),
                        verdicts_by_method=verdicts_by_method(table),
                        metrics={"sections_found": found, "sections_missing": missing,
                                 "verdicts": counts, "control_outcomes": control_counts,
                                 "gates": [g.to_dict() for g in found_gates]})


def claims_by_kind(result: ReportResult) -> list[tuple[str, pd.DataFrame]]:
    """The claims table as two tables: the paper's claims, then the project's controls."""
    return by_kind(result.claims_table)


def counts_text(result: ReportResult) -> str:
    """The paper's claims by verdict, then the project's controls by outcome, counted apart;
    then the claims about each fine-tuning method by verdict (each rests on its own G3)."""
    text = counts_sentence(result.metrics["verdicts"], result.metrics["control_outcomes"])
    by_method = result.verdicts_by_method
    if by_method is not None and len(by_method):
        text += ("\n\nThe paper's claims about each fine-tuning method, by verdict (a method's "
                 "claims rest on G1, G2 and its own G3):\n\n" + by_method.to_markdown(index=False))
    return text


def gallery(setup: Setup, result: ReportResult) -> list[tuple[str, str, Path]]:
    """(section, figure name, PNG) of every figure the found sections saved."""
    out = []
    for s in result.metrics["sections_found"]:
        for name in files.read_json(paths.metrics_file(setup.profile, s)).get("figures", []):
            out.append((s, name, paths.figures_dir(setup.profile) / f"{name}.png"))
    return out


def describe(setup: Setup, result: ReportResult) -> str:
    m = result.metrics
    return (f"profile {setup.profile}: sections with results: {m['sections_found']}; not run "
            f"yet: {m['sections_missing']}")
