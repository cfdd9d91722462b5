"""Runs as objects: what each training or evaluation job makes, and where (no torch).

A *run* is the folder one job of the pipeline fills: the profile's base model (``base``), a
context-extension run (``finetune``), a BABILong fine-tuning run (``babilong``, train design)
or a BABILong evaluation of a finetune run (``babilong-eval``, evaluate design). Its
*identity* is everything that determines its numbers; its *id*, the folder's name, is its name
and a digest of that identity, so a changed configuration is a new run and a finished one is
reused. ``RunSet`` builds every run of one resolved configuration once
(``PipelineConfig.runs``); the Snakefile, the command line, the notebooks, ``lsa.analysis`` and
``lsa.pipeline`` (``python -m lsa check``) all read runs through it; the jobs that fill them
are ``lsa.jobs``.

This module owns the folder layout, ``results/<profile>/runs/<id>/``:

- ``config.json``: the identity;
- ``metrics.jsonl``: one line per optimizer step (``LOG``);
- ``model/``, ``tokenizer/`` (base), ``checkpoint/`` while training;
- ``metrics.json`` (evaluations) and ``run_info.json`` (provenance);
- ``train_summary.json``, written last (``FINISHED``): a folder with it is finished and reused;
  anything else is (re)started.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

from lsa import paths
from lsa.strict import ConfigError

if TYPE_CHECKING:
    from lsa.config import PipelineConfig, RunConfig

RunKind = Literal["base", "finetune", "babilong", "babilong-eval"]
KINDS: tuple[str, ...] = get_args(RunKind)
FINISHED = "train_summary.json"  # written last: the run is finished
LOG = "metrics.jsonl"            # one line per optimizer step


# ---------------------------------------------------------------------------------------------
# folders


def runs_root(profile: str) -> Path:
    return paths.results_dir(profile) / "runs"


def run_dir(profile: str, run_id: str) -> Path:
    return runs_root(profile) / run_id


def is_finished(folder: Path) -> bool:
    return (Path(folder) / FINISHED).exists()


def mark_finished(folder: str | Path, summary: dict[str, Any]) -> None:
    """Mark a run finished (after its evaluation, so a half-done run is never reused); its
    checkpoint is no longer needed."""
    from lsa.files import write_json

    folder = Path(folder)
    write_json(folder / FINISHED, summary)
    ckpt = folder / "checkpoint"
    if ckpt.exists():
        import shutil

        shutil.rmtree(ckpt)


def read_log(folder: str | Path) -> list[dict[str, Any]]:
    """The training log: one record per optimizer step."""
    path = Path(folder) / LOG
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def digest(obj: Any) -> str:
    """A short stable digest of a JSON-able object (run identities)."""
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:10]


# ---------------------------------------------------------------------------------------------
# one run


class RunIdMismatch(ConfigError):
    """A job computed another run id than the pipeline expects."""


@dataclass(frozen=True, eq=False)
class Run:
    """One run: its kind, name, identity (what determines its numbers), id and folder; whether
    it is finished, and its log, metrics and summary once it is."""

    kind: RunKind
    name: str
    profile: str
    identity: dict[str, Any] = field(repr=False)
    spec: RunConfig | None = None   # method, alpha, seed, ... (None: the base model)
    needs: tuple[Run, ...] = ()     # runs whose folders it reads

    @functools.cached_property
    def id(self) -> str:
        """The folder's name: ``base-<digest>``, ``<name>-<digest>`` or
        ``babilong-eval_<name>-<digest>``."""
        prefix = {"base": "base", "babilong-eval": f"babilong-eval_{self.name}"}.get(
            self.kind, self.name)
        return f"{prefix}-{digest(self.identity)}"

    @property
    def folder(self) -> Path:
        return run_dir(self.profile, self.id)

    @property
    def finished(self) -> bool:
        return is_finished(self.folder)

    @property
    def job(self) -> str:
        """The job's name in logs and benchmarks (``logs/<profile>/<job>.log``)."""
        return "base_model" if self.kind == "base" else f"{self.kind}_{self.name}"

    @property
    def command(self) -> list[str]:
        """``python -m lsa`` arguments that run it (without the configuration)."""
        return ["pretrain"] if self.kind == "base" else [self.kind, "--run", self.name]

    def describe(self) -> str:
        return "the base model" if self.kind == "base" else f"{self.kind} run {self.name}"

    def summary(self) -> dict[str, Any]:
        return _read(self.folder / FINISHED)

    def metrics(self) -> dict[str, Any]:
        return _read(self.folder / "metrics.json")

    def config(self) -> dict[str, Any] | None:
        path = self.folder / "config.json"
        return _read(path) if path.exists() else None

    def log(self) -> list[dict[str, Any]]:
        return read_log(self.folder) if (self.folder / LOG).exists() else []

    def expect(self, expected_id: str | None, source: str) -> None:
        """Fail when the pipeline expects another folder than this run's (``--expect-id``)."""
        if expected_id is not None and expected_id != self.id:
            raise RunIdMismatch(
                f"{self.describe()}: the pipeline expects run folder {expected_id}, but {source} "
                f"gives {self.id}. The configuration this job read is not the one Snakemake "
                "planned with (another snakemake invocation with other --config values rewrote "
                "it, or the code that computes run identities changed since): rerun snakemake "
                "with one configuration at a time")


