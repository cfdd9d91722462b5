"""The paper's sections, one package each: what a section notebook computes, so that the notebook
itself only opens its setup, narrates, shows and plots.

**The contract.** ``drive(setup)`` (the driver, here) makes the runs a section reads
(``Setup.ensure_runs``), reads the run tables it declares once (``lsa.runtable.read_tables``),
computes the premise gates once (``lsa.gates.compute_gates``), calls the package's pure
``analyse(pipe, runs, gates)`` and applies the premise (``with_premise``). A section never reads
a run folder, plans runs or computes gates itself, so ``analyse`` is a function of tables and
its tests build them by hand.

**The rooms.** Every package has the same files: ``__init__.py`` (its ``Result`` subclass,
``analyse`` and ``describe(setup, result)``), ``tables.py`` (DataFrames in, DataFrames out),
``claims.py`` (its ``Claim`` rows, built with keywords, and their prose), ``figures.py`` (its
figures, ``figure_*(setup, result)``, and the main figure's tidy table, which the notebook
draws itself; a section without figures has none) and ``section.yaml``, which declares it once:
its key (the notebook and results folder), the settings part its parameters cell receives, the
premise gates its verdicts need, the runs it reads (``uses_runs``, what the pipeline makes
first), the run tables its ``analyse`` reads (``tables``) and the sections it needs. The
pipeline's list of sections (``PipelineConfig.sections``), this registry (``packages``), the
gates of ``with_premise`` and the report's list derive from those files. Adding a section:
CONTRIBUTING.md.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field, fields
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

    import pandas as pd

    from lsa.gates import Gate
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
    #: the one method a section is about (Section 5.3), whose gates its premise sentence reads
    premise_method: str | None = None

    def after_premise(self) -> None:
        """What a section does once the premise is applied (``with_premise``): nothing, unless
        its subclass says otherwise."""

    def saved_tables(self) -> dict[str, pd.DataFrame]:
        """The tables to save, by file name (a field's ``saved_as``, else its name), in field
        order (the gates first): every DataFrame field that is set."""
        import pandas as pd

        return {f.metadata.get("saved_as", f.name): getattr(self, f.name) for f in fields(self)
                if isinstance(getattr(self, f.name), pd.DataFrame)
                and f.metadata.get("saved", True)}

    def claims_markdown(self) -> str:
        from lsa.claims import claims_table, display

        return display(claims_table(self.claims)).drop(columns=["section"]).to_markdown(
            index=False)


def with_premise(result: Result, found: list[Gate], required: list[str]) -> Result:
    """``result`` with the premise gates ``found`` (``lsa.gates``): their table first, the
    section's verdicts turned into "premise not met" where a gate of ``required`` failed (each
    claim by its own method's gates), the gates in its metrics and the sentence that says which
    in ``premise``; ``premise_met`` and that sentence are for ``result.premise_method`` where
    the section is about one method (Section 5.3), else for every method. Then the result's
    own ``after_premise``."""
    from lsa import gates

    ok, text = gates.premise(found, required, result.premise_method)
    result.gates = gates.gates_table(found)
    result.claims = gates.apply_premise(result.claims, found, required)
    result.metrics["gates"] = [g.to_dict() for g in found]
    result.metrics["premise_met"] = ok
    result.premise = text
    result.after_premise()
    return result


def drive(setup: Setup) -> Result:
    """The section of ``setup``, analysed: its runs made (``Setup.ensure_runs``), its run
    tables read once (``lsa.runtable.read_tables``, the ``tables`` its declaration names), the
    premise gates computed once, its package's pure ``analyse(pipe, runs, gates)`` called and
    the premise applied where the section rests on gates."""
    from lsa import gates, runtable

    spec = setup.pipe.sections[setup.section]
    setup.ensure_runs()
    runs = runtable.read_tables(setup.pipe, setup.plan, spec.tables)
    found = gates.compute_gates(setup.pipe, setup.plan) if spec.gates or spec.needs else []
    result = module(setup.section).analyse(setup.pipe, runs, found)
    return with_premise(result, found, spec.gates) if spec.gates else result


#: the profile a notebook's "Try it" part reruns on: a few CPU minutes
TRY_PROFILE = "smoke"


def try_it(setup: Setup, reanalyse: bool = False, **parts: dict[str, Any]) -> Result | None:
    """The section of ``setup`` again with settings changed (``parts``: a part of the
    configuration and its settings to change, e.g. ``finetune={"alphas": [0.0, 0.1, 0.5]}``,
    strictly checked): a notebook's "Try it" part, run alone. By default on the ``smoke``
    profile, its runs that are not made yet trained here (a progress bar; the runs it shares
    with smoke are reused). With ``reanalyse`` on the notebook's own runs (the published
    snapshot where its first part read one) with only the section's own settings changed
    (its part of the configuration: another part would change the runs), training nothing
    that part did not. Returns the section's result and saves nothing, so the pipeline's
    outputs stay as they are; in the pipeline (the notebook called with its ``config_file``)
    it does nothing and returns None."""
    from lsa import seeding
    from lsa.config import load_config
    from lsa.notebook import NotebookCall, Setup, open_section
    from lsa.strict import ConfigError, merge

    if not setup.alone:
        print("Try it: skipped in the pipeline (run the notebook alone to try it)")
        return None
    section = setup.section
    if reanalyse:
        own = setup.pipe.sections[section].config
        if set(parts) - {own}:
            raise ConfigError(f"try_it(reanalyse=True, {', '.join(sorted(parts))}=...): it "
                              f"changes {own} only, the settings of {section} (another part "
                              "of the configuration changes the runs); leave reanalyse out to "
                              "rerun on smoke")
        trial = open_section(section, profile=setup.profile,
                             overrides=merge(setup.call.overrides, parts.get(own, {})))
        print(f"try it: {section} on the runs above ({setup.profile}) with {parts}")
        return drive(trial)
    pipe = load_config(profile=TRY_PROFILE, overrides={"profiles": {TRY_PROFILE: parts}})
    settings = getattr(pipe, pipe.sections[section].config)
    trial = Setup(section, pipe, settings, NotebookCall(profile=TRY_PROFILE, train_missing=True))
    seeding.seed_everything(pipe.seed)
    print(f"try it: {section} on {TRY_PROFILE} with {parts}")
    return drive(trial)


def save_figure(setup: Setup, result: Result, fig, name: str) -> None:
    """Check ``fig`` (``lsa.plots.check_figure``: labels, one legend, nothing over the data),
    save it as ``figures/<profile>/<name>.png`` and ``.pdf`` (not on a published snapshot's
    results: ``Setup.snapshot``) and record it."""
    from lsa import plots, published

    plots.check_figure(fig, name)
    if setup.snapshot is None or published.rerendering():
        plots.savefig(fig, name, setup.profile)
    result.figures.append(name)


def save(setup: Setup, result: Result, claims_table: bool = True) -> Path | None:
    """Write the section's tables (and its claims table), then ``metrics.json`` and
    ``run_info.json`` (the settings it used, the pipeline's seed, provenance); returns the
    metrics file. On a published snapshot's results (``Setup.snapshot``) nothing: they are
    the snapshot's, not a run made here."""
    from lsa import files, published
    from lsa.claims import claims_table as table_of

    if setup.snapshot is not None and not published.rerendering():
        print(f"not saved: these are the {setup.snapshot.describe()}")
        return None

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
