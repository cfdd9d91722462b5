"""The package's structure: no import cycle inside lsa/ (every import counts, also one inside a
function or under TYPE_CHECKING), and one list of method names."""

from typing import get_args

import pytest
from support import ROOT

from lsa.imports import closure, import_graph, module_file, notebook_inputs


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_lsa_has_no_import_cycle():
    graph = import_graph()
    assert "lsa.config" in graph and "lsa.runs" in graph["lsa.jobs"]
    assert cycles({k: set(v) for k, v in graph.items()}) == []


def test_an_import_runs_the_packages_above_the_module_it_names():
    """``from lsa.sections.synthetic.model import x`` runs ``lsa/sections/__init__.py`` and
    ``lsa/sections/synthetic/__init__.py`` first: edges to those packages (not to the
    importer's own, loaded already), so the reader importing a section's module is a cycle
    (lsa.runtable -> lsa.sections.synthetic -> lsa.runtable), as it was before Section 3's grid
    became a run."""
    from lsa.imports import imports

    known = set(import_graph())
    line = "from lsa.sections.synthetic.tables import summarize"
    assert imports(line, known, importer="lsa.runtable") == {  # lsa: the importer's own
        "lsa.sections", "lsa.sections.synthetic", "lsa.sections.synthetic.tables"}
    # inside the package, its own __init__ is loading already: no edge back to it
    assert imports(line, known, importer="lsa.sections.synthetic.claims") == {
        "lsa.sections.synthetic.tables"}
    graph = {k: set(v) for k, v in import_graph().items()}
    graph["lsa.runtable"] |= imports(line, known, importer="lsa.runtable")
    assert any({"lsa.runtable", "lsa.sections.synthetic"} <= set(c) for c in cycles(graph))


def test_the_reader_of_runs_imports_no_section():
    """``lsa.runtable`` reads every run kind's folder, Section 3's grid too, and imports
    nothing under ``lsa/sections/`` (they are above it)."""
    reached = closure({"lsa.runtable"}, import_graph())
    assert not {m for m in reached if m.startswith("lsa.sections")}, sorted(reached)


def test_every_section_is_one_package_declared_once(tmp_path):
    """Config, registry and packages together: every package under lsa/sections/ declares its
    section in ``section.yaml`` (and nothing else declares one), the pipeline's sections are
    those declarations, each has its notebook and ``analyse``, its settings part, the gates and
    the needs it names exist, and the report gathers every other section."""
    from lsa import paths, sections
    from lsa.config import PARTS, ConfigError, load_config, section_declarations

    root = paths.ROOT / "lsa" / "sections"
    folders = sorted(p.name for p in root.iterdir()
                     if p.is_dir() and (p / "__init__.py").exists())
    declared = section_declarations()
    assert sorted(s.package for s in declared.values()) == folders
    pipe = load_config(profile="smoke")
    # a profile runs the paper's sections, the study's profiles the study's alone
    paper_sections = {k: s for k, s in declared.items() if not s.study}
    assert pipe.sections == paper_sections
    assert load_config(profile="study").sections == {k: s for k, s in declared.items()
                                                     if s.study}
    assert sections.packages() == {k: s.package for k, s in declared.items()}
    for key, spec in declared.items():
        assert spec.notebook == f"{key}.ipynb" and (paths.NOTEBOOKS / spec.notebook).exists()
        assert callable(sections.module(key).analyse), key
        assert spec.config in PARTS
    report = [k for k, s in declared.items() if s.config == "report"]
    assert len(report) == 1
    assert pipe.report.sections == declared[report[0]].needs == [k for k in paper_sections
                                                                 if k != report[0]]
    # a configuration cannot redeclare them; a second declaration of one key is refused
    with pytest.raises(ConfigError, match="declared by their packages"):
        from lsa.config import from_mapping
        from_mapping({"sections": {}})
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "section.yaml").write_text(
            "key: 01_x\nnotebook: 01_x.ipynb\nconfig: view\n")
    with pytest.raises(ConfigError, match="declared by a too"):
        section_declarations(tmp_path)


