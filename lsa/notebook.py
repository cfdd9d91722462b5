"""What a section notebook receives, and the setup it works with.

A notebook's parameters cell (papermill tag ``parameters``) holds only how it is called::

    profile = None         # run alone: the profile whose settings and runs it reads
                           #   (None: the last finished `python -m lsa pipeline`'s, else mini)
    config_file = None     # the pipeline: the resolved configuration it reads instead
    run_ids = None         # the pipeline: the run folders it made for this notebook
    train_missing = None   # run alone, runs not made yet: True trains them here (progress
                           #   bar), False leaves them out, None: True for smoke, else stop
                           #   and say the command that makes them
    overrides = {}         # run alone: this section's settings to change, e.g. {"seeds": [0]}

The section's settings themselves live in one place, the configuration (``config/config.yaml``,
``python -m lsa config --fields``). ``open_section`` returns a ``Setup``: the resolved
configuration (``pipe``), the section's settings with the reader's ``overrides`` applied when
the notebook runs alone (strictly: an unknown or invalid setting fails, naming it), and the runs
it reads. In the pipeline the notebook takes everything from the resolved file: its
``overrides`` must be empty and its runs must be the ones the pipeline made (``run_ids``); it
never trains (``Setup.ensure_runs``).

Run alone (JupyterLab), a notebook reads the runs of the last profile the pipeline finished, so
that after ``make reproduce`` it shows that run's results. Runs it reads that are not made yet
it trains itself, with a progress bar, only when that is quick (``QUICK_PROFILES``, or
``train_missing = True``); otherwise it reads the profile's published results
(``docs/results/<profile>/``, ``lsa.published``) where they hold every run it reads under the
current configuration, says so first and saves nothing; else it stops before any compute with
``RunsMissing``, which names the command that makes them (the pipeline schedules them on every
core, and its notebooks then read them; one by one in a kernel they would take far longer: the
published snapshot's STAMP.md says how long ``mini``'s took).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsa import faults, paths, plots, published, seeding
from lsa.config import Profile, load_config
from lsa.runs import RunSet
from lsa.strict import ConfigError, StrictConfig, merge, setting

if TYPE_CHECKING:
    from lsa.config import PipelineConfig
    from lsa.runs import Run

#: profiles whose missing runs a notebook run alone trains by default (a few CPU minutes)
QUICK_PROFILES = frozenset({"smoke"})


class RunsMissing(RuntimeError):
    """A notebook run alone reads runs that are not made yet, and would not train them."""


@dataclass
class NotebookCall(StrictConfig):
    """How a section notebook is called: its parameters cell."""

    _section = "notebook"

    profile: Profile | None = setting(
        None, help="run alone: the profile whose settings and runs it reads (null: the last "
                   "finished pipeline's, results/LAST_PROFILE, else mini)")
    config_file: str | None = setting(
        None, help="the resolved configuration the pipeline passes (null: run alone)")
    run_ids: list[str] | None = setting(
        None, help="the run folders the pipeline made for this notebook (null: run alone)")
    train_missing: bool | None = setting(
        None, help="run alone, runs not made yet: true trains them here, false leaves them "
                   "out, null: true for the quick profiles (smoke), else stop naming the "
                   "command that makes them")
    overrides: dict[str, Any] = setting(
        factory=dict, help="run alone: the section's settings to change")


@dataclass
class Setup:
    """What a section works with: its key, the resolved configuration, its settings, how it
    was called, and the plan of every run of the configuration (``plan``, made once)."""

    section: str
    pipe: PipelineConfig
    settings: Any
    call: NotebookCall
    started: float = field(default_factory=time.time)
    plan: RunSet = field(init=False, repr=False)
    #: the published snapshot the section reads instead of runs made here (``use_published``)
    snapshot: published.Snapshot | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.plan = RunSet(self.pipe)

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
        return paths.section_dir(self.profile, self.section)

    def runs(self) -> list[Run]:
        """The runs the section reads (its ``uses_runs``)."""
        return self.plan.used_by(self.pipe.sections[self.section].uses_runs)

    def provenance(self) -> str:
        """``profile mini (the pipeline's notebook, at commit a1b2c3d): it reads 40 runs, made
        by `a1b2c3d` (40 runs)``: the line a pipeline's notebook prints first, so that its
        published copy names the commits that made what it shows."""
        from lsa.files import git_commit

        runs = [r for r in self.runs() if r.finished]
        made = ", ".join(f"`{r['commit'][:7]}` ({r['runs']} run{'s' * (r['runs'] != 1)})"
                         for r in published.run_commits(runs))
        commit = git_commit() or "?"
        return (f"profile {self.profile} (the pipeline's notebook, at commit {commit[:7]}"
                f"{'-dirty' * commit.endswith('-dirty')}): it reads {len(runs)} runs"
                + (f", made by {made}" if made else ""))

    @property
    def train_missing(self) -> bool | None:
        """What a notebook run alone does with runs not made yet: True trains them, False
        leaves them out, None stops (``train_missing = None`` resolved by the profile)."""
        if self.call.train_missing is not None:
            return self.call.train_missing
        return True if self.profile in QUICK_PROFILES else None

    def missing_inputs(self) -> bool:
        """Whether what the section reads is not made here: a run it reads is not finished, or
        none of the sections it gathers has results (the report)."""
        spec = self.pipe.sections[self.section]
        return (any(not r.finished for r in self.runs())
                or bool(spec.needs) and not any(paths.metrics_file(self.profile, s).exists()
                                                for s in spec.needs))

    def use_published(self) -> bool:
        """Read the profile's published snapshot instead of runs made here, where it holds
        every run the section reads under this configuration's run ids (and the sections it
        gathers); says so. False where there is none or it lacks one (another
        configuration); ``lsa.published.SnapshotDamaged`` where a file differs from its
        manifest."""
        snapshot = published.load(self.profile)
        if snapshot is None:
            return False
        plan = RunSet(self.pipe, root=snapshot.runs)
        spec = self.pipe.sections[self.section]
        lacking = [r.id for r in plan.used_by(spec.uses_runs) if not r.finished]
        if lacking or (spec.needs and not snapshot.sections.is_dir()):
            named = ", ".join(lacking[:3]) + (f" and {len(lacking) - 3} more"
                                              if len(lacking) > 3 else "")
            print(f"{snapshot.describe()}: it lacks runs of this configuration "
                  f"({named or 'the sections it gathers'}; it was published from another: a "
                  "changed setting, or other input files such as $LSA_DATA_DIR's bAbI, "
                  "give other run ids), so it is not read")
            return False
        self.plan, self.snapshot = plan, snapshot
        print(f"{snapshot.describe()}: this notebook's runs are not made here, so it "
              f"re-analyses those (what `make reproduce PROFILE={self.profile}` made then) "
              + ("and saves what it computes: the snapshot rendered again (lsa publish "
                 "--rerender)" if published.rerendering() else "and saves nothing"))
        return True

    def ensure_runs(self) -> None:
        """Make the runs the section reads when they are not finished: run alone, train them
        (and what they need) here with a progress bar, leave them out or stop with
        ``RunsMissing`` (``train_missing``); in the pipeline never (the runs are the notebook's
        inputs, so a missing one is an error)."""
        missing = [r for r in self.runs() if not r.finished]
        if not missing:
            return
        names = ", ".join(r.id for r in missing)
        if not self.alone:
            raise FileNotFoundError(f"runs the pipeline should have made are not finished: "
                                    f"{names}")
        if self.train_missing is None:
            raise RunsMissing(missing_runs_text(self.profile, [r.id for r in missing]))
        if not self.train_missing:
            print(f"not made yet (train_missing is off), left out: {names}")
            return
        from lsa.jobs import ensure

        print(f"training {len(missing)} runs of profile {self.profile} not made yet "
              "(train_missing)", flush=True)
        for run in missing:
            ensure(self.pipe, run, progress=True)


def missing_runs_text(profile: str, ids: list[str]) -> str:
    """Why a notebook run alone stopped, and the commands that go on."""
    shown = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
    return (f"{len(ids)} runs of profile {profile} this notebook reads are not made yet "
            f"({shown}). Make them with `make reproduce PROFILE={profile}` (or `python -m lsa "
            f"pipeline --profile {profile}`) from the repository, then run this notebook again; "
            f"or set train_missing = True to train them here, one by one (slow), or "
            f"profile = \"smoke\" for a few minutes' run.")


def section_profile(section: str, profile: str, why: str) -> tuple[str, str]:
    """The profile a notebook run alone with ``profile = None`` reads: ``profile`` (the last
    finished pipeline's, else the default: ``lsa.paths.notebook_profile``, said ``why``) when
    it has ``section``, else the first profile that has it, a published one first (section
    07 is the study's alone), and why."""
    from lsa.config import PROFILES

    if section in load_config(profile=profile).sections:
        return profile, why
    having = [p for p in PROFILES if section in load_config(profile=p).sections]
    if not having:
        raise ConfigError(f"section {section!r}: no profile of config/config.yaml has it")
    out = [p for p in having if (published.folder(p) / "claims.csv").exists()]
    chosen = (out or having)[0]
    return chosen, (f"{profile} ({why}) has no section {section}; {chosen} is the first "
                    f"profile that has it{' (published)' if out else ''}")


def open_section(section: str, *, profile: str | None = None, config_file: str | None = None,
                 run_ids: list[str] | None = None, train_missing: bool | None = None,
                 overrides: dict[str, Any] | None = None) -> Setup:
    """The setup of notebook ``section`` called with its parameters cell's values (see the
    module's docstring), passed by name; a ConfigError when the call, the overrides or the
    pipeline's runs are wrong. Seeds every generator with the pipeline's seed and sets the plot
    theme."""
    faults.point(f"notebook:{section}")  # the tests' interruption of a notebook
    call = NotebookCall.from_dict({"profile": profile, "config_file": config_file,
                                   "run_ids": run_ids, "train_missing": train_missing,
                                   "overrides": overrides or {}}, prefix="")
    if call.config_file is None:
        if call.profile is None:
            from lsa import paths

            profile, why = section_profile(section, *paths.notebook_profile())
            print(f"profile {profile}: {why}")
            call = dataclasses.replace(call, profile=profile)
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
    if not setup.alone:
        print(setup.provenance())
    if setup.alone and (published.rerendering()  # every section reads the snapshot's runs
                        or setup.train_missing is None and setup.missing_inputs()):
        setup.use_published()  # else ensure_runs stops, naming the command that makes them
    seeding.seed_everything(pipe.seed)
    plots.set_theme()
    return setup
