"""What a section notebook receives, and the setup it works with.

A notebook's parameters cell (papermill tag ``parameters``) holds only how it is called::

    profile = "smoke"      # run alone: the profile whose settings it reads (config/config.yaml)
    config_file = None     # the pipeline: the resolved configuration it reads instead
    run_ids = None         # the pipeline: the run folders it made for this notebook
    train_missing = True   # run alone: train the runs that are not made yet
    overrides = {}         # run alone: this section's settings to change, e.g. {"seeds": [0]}

The section's settings themselves live in one place, the configuration (``config/config.yaml``,
``python -m lsa config --fields``). ``open_section`` returns a ``Setup``: the resolved
configuration (``pipe``), the section's settings with the reader's ``overrides`` applied when
the notebook runs alone (strictly: an unknown or invalid setting fails, naming it), and the runs
it reads. In the pipeline the notebook takes everything from the resolved file: its
``overrides`` must be empty and its runs must be the ones the pipeline made (``run_ids``); it
never trains (``Setup.ensure_runs``).
"""

from __future__ import annotations

import dataclasses
import time
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsa import faults, plots, seeding
from lsa.config import Profile, load_config
from lsa.runs import runs_of
from lsa.strict import ConfigError, StrictConfig, merge, setting

if TYPE_CHECKING:
    from lsa.config import PipelineConfig
    from lsa.runs import Run

_IPYTHON = {"In", "Out", "get_ipython", "exit", "quit", "open"}


def namespace_mark(namespace: dict[str, Any]) -> frozenset[str]:
    return frozenset(namespace)


def parameters(namespace: dict[str, Any], mark: frozenset[str]) -> dict[str, Any]:
    """Every public name defined after ``mark``: the parameters cell and what papermill
    injected (so an unknown injected name reaches ``NotebookCall`` and fails with its name)."""
    return {
        name: value for name, value in namespace.items()
        if name not in mark and not name.startswith("_") and name not in _IPYTHON
        and not isinstance(value, (types.ModuleType, types.FunctionType, type))
    }


@dataclass
class NotebookCall(StrictConfig):
    """How a section notebook is called: its parameters cell."""

    _section = "notebook"

    profile: Profile = setting("smoke", help="run alone: the profile whose settings it reads")
    config_file: str | None = setting(
        None, help="the resolved configuration the pipeline passes (null: run alone)")
    run_ids: list[str] | None = setting(
        None, help="the run folders the pipeline made for this notebook (null: run alone)")
    train_missing: bool = setting(True, help="run alone: train the runs not made yet")
    overrides: dict[str, Any] = setting(
        factory=dict, help="run alone: the section's settings to change")


@dataclass
class Setup:
    """What a section works with: its key, the resolved configuration, its settings, and how
    it was called."""

    section: str
    pipe: PipelineConfig
    settings: Any
    call: NotebookCall
    started: float = field(default_factory=time.time)

    @property
    def profile(self) -> str:
        return self.pipe.profile

    @property
    def seed(self) -> int:
        return self.pipe.seed

    @property
    def alone(self) -> bool:
        return self.call.config_file is None

    @property
    def out_dir(self) -> Path:
        from lsa import paths

        return paths.section_dir(self.profile, self.section)

    def runs(self) -> list[Run]:
        """The runs the section reads (its ``uses_runs``)."""
        return runs_of(self.pipe).used_by(self.pipe.sections[self.section].uses_runs)

    def ensure_runs(self) -> None:
        """Make the runs the section reads when they are not finished: run alone with
        ``train_missing``, train them (and what they need) here; in the pipeline never (the
        runs are the notebook's inputs, so a missing one is an error)."""
        missing = [r for r in self.runs() if not r.finished]
        if not missing:
            return
        names = ", ".join(r.id for r in missing)
        if not self.alone:
            raise FileNotFoundError(f"runs the pipeline should have made are not finished: "
                                    f"{names}")
        if not self.call.train_missing:
            print(f"not made yet (train_missing is off), left out: {names}")
            return
        from lsa.jobs import ensure

        for run in missing:
            ensure(self.pipe, run, progress=False)


def open_section(section: str, params: dict[str, Any]) -> Setup:
    """The setup of notebook ``section`` called with ``params`` (its parameters cell, see the
    module's docstring); a ConfigError when the call, the overrides or the pipeline's runs are
    wrong. Seeds every generator with the pipeline's seed and sets the plot theme."""
    faults.point(f"notebook:{section}")  # the tests' interruption of a notebook
    call = NotebookCall.from_dict(params, prefix="")
    if call.config_file is None:
        pipe = load_config(profile=call.profile)
    else:
        if call.overrides:
            raise ConfigError(f"overrides = {call.overrides!r}: a pipeline notebook takes its "
                              f"settings from {call.config_file}; change the configuration "
                              "instead")
        pipe = load_config(call.config_file, profile=call.profile)
    if section not in pipe.sections:
        raise ConfigError(f"section {section!r} is not among {', '.join(pipe.sections)}")
    part = pipe.sections[section].config
    settings = getattr(pipe, part)
    if call.overrides:
        settings = type(settings).from_dict(merge(settings.to_dict(), call.overrides),
                                            prefix=f"overrides ({part})")
        pipe = dataclasses.replace(pipe, **{part: settings})
    setup = Setup(section, pipe, settings, call)
    if call.run_ids is not None:
        own = [r.id for r in setup.runs()]
        if sorted(own) != sorted(call.run_ids):
            extra = sorted(set(call.run_ids) - set(own)) or sorted(set(own) - set(call.run_ids))
            raise ConfigError(f"run_ids: the pipeline made run folders {sorted(call.run_ids)}, "
                              f"but {call.config_file or 'config/config.yaml'} gives "
                              f"{sorted(own)} (first difference: {extra[0]}); the "
                              "configuration changed since the pipeline planned this notebook: "
                              "rerun snakemake")
    seeding.seed_everything(pipe.seed)
    plots.set_theme()
    return setup
