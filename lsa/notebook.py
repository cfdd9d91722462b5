"""Helpers for the notebooks' parameters cells and their runs.

The pattern in every notebook::

    _mark = namespace_mark(globals())          # imports cell, before the parameters
    # parameters cell (papermill tag `parameters`): literals only
    cfg = SyntheticConfig.from_dict(parameters(globals(), _mark))
    pipe = open_config(cfg, SECTION)

``parameters`` returns every public name defined after the mark: the parameters cell and
what papermill injected. An unknown injected name therefore reaches the strict config and fails
with its name, instead of being silently ignored.

``open_config`` returns the configuration the notebook reads: in the pipeline, the resolved file
the Snakefile passes (``config_file``), whose part must equal the notebook's parameters and whose
runs must be the ones the pipeline made (``run_ids``); run alone (JupyterLab, the defaults),
``config/config.yaml`` for the notebook's profile. ``ensure_runs`` trains what a notebook run
alone needs and never trains inside the pipeline.
"""

from __future__ import annotations

import types
from typing import TYPE_CHECKING, Any

from lsa.strict import ConfigError

if TYPE_CHECKING:
    from lsa.config import PipelineConfig
    from lsa.runs import Run
    from lsa.strict import StrictConfig

_IPYTHON = {"In", "Out", "get_ipython", "exit", "quit", "open"}
# how the pipeline calls a notebook, not what it computes
CALL_FIELDS = ("config_file", "run_ids")


def namespace_mark(namespace: dict[str, Any]) -> frozenset[str]:
    return frozenset(namespace)


def parameters(namespace: dict[str, Any], mark: frozenset[str]) -> dict[str, Any]:
    return {
        name: value for name, value in namespace.items()
        if name not in mark and not name.startswith("_") and name not in _IPYTHON
        and not isinstance(value, (types.ModuleType, types.FunctionType, type))
    }


def open_config(cfg: StrictConfig, section: str) -> PipelineConfig:
    """The configuration notebook ``section`` reads (see the module's docstring); a
    ConfigError when the pipeline's file and the notebook's parameters or runs disagree."""
    from lsa import faults
    from lsa.config import load_config

    faults.point(f"notebook:{section}")  # the tests' interruption of a notebook
    config_file = getattr(cfg, "config_file", None)
    pipe = load_config(config_file, profile=getattr(cfg, "profile", None))
    if config_file is None:
        return pipe
    if section not in pipe.sections:
        raise ConfigError(f"section {section!r} is not in {config_file}")
    part = pipe.sections[section].config
    mine = {k: v for k, v in cfg.to_dict().items() if k not in CALL_FIELDS}
    theirs = {k: v for k, v in pipe.section_config(section).to_dict().items()
              if k not in CALL_FIELDS}
    for key in sorted(set(mine) | set(theirs)):
        if mine.get(key) != theirs.get(key):
            raise ConfigError(f"{part}.{key} = {mine.get(key)!r}: {config_file} says "
                              f"{theirs.get(key)!r}; a pipeline notebook takes its parameters "
                              "from the resolved configuration")
    expected = getattr(cfg, "run_ids", None)
    if expected is not None:
        own = [r.id for r in pipe.runs.used_by(pipe.sections[section].uses_runs)]
        if sorted(own) != sorted(expected):
            extra = sorted(set(expected) - set(own)) or sorted(set(own) - set(expected))
            raise ConfigError(f"run_ids: the pipeline made run folders {sorted(expected)}, but "
                              f"{config_file} gives {sorted(own)} (first difference: "
                              f"{extra[0]}); the configuration changed since the pipeline "
                              "planned this notebook: rerun snakemake")
    return pipe


def ensure_runs(cfg: Any, pipe: PipelineConfig, runs: list[Run]) -> None:
    """Make the runs a notebook over runs reads when they are not finished: run alone with
    ``train_missing``, train them (and what they need) here; in the pipeline (``run_ids``
    given), never: the runs are the notebook's inputs, so a missing one is an error."""
    missing = [r for r in runs if not r.finished]
    if not missing:
        return
    names = ", ".join(r.id for r in missing)
    if getattr(cfg, "run_ids", None) is not None:
        raise FileNotFoundError(f"runs the pipeline should have made are not finished: {names}")
    if not cfg.train_missing:
        print(f"not made yet (train_missing is off), left out: {names}")
        return
    from lsa.jobs import ensure

    for run in missing:
        ensure(pipe, run, progress=False)