def _read(path: Path) -> Any:
    return json.loads(path.read_text())


# ---------------------------------------------------------------------------------------------
# identities: what determines each kind of run's numbers (the digest's input, config.json)


def base_identity(pipe: PipelineConfig) -> dict[str, Any]:
    return pipe.pretrain.to_dict()


def finetune_identity(pipe: PipelineConfig, base: Run, spec: RunConfig) -> dict[str, Any]:
    """The base model, every finetune setting but the list of explicit runs, and the run."""
    shared = {k: v for k, v in pipe.finetune.to_dict().items() if k != "runs"}
    return {"base": base.id, **shared, "run": spec.to_dict()}


def babilong_identity(pipe: PipelineConfig, base: Run, spec: RunConfig) -> dict[str, Any]:
    """The base model, the BABILong settings but the grid's alphas and seeds, and the run."""
    shared = {k: v for k, v in pipe.babilong.to_dict().items() if k not in ("alphas", "seeds")}
    return {"base": base.id, **shared, "run": spec.to_dict()}


EVAL_KEYS = ("tasks", "test_samples", "depth_task", "prompt_parts", "eval_lengths",
             "eval_depths", "eval_depth_length", "eval_max_new_tokens")


def babilong_eval_identity(pipe: PipelineConfig, finetuned: Run) -> dict[str, Any]:
    """The evaluated run and the test settings (the prompts file is recorded by its checksum in
    the metrics, not here)."""
    bl = pipe.babilong.to_dict()
    return {"finetune": finetuned.id, "seed": pipe.seed, **{k: bl[k] for k in EVAL_KEYS}}


# ---------------------------------------------------------------------------------------------
# every run of a configuration


class RunSet:
    """Every run of one resolved configuration, built once: ``base``, and by name
    ``finetune``, ``babilong`` (train design) and ``babilong_eval`` (evaluate design, keyed by
    the evaluated finetune run's name)."""

    def __init__(self, pipe: PipelineConfig):
        self.profile = pipe.profile
        self.design = pipe.babilong.design
        base = Run("base", "base", pipe.profile, base_identity(pipe))
        self.base = base
        self.finetune = {s.name: Run("finetune", s.name, pipe.profile,
                                     finetune_identity(pipe, base, s), s, (base,))
                         for s in pipe.finetune.run_specs()}
        self.babilong = {s.name: Run("babilong", s.name, pipe.profile,
                                     babilong_identity(pipe, base, s), s, (base,))
                         for s in pipe.babilong.run_specs()}
        evaluated = ([] if self.design != "evaluate"
                     else pipe.babilong.finetune_runs or list(self.finetune))
        self.babilong_eval = {}
        for name in evaluated:
            run = self.finetune[name]
            self.babilong_eval[name] = Run("babilong-eval", name, pipe.profile,
                                           babilong_eval_identity(pipe, run), run.spec, (run,))

    def of_kind(self, kind: str) -> dict[str, Run]:
        if kind not in KINDS:
            raise ConfigError(f"run kind {kind!r}: must be one of {', '.join(KINDS)}")
        return {"base": {"base": self.base}, "finetune": self.finetune,
                "babilong": self.babilong, "babilong-eval": self.babilong_eval}[kind]

    def get(self, kind: str, name: str = "base") -> Run:
        """The run ``name`` of ``kind``; a ConfigError naming the known runs otherwise."""
        if kind == "babilong-eval" and self.design != "evaluate":
            raise ConfigError(f"babilong.design = {self.design!r}: fine-tuning runs are "
                              "evaluated on BABILong in the evaluate design only (set design: "
                              "evaluate)")
        runs = self.of_kind(kind)
        if name not in runs:
            where = {"finetune": "finetune.runs", "babilong": "babilong",
                     "babilong-eval": "babilong.finetune_runs"}.get(kind, kind)
            raise ConfigError(f"{where}: no run named {name!r}; known: {', '.join(runs)}")
        return runs[name]

    def __iter__(self) -> Iterator[Run]:
        yield self.base
        yield from self.finetune.values()
        yield from self.babilong.values()
        yield from self.babilong_eval.values()

    def used_by(self, kinds: list[str]) -> list[Run]:
        """The runs a section reads (``uses_runs``): ``babilong`` means the runs of whichever
        design is configured."""
        out: list[Run] = []
        for kind in kinds:
            out += list(self.finetune.values()) if kind == "finetune" else \
                [*self.babilong.values(), *self.babilong_eval.values()]
        return out