def test_configuration_and_extension_share_one_list_of_method_names():
    """``config.Method`` (what a configuration may name) is ``extend.METHODS`` (what the code
    builds), and every name has a recipe."""
    from lsa.config import Method
    from lsa.extend import METHODS, method_spec

    assert METHODS == get_args(Method)
    for name in METHODS:
        assert method_spec(name, 64, 128, 10000.0, 16).name == name


# ---------------------------------------------------------------------------------------------
# the module inputs of the workflow's jobs (workflow/settings.yaml) against the imports

# modules a run job imports that do not determine its numbers (a changed setting changes the
# run's id instead, and editing them must not retrain a profile: README, "Inputs")
ORCHESTRATION = {"lsa", "lsa.config", "lsa.strict", "lsa.runs", "lsa.markers", "lsa.files",
                 "lsa.paths", "lsa.faults"}


def test_every_module_a_run_job_imports_is_an_input_or_orchestration():
    """Each module the run jobs reach (at load or inside a job) is the input of some kind of
    run, or orchestration by name; each kind's list names modules that are reached."""
    from lsa.pipeline import workflow_settings
    from lsa.runs import KINDS

    reached = {module_file(m) for m in closure({"lsa.jobs"}, import_graph()) - ORCHESTRATION}
    settings = workflow_settings()
    listed = {module for kind in KINDS for module in settings.modules_of(kind)}
    assert reached == listed, (sorted(reached - listed), sorted(listed - reached))


def test_a_notebooks_inputs_are_what_it_loads():
    """The inputs of a notebook's rule: its section module and everything that loads with it
    (the seed helper and fault points of lsa.notebook too), not the training stack it reaches
    only through a function."""
    inputs = notebook_inputs(ROOT / "notebooks" / "04_ablations.ipynb")
    assert {"sections/ablations/__init__.py", "sections/ablations/tables.py",
            "sections/ablations/claims.py", "sections/ablations/figures.py", "stats.py",
            "notebook.py", "seeding.py", "runs.py", "config.py"} <= set(inputs)
    assert not {"jobs.py", "train.py", "misalign.py", "__init__.py", "paths.py"} & set(inputs)
    assert "synthetic.py" in notebook_inputs(ROOT / "notebooks" / "01_synthetic_study.ipynb")


def test_every_section_returns_its_own_typed_result():
    """Each section's ``analyse`` returns its own dataclass (a ``Result`` whose DataFrame fields
    are its tables), and what it saves is those fields in order, the gates first, under their
    ``saved_as`` names."""
    import typing

    import pandas as pd

    from lsa import sections
    from lsa.sections.report import ReportResult

    for key in sections.packages():
        returned = typing.get_type_hints(sections.module(key).analyse)["return"]
        assert issubclass(returned, sections.Result) and returned is not sections.Result, key
    frame = pd.DataFrame({"a": [1]})
    result = ReportResult(claims_table=frame, provenance=frame, gates=frame)
    assert list(result.saved_tables()) == ["gates", "claims", "provenance"]


#: the rooms every section package has (``lsa.sections``' docstring)
ROOMS = {"__init__.py", "tables.py", "claims.py", "figures.py", "section.yaml"}


