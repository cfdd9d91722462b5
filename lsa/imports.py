"""The package's own import graph, read from the source (``ast``; nothing is imported).

- ``import_graph``: every ``lsa`` module and the ``lsa`` modules it imports, wherever the import
  stands (inside a function or under ``TYPE_CHECKING`` too), the packages above an imported
  module included (Python runs their ``__init__.py`` first): the tests hold it free of cycles;
- ``load_graph``: only the imports that run when a module is imported;
- ``notebook_inputs``: the ``lsa`` modules (files under ``lsa/``) a notebook imports and those
  load in turn, which the Snakefile makes the inputs of the notebook's rule (editing one reruns
  the notebook). What a notebook reaches only through a function call (training a missing run
  when run alone) comes in through the runs it reads instead.
"""

from __future__ import annotations

import ast
import functools
import json
from pathlib import Path

from lsa import paths

PACKAGE = paths.ROOT / "lsa"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_file(module: str) -> str:
    """``lsa.data.books`` -> ``data/books.py``; a package -> its ``__init__.py``."""
    rel = Path(*module.split(".")[1:])
    return str(rel / "__init__.py") if (PACKAGE / rel).is_dir() else f"{rel}.py"


def _names(node: ast.AST, importer: str = "") -> set[str]:
    """The modules an import statement in module ``importer`` runs: those it names and, as
    Python imports a submodule, every package above them (``import lsa.a.b`` runs
    ``lsa/a/__init__.py`` first) but the importer's own packages, which are loaded already."""
    if isinstance(node, ast.Import):
        named = {alias.name for alias in node.names}
    elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        named = {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    else:
        return set()
    own = {".".join(importer.split(".")[:i]) for i in range(1, importer.count(".") + 1)}
    above = {".".join(name.split(".")[:i]) for name in named for i in range(1, name.count(".") + 1)}
    return named | (above - own)


def imports(source: str, known: set[str], at_load: bool = False, importer: str = "") -> set[str]:
    """The modules of ``known`` that ``source`` (module ``importer``; "" for a notebook)
    imports (``at_load``: only where the import runs as the module loads, not inside a
    function or class, nor under TYPE_CHECKING)."""
    tree = ast.parse(source)
    if not at_load:
        return {n for node in ast.walk(tree) for n in _names(node, importer)} & known
    found: set[str] = set()
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(stmt, ast.If) and "TYPE_CHECKING" in ast.unparse(stmt.test):
            continue
        for node in ast.walk(stmt):
            found |= _names(node, importer)
    return found & known


@functools.lru_cache(maxsize=2)
def _graph(at_load: bool) -> dict[str, frozenset[str]]:
    files = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    known = set(files)
    return {name: frozenset(imports(path.read_text(), known, at_load, name) - {name})
            for name, path in files.items()}


def import_graph() -> dict[str, frozenset[str]]:
    return _graph(False)


def load_graph() -> dict[str, frozenset[str]]:
    return _graph(True)


def closure(starts: set[str], graph: dict[str, frozenset[str]]) -> set[str]:
    seen: set[str] = set()
    todo = list(starts)
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(graph.get(module, ()))
    return seen


def notebook_inputs(notebook: Path) -> list[str]:
    """The files under ``lsa/`` that ``notebook`` loads (see the module's docstring), sorted;
    the package's ``__init__.py`` and ``paths.py`` (folder names only) left out."""
    cells = json.loads(Path(notebook).read_text())["cells"]
    source = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    graph = load_graph()
    found = closure(imports(source, set(graph), at_load=True), graph)
    return sorted({module_file(m) for m in found} - {"__init__.py", "paths.py"})
