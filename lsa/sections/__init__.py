"""The paper's sections, one package each: what a section notebook computes, so that the notebook
itself only opens its setup, narrates, shows and plots.

Each package has ``analyse(setup)``, which returns its typed result (a ``Result`` subclass: its
tables, claims and the entries of its ``metrics.json``), one function per figure
(``figure_*(setup, result)``: draws it, saves it as PNG and PDF under ``figures/<profile>/`` and
records its name in the result) and the tidy table of the main figure, which the notebook draws
itself (``save_figure``). Its settings
are a part of the configuration (``lsa.config``; ``python -m lsa config --fields``), the runs it
reads are planned by ``lsa.runs``, its verdicts come from ``lsa.stats``.

Each section is a package (``synthetic``, ``correlation``, ``finetuning``, ``ablations``,
``babilong``, ``report``) whose ``section.yaml`` declares it once: its key (the notebook and
results folder), the settings part its parameters cell receives, the premise gates its verdicts
need, the runs it reads and the sections it needs. The pipeline's list of sections
(``PipelineConfig.sections``), this registry (``packages``), the gates of ``with_premise`` and
the report's list derive from those files. Adding a section: CONTRIBUTING.md.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field, fields
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

    import pandas as pd

    from lsa.notebook import Setup

def packages() -> dict[str, str]:
    """Section (notebook and results folder) -> its package under lsa/sections/, from the
    packages' declarations (``section.yaml``, ``lsa.config.section_declarations``)."""
    from lsa.config import section_declarations

    return {key: spec.package for key, spec in section_declarations().items()}


def module(section: str) -> ModuleType:
    """The package of ``section`` (``lsa.sections.<package>``)."""
    found = packages()
    if section not in found:
        raise KeyError(f"section {section!r}: no package under lsa/sections/ declares it "
                       f"({', '.join(found)})")
    return importlib.import_module(f"lsa.sections.{found[section]}")


@dataclass
class Result:
    """What a section computed, typed: each section's result is a subclass whose DataFrame
    fields are its tables (saved as CSV and Markdown in field order, ``saved_tables``), beside
    ``claims`` (the paper's findings with ours and a verdict), ``figures`` (names, as they are
    saved), ``metrics`` (the section's own entries of ``metrics.json``), and the premise gates'
    table and sentence (``gates``, ``premise``: ``with_premise``)."""

    claims: list[dict[str, Any]] = field(default_factory=list)
    figures: list[str] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)
    premise: str = ""
    gates: pd.DataFrame | None = None

    def saved_tables(self) -> dict[str, pd.DataFrame]:
        """The tables to save, by file name (a field's ``saved_as``, else its name), in field
        order (the gates first): every DataFrame field that is set."""
        import pandas as pd

        return {f.metadata.get("saved_as", f.name): getattr(self, f.name) for f in fields(self)
                if isinstance(getattr(self, f.name), pd.DataFrame)}

    def claims_markdown(self) -> str:
        from lsa.claims import claims_table

        table = claims_table(self.claims)
        return table.drop(columns=["section"]).to_markdown(index=False)


def with_premise(setup: Setup, result: Result, method: str | None = None) -> Result:
    """``result`` with the premise gates (``lsa.gates``): their table first, the section's
    verdicts turned into "premise not met" where a gate it needs failed (each claim by its own
    method's gates), the gates in its metrics and the sentence that says which in
    ``premise``; ``premise_met`` and that sentence are for ``method`` where the
    section is about one method (Section 5.3), else for every method."""
    from lsa import gates

    found = gates.compute_gates(setup.pipe)
    required = setup.pipe.sections[setup.section].gates
    ok, text = gates.premise(found, required, method)
    result.gates = gates.gates_table(found)
    result.claims = gates.apply_premise(result.claims, found, required)
    result.metrics["gates"] = [g.to_dict() for g in found]
    result.metrics["premise_met"] = ok
    result.premise = text
    return result


def save_figure(setup: Setup, result: Result, fig, name: str) -> None:
    """Check ``fig`` (``lsa.plots.check_figure``: labels, one legend, nothing over the data),
    save it as ``figures/<profile>/<name>.png`` and ``.pdf`` and record it."""
    from lsa import plots

    plots.check_figure(fig, name)
    plots.savefig(fig, name, setup.profile)
    result.figures.append(name)


def save(setup: Setup, result: Result, claims_table: bool = True) -> Path:
    """Write the section's tables (and its claims table), then ``metrics.json`` and
    ``run_info.json`` (the settings it used, the pipeline's seed, provenance); returns the
    metrics file."""
    from lsa import files
    from lsa.claims import claims_table as table_of

    out = setup.out_dir
    tables = result.saved_tables()
    if claims_table:
        tables["claims"] = table_of(result.claims)
    for name, table in tables.items():
        files.save_table(table, out / name)
    metrics = {"section": setup.section, **result.metrics, "claims": result.claims,
               "figures": list(result.figures), "tables": list(tables)}
    path = files.save_metrics(out, metrics, setup.settings, started=setup.started,
                              seed=setup.seed)
    print("wrote", path)
    return path
