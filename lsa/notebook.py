"""Helpers for the notebooks' parameter cells.

The pattern in every notebook::

    _mark = namespace_mark(globals())          # imports cell, before the parameters
    # parameters cell (papermill tag `parameters`): literals only
    cfg = SyntheticConfig.from_dict(parameters(globals(), _mark))

``parameters`` returns every public name defined after the mark: the parameters cell and
what papermill injected. An unknown injected name therefore reaches the strict config and fails
with its name, instead of being silently ignored.
"""

from __future__ import annotations

import types
from typing import Any

_IPYTHON = {"In", "Out", "get_ipython", "exit", "quit", "open"}


def namespace_mark(namespace: dict[str, Any]) -> frozenset[str]:
    return frozenset(namespace)


def parameters(namespace: dict[str, Any], mark: frozenset[str]) -> dict[str, Any]:
    return {
        name: value for name, value in namespace.items()
        if name not in mark and not name.startswith("_") and name not in _IPYTHON
        and not isinstance(value, (types.ModuleType, types.FunctionType, type))
    }