def test_every_section_package_has_the_same_rooms_and_a_pure_analyse():
    """The contract of ``lsa.sections``: the same files in every package, none over 450 lines,
    ``analyse(pipe, runs, gates)`` and ``describe(setup, result)``, and no package that plans,
    makes or reads runs or computes gates itself (the driver does, once): walked as imports,
    no section module reaches ``lsa.runs`` or ``lsa.jobs``, and from ``lsa.gates`` it takes
    only the ``Gate`` type and the table of gates."""
    import ast
    import inspect

    from lsa import sections

    for key, package in sections.packages().items():
        folder = ROOT / "lsa" / "sections" / package
        files = {p.name for p in folder.iterdir() if p.suffix in (".py", ".yaml")}
        assert files == ROOMS, (package, sorted(files ^ ROOMS))
        module = sections.module(key)
        assert list(inspect.signature(module.analyse).parameters) == ["pipe", "runs", "gates"]
        assert list(inspect.signature(module.describe).parameters) == ["setup", "result"]
        for path in folder.glob("*.py"):
            text = path.read_text()
            assert len(text.splitlines()) <= 450, f"{path.name} of {package}: over 450 lines"
            for node in ast.walk(ast.parse(text)):
                if isinstance(node, ast.ImportFrom) and node.module:
                    names = {a.name for a in node.names}
                    assert node.module not in ("lsa.runs", "lsa.jobs"), (package, path.name)
                    assert node.module != "lsa.gates" or names <= {"Gate", "gates_table"}, package
                    assert node.module != "lsa" or not names & {"runs", "jobs", "gates"}, package
                    # an alias hides which room a name comes from
                    assert not any(a.asname for a in node.names
                                   if node.module.startswith("lsa.sections")), (package, names)
                if isinstance(node, ast.Attribute) and node.attr in (
                        "ensure_runs", "compute_gates", "collect_runs", "read_tables"):
                    raise AssertionError(f"{package}/{path.name} calls {node.attr}")
                if isinstance(node, ast.Name) and node.id in ("runs_of", "RunSet"):
                    raise AssertionError(f"{package}/{path.name} names {node.id}")


# --- the tests' own house (issue 59) ---------------------------------------------------------

TIERS = {"unit", "workflow", "e2e", "support"}


def mirrored_module(test_file) -> str | None:
    """The lsa module (or package) a unit test file ``tests/unit/<dir>/test_<name>.py`` is
    about: ``lsa/<dir>/<m>.py`` or ``lsa/<dir>/<m>/`` where ``<name>`` is ``<m>`` or starts
    with ``<m>_`` (``test_misalign_l_extra.py``: lsa/misalign.py), else None."""
    folder = ROOT / "lsa" / test_file.parent.relative_to(ROOT / "tests" / "unit")
    name = test_file.stem.removeprefix("test_")
    if not folder.is_dir():
        return None
    for module in sorted((p.stem for p in folder.iterdir()
                          if p.suffix == ".py" or (p / "__init__.py").exists()),
                         key=len, reverse=True):
        if name == module or name.startswith(module + "_"):
            return str(folder.relative_to(ROOT) / module)
    return None


def test_the_tests_live_in_their_tiers_and_unit_tests_mirror_the_package():
    """tests/ holds conftest.py and the tiers only; each unit test file names the lsa module
    it tests by its path and name, so a file whose module moves or is renamed fails here."""
    tests = ROOT / "tests"
    assert {p.name for p in tests.iterdir() if not p.name.startswith((".", "__"))} == \
        TIERS | {"conftest.py"}
    unmirrored = [str(p.relative_to(tests)) for p in (tests / "unit").rglob("test_*.py")
                  if mirrored_module(p) is None]
    assert unmirrored == []
    assert mirrored_module(tests / "unit" / "test_misalign_l_extra.py") == "lsa/misalign"
    assert mirrored_module(tests / "unit" / "sections" / "test_ablations.py") == \
        "lsa/sections/ablations"
    assert mirrored_module(tests / "unit" / "test_nothing.py") is None


def test_slow_and_long_come_from_the_folders_only():
    """``slow`` (tests/e2e) and ``long`` (tests/e2e/long) come from the folders
    (tests/conftest.py): no test file writes either marker."""
    written = [f"{p.relative_to(ROOT)}: {mark}" for p in (ROOT / "tests").rglob("*.py")
               for mark in ("mark.slow", "mark.long") if mark in p.read_text()
               and p.name != "conftest.py" and p.name != "test_structure.py"]
    assert written == []
