"""Runs as objects: what each training or evaluation job makes, and where (no torch).

A *run* is the folder one job of the pipeline fills: the profile's base model (``base``), a
context-extension run (``finetune``: the Section 5.1-5.2 grid, explicit runs and the Section
5.3 ablations), a BABILong fine-tuning run (``babilong``, train design), a BABILong evaluation
of a finetune run (``babilong-eval``, evaluate design) a *probe* (``probe``: a model that
is not fine-tuned here, or not on books, measured by the fine-tuning runs' protocol for the
Section 4.1 population) or Section 3's grid of small regression models (``synthetic``). Its
*identity* is everything that determines its numbers; its *id*, the folder's name, is its name
and a digest of that identity, so a changed configuration is a new run and a finished one is
reused. ``RunSet`` builds every run of one resolved configuration once
(``runs_of(pipe)``); the Snakefile, the command line, the notebooks, ``lsa.runtable`` and
``lsa.pipeline`` (``python -m lsa check``) all read runs through it; the jobs that fill them
are ``lsa.jobs``.

This module owns the folder layout, ``results/<profile>/runs/<id>/`` (``mini-full`` keeps its
runs beside ``mini``'s, ``SHARED_RUNS``: a run is its identity, so the runs both profiles
configure alike are made once):

- ``config.json``: the identity;
- ``metrics.jsonl``: one line per optimizer step (``LOG``);
- ``model/``, ``tokenizer/`` (base), ``checkpoint/`` while training;
- ``metrics.json`` (evaluations) and ``run_info.json`` (provenance);
- ``train_summary.json``, written last (``FINISHED``) once the files above are whole, with
  the sha256 of each of them (and of a model read from outside the folder): a folder with it
  is finished and reused; anything else is (re)started. A finished run verifies while every
  file it records is there with its checksum (``Run.problems``, ``output_problems``: one
  changed byte of the weights is found); one that does not is never used: ``python -m lsa
  pipeline`` and a job run by hand take its marker away (``Run.unmark_if_broken``), so it is
  made again, a job stops on a run it reads that does not verify, and ``python -m lsa check``
  names each file. A run finished before markers recorded checksums is not verified, so it
  is made again too. A published snapshot's or kept run (``root``) is verified by its
  snapshot's manifest instead.

The log and the marker (``LOG``, ``FINISHED``, ``mark_finished``, ``output_problems``) are
``lsa.markers``', below this module and the trainer (``lsa.train``) that writes them.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from lsa import files, paths
from lsa.config import (
    AblationConfig,
    BabilongConfig,
    FinetuneConfig,
    PipelineConfig,
    RunConfig,
    base_plan,
)
from lsa.data.babi import file_sources
from lsa.markers import FINISHED, LOG, is_finished, output_problems, read_log, read_summary
from lsa.strict import ConfigError

# the folder's markers live in lsa.markers (below this module and lsa.train, which write them);
# FINISHED stays importable from here for lsa.timings

RunKind = Literal["base", "finetune", "babilong", "babilong-eval", "probe", "longbench",
                  "synthetic"]
KINDS: tuple[str, ...] = get_args(RunKind)


# ---------------------------------------------------------------------------------------------
# folders


# profiles whose runs lie in another profile's folder: identical identities, one run
SHARED_RUNS = {"mini-full": "mini"}


def runs_root(profile: str) -> Path:
    return paths.results_dir(SHARED_RUNS.get(profile, profile)) / "runs"


def run_dir(profile: str, run_id: str) -> Path:
    return runs_root(profile) / run_id


def snapshot_folder(profile: str) -> Path:
    """``docs/results/<profile>/``: a profile's published snapshot (``lsa.published``), and
    the study's kept blocks (``lsa.kept``)."""
    return paths.ROOT / "docs" / "results" / profile


@dataclass(frozen=True)
class Kept:
    """The study's kept blocks of a profile (``lsa.kept``): their folder and manifest."""

    root: Path
    manifest: dict[str, Any]

    @property
    def runs_folder(self) -> Path:
        return self.root / "runs"

    @property
    def runs(self) -> set[str]:
        return {run for base in self.bases.values() for run in base["runs"]}

    @property
    def bases(self) -> dict[str, dict[str, Any]]:
        return self.manifest.get("bases") or {}

    def passed(self) -> dict[int, bool]:
        """Each kept base's G1-and-G2 outcome, by its seed."""
        return {int(b["seed"]): bool(b["G1"] and b["G2"]) for b in self.bases.values()}


def read_kept(profile: str) -> Kept | None:
    """The study's kept blocks of ``profile`` (``lsa.kept``) as their manifest lists them (no
    checksum checked: a plan stays cheap; the analysis checks them), or None where none is
    kept."""
    root = snapshot_folder(profile)
    if not (root / "MANIFEST.json").exists():
        return None
    return Kept(root, files.read_json(root / "MANIFEST.json"))


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
    #: where its folder lies instead of the profile's runs folder (a published snapshot's
    #: ``runs/``, ``lsa.published``); None: ``results/<profile>/runs/``
    root: Path | None = field(default=None, repr=False)

    @functools.cached_property
    def id(self) -> str:
        """The folder's name: ``base-<digest>``, ``<name>-<digest>`` or
        ``babilong-eval_<name>-<digest>``."""
        prefix = {"base": "base", "babilong-eval": f"babilong-eval_{self.name}",
                  "probe": f"probe_{self.name}",
                  "longbench": f"longbench_{self.name}"}.get(self.kind, self.name)
        return f"{prefix}-{digest(self.identity)}"

    @property
    def folder(self) -> Path:
        return self.root / self.id if self.root is not None else run_dir(self.profile, self.id)

    @property
    def finished(self) -> bool:
        return is_finished(self.folder)

    def problems(self) -> list[str]:
        """What is wrong with a finished run's files (``output_problems``); [] when whole. A
        published snapshot's or kept run (``root``: gzipped files, no weights) is checked
        against its snapshot's manifest by what reads it (``lsa.published.load``,
        ``lsa.kept.verify``), never here: [] (no job unmarks it)."""
        return output_problems(self.folder) if self.root is None else []

    def unmark_if_broken(self) -> list[str]:
        """Take the marker away from a finished run whose files do not verify (``problems``),
        so that it is made again, never read; returns those problems ([]: whole, or not
        finished)."""
        problems = self.problems() if self.finished else []
        if problems:
            (self.folder / FINISHED).unlink(missing_ok=True)
        return problems

    @property
    def job(self) -> str:
        """The job's name in logs and benchmarks (``logs/<profile>/<job>.log``)."""
        if self.kind == "base":
            return "base_model" if self.name == "base" else f"base_model_{self.name}"
        return f"{self.kind}_{self.name}"

    @property
    def command(self) -> list[str]:
        """``python -m lsa`` arguments that run it (without the configuration)."""
        if self.kind == "base":
            return ["pretrain"] if self.name == "base" else ["pretrain", "--run", self.name]
        return [self.kind, "--run", self.name]

    @property
    def processes(self) -> int:
        """Training processes of the run's job (``accelerate launch``): its spec's, else 1."""
        if self.kind == "finetune" and self.spec is not None:
            return self.spec.processes or 1
        return 1

    def describe(self) -> str:
        if self.kind == "base":
            return "the base model" if self.name == "base" else f"base model {self.name}"
        return f"{self.kind} run {self.name}"

    @property
    def base(self) -> Run | None:
        """The base model a fine-tuning or BABILong run starts from (None for other kinds)."""
        return next((n for n in self.needs if n.kind == "base"), None)

    def summary(self) -> dict[str, Any]:
        return read_summary(self.folder)  # the job's, without the marker's checksums

    def metrics(self) -> dict[str, Any]:
        return _read(self.folder / "metrics.json")

    def config(self) -> dict[str, Any] | None:
        path = self.folder / "config.json"
        return _read(path) if path.exists() else None

    def log(self) -> list[dict[str, Any]]:
        return read_log(self.folder) if files.exists(self.folder / LOG) else []

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
    return json.loads(files.read_text(path))


# ---------------------------------------------------------------------------------------------
# identities: what determines each kind of run's numbers (the digest's input, config.json)


def base_name(seed: int | None) -> str:
    """A base model's run name: ``base`` (the pipeline's), ``base_sN`` (pretraining seed N)."""
    return "base" if seed is None else f"base_s{seed}"


def base_identity(pipe: PipelineConfig, seed: int | None = None) -> dict[str, Any]:
    """The pretraining settings (``seed``: another pretraining seed than the pipeline's) and
    the copy probes the base model is measured by (the premise gates' numbers:
    ``lsa.jobs.base_probe_lengths``)."""
    ft = pipe.finetune
    pretrain = pipe.pretrain.to_dict()
    if seed is not None:
        pretrain["seed"] = seed
    return {**pretrain,
            "probes": {"copy_probes": ft.copy_probes, "metric_seed": ft.metric_seed,
                       "longest": max(ft.eval_multiples) * ft.l_train}}


# which runs exist, not what each one is
GRID_KEYS = ("methods", "alphas", "seeds", "method_seeds", "runs", "bases")


def finetune_identity(pipe: PipelineConfig, base: Run, spec: RunConfig) -> dict[str, Any]:
    """The base model, every finetune setting but those that list the runs, and the run."""
    shared = {k: v for k, v in pipe.finetune.to_dict().items() if k not in GRID_KEYS}
    return {"base": base.id, **shared, "run": _spec_identity(spec)}


def _spec_identity(spec: RunConfig) -> dict[str, Any]:
    """A run's settings as its identity holds them: ``base_seed`` only where it is set (the
    base's id is in the identity already; runs from the pipeline's base keep their ids) and
    ``processes`` only above 1 (the data each process draws depends on it,
    ``lsa.train.step_batch``; single-process runs keep their ids), ``stream`` only where it
    is not the recurring default."""
    out = spec.to_dict()
    if out.get("base_seed") is None:
        out.pop("base_seed", None)
    if out.get("stream") == "recurring":  # the ids runs had before the option
        out.pop("stream")
    if (out.get("processes") or 1) == 1:  # one process: the ids runs had before the key
        out.pop("processes", None)
    return out


def _babi_identity(pipe: PipelineConfig) -> dict[str, Any]:
    """The bAbI files the BABILong jobs read (``$LSA_DATA_DIR``), where they read any: a run
    from the files and one from the built-in generator differ (runs from the generator keep
    the ids they had before the source was recorded)."""
    files = file_sources(sorted({*pipe.babilong.tasks, pipe.babilong.depth_task}))
    return {"babi_files": files} if files else {}


def babilong_identity(pipe: PipelineConfig, base: Run, spec: RunConfig) -> dict[str, Any]:
    """The base model, the BABILong settings but the grid's alphas and seeds, the bAbI source
    and the run."""
    shared = {k: v for k, v in pipe.babilong.to_dict().items() if k not in ("alphas", "seeds")}
    return {"base": base.id, **shared, **_babi_identity(pipe), "run": _spec_identity(spec)}


EVAL_KEYS = ("tasks", "test_samples", "depth_task", "prompt_parts", "eval_lengths",
             "eval_depths", "eval_depth_length", "eval_max_new_tokens")


def babilong_eval_identity(pipe: PipelineConfig, finetuned: Run) -> dict[str, Any]:
    """The evaluated run and the test settings (the prompts file is recorded by its checksum in
    the metrics, not here)."""
    bl = pipe.babilong.to_dict()
    return {"finetune": finetuned.id, "seed": pipe.seed, **{k: bl[k] for k in EVAL_KEYS},
            **_babi_identity(pipe)}


def longbench_identity(pipe: PipelineConfig, finetuned: Run) -> dict[str, Any]:
    """The evaluated run and the benchmark's settings (the data folder's files are recorded by
    their checksums in the metrics, not here)."""
    lb = pipe.longbench.to_dict()
    return {"finetune": finetuned.id,
            **{k: lb[k] for k in ("data_dir", "datasets", "max_length", "limit")}}


PROTOCOL_KEYS = ("l_train", "eval_multiples", "eval_max_chunks", "metric_samples", "metric_seed",
                 "copy_probes")


def synthetic_identity(pipe: PipelineConfig) -> dict[str, Any]:
    """Section 3's settings but the worker count: each model of the grid seeds itself from its
    own description (``lsa.synthetic.run_grid``), so the workers change no number."""
    return {k: v for k, v in pipe.synthetic.to_dict().items() if k != "workers"}


def probe_identity(pipe: PipelineConfig, source: Run | str, rope: dict[str, Any] | None
                   ) -> dict[str, Any]:
    """What a probe measures (a run's id, or a hub id / folder), the RoPE setting applied to
    it, and the fine-tuning runs' evaluation protocol."""
    ft = pipe.finetune.to_dict()
    return {"model": source.id if isinstance(source, Run) else source, "rope": rope,
            "protocol": {k: ft[k] for k in PROTOCOL_KEYS}}


def reference_identity(pipe: PipelineConfig, model: str) -> dict[str, Any]:
    """A reference model's decomposition: the model, its window and samples, the metric seed
    and the test books' source."""
    pop, data = pipe.population, pipe.pretrain.data
    return {"model": model, "rope": None,
            "reference": {"window": pop.reference_window, "samples": pop.reference_samples,
                          "metric_seed": pipe.finetune.metric_seed,
                          "books": {"source": data.books_source, "dir": data.books_dir,
                                    "hub": data.hub_dataset}}}


def probe_name(model: str) -> str:
    """A probe's name for a hub id or folder (``hub_`` + its last two parts)."""
    tail = "_".join(Path(model).parts[-2:])
    return "hub_" + "".join(c if c.isalnum() or c in "._+-" else "_" for c in tail)


# ---------------------------------------------------------------------------------------------
# the run plan: which runs each part of a configuration asks for, and their names


def grid_run_name(method: str, alpha: float, seed: int) -> str:
    return f"{method}_a{alpha:g}_s{seed}"


def make_run(method: str, alpha: float, seed: int, *, divergence: str = "sce", ce_on: str = "a",
             l_extra_setting: int = 1, steps: int | None = None,
             base_seed: int | None = None, stream: str = "recurring") -> RunConfig:
    """A fine-tuning run named by its settings: ``METHOD_aALPHA_sSEED`` (the grid's name), then
    ``_jeffreys`` / ``_entropy`` (divergence of a regularized run), ``_ceboth``,
    ``_lxN`` (l_extra setting N), ``_stepsN``, ``_plain`` (fine-tuned on the plain books) and
    ``_bN`` (from the base model of pretraining seed N) where they differ from the defaults.
    Equal settings give equal names, so the sections share their runs."""
    if alpha == 0:
        divergence = "sce"  # no divergence is trained: every CE-only run is the same run
    name = grid_run_name(method, alpha, seed)
    name += f"_{divergence}" if divergence != "sce" else ""
    name += f"_ce{ce_on}" if ce_on != "a" else ""
    name += f"_lx{l_extra_setting}" if l_extra_setting != 1 else ""
    name += f"_steps{steps}" if steps is not None else ""
    name += "_plain" if stream == "plain" else ""
    name += f"_b{base_seed}" if base_seed is not None else ""
    return RunConfig(name=name, method=method, alpha=alpha, seed=seed,  # type: ignore[arg-type]
                     divergence=divergence, ce_on=ce_on,  # type: ignore[arg-type]
                     l_extra_setting=l_extra_setting, steps=steps, base_seed=base_seed,
                     stream=stream)  # type: ignore[arg-type]


def finetune_specs(ft: FinetuneConfig) -> list[RunConfig]:
    """Sections 5.1-5.2: every method x alpha x seed of the grid, then the explicit ``runs``."""
    grid = [make_run(m, a, s) for s in ft.all_seeds() for m in ft.methods
            if s in ft.seeds_of(m) for a in ft.alphas]
    for spec in grid:  # finetune.method_processes: FSDP over P GPUs (null: one process)
        spec.processes = ft.method_processes.get(spec.method)
    return grid + list(ft.runs)


def base_factor_specs(pipe: PipelineConfig) -> list[RunConfig]:
    """Section 5.2's paper comparisons on the further base models (``finetune.bases``): CE and
    CE + ``view.alpha`` for each of its methods at each of its fine-tuning seeds, on each
    further base (their counterparts on the pipeline's base are grid runs)."""
    ft, alpha = pipe.finetune, pipe.view.alpha
    specs = [make_run(m, a, s, base_seed=b) for b in ft.bases.seeds for m in ft.bases.methods
             for s in ft.bases.finetune_seeds for a in (0.0, alpha)]
    for spec in specs:
        spec.processes = ft.method_processes.get(spec.method)
    return specs


def ablation_specs(ab: AblationConfig) -> list[RunConfig]:
    """Section 5.3: the runs of the configured items, each once, in item order."""
    m, specs = ab.method, []
    for seed in ab.seeds:
        if "divergence" in ab.items:
            specs.append(make_run(m, 0.0, seed))
            for div, alphas in (("sce", ab.sce_alphas), ("jeffreys", ab.jeffreys_alphas),
                                ("entropy", ab.entropy_alphas)):
                specs += [make_run(m, a, seed, divergence=div) for a in alphas]
        if "alpha_sweep" in ab.items:  # each method's same-cost control too
            specs += [make_run(method, a, seed) for method in ab.sweep_methods
                      for a in ab.sweep_alphas]
            specs += [make_run(method, 0.0, seed, ce_on="both") for method in ab.sweep_methods]
        if "l_extra" in ab.items:
            specs += l_extra_specs(ab, seed)
        if "exposure" in ab.items:  # for the ablation method, then each control method
            specs += [spec for method in dict.fromkeys([m, *ab.control_methods])
                      for spec in (make_run(method, 0.0, seed),
                                   make_run(method, 0.0, seed, ce_on="both"),
                                   make_run(method, ab.alpha, seed))]
        if "compute" in ab.items:
            specs += [make_run(m, 0.0, seed), make_run(m, ab.alpha, seed)]
            specs += [make_run(m, 0.0, seed, steps=n) for n in ab.compute_steps]
            specs += paper_compute_specs(ab, seed)
        if "parts" in ab.items:  # + raw fine-tuning's same-cost control
            specs += [make_run(method, a, seed) for method in ("none", m)
                      for a in (0.0, ab.alpha)]
            specs.append(make_run("none", 0.0, seed, ce_on="both"))
    specs += [spec for base in (None, *ab.base_seeds) if ab.base_seeds
              for spec in core_specs(ab, base)]
    specs += [spec for base in ab.base_seeds for spec in paper_item_specs(ab, base)]
    unique: dict[str, RunConfig] = {}
    for spec in specs:
        unique.setdefault(spec.name, spec)
    return list(unique.values())


def core_specs(ab: AblationConfig, base_seed: int | None) -> list[RunConfig]:
    """The core comparisons of Section 5.3 on one base model (``ablation.base_seeds``): CE,
    CE on both windows, SCE at ``alpha`` and Jeffreys at ``robust_jeffreys_alpha``, at every
    seed."""
    m = ab.method
    return [spec for seed in ab.seeds for spec in (
        make_run(m, 0.0, seed, base_seed=base_seed),
        make_run(m, 0.0, seed, ce_on="both", base_seed=base_seed),
        make_run(m, ab.alpha, seed, base_seed=base_seed),
        make_run(m, ab.robust_jeffreys_alpha, seed, divergence="jeffreys", base_seed=base_seed))]


def l_extra_specs(ab: AblationConfig, seed: int, base_seed: int | None = None
                  ) -> list[RunConfig]:
    """Item ``l_extra``'s arms (SCE at ``l_extra_alphas``, Jeffreys at
    ``l_extra_jeffreys_alphas``) at every setting of ``l_extra_settings``, one seed."""
    return [make_run(ab.method, a, seed, divergence=d, l_extra_setting=x, base_seed=base_seed)
            for d, alphas in (("sce", ab.l_extra_alphas), ("jeffreys", ab.l_extra_jeffreys_alphas))
            for a in alphas for x in ab.l_extra_settings]


def paper_compute_specs(ab: AblationConfig, seed: int, base_seed: int | None = None
                        ) -> list[RunConfig]:
    """The paper's equal-compute claim, one seed: CE-only at each budget and CE + alpha SCE
    at its fraction of it (``AblationConfig.paper_compute_steps``)."""
    return [spec for n, reg in ab.paper_compute_steps() for spec in (
        make_run(ab.method, 0.0, seed, steps=n, base_seed=base_seed),
        make_run(ab.method, ab.alpha, seed, steps=reg, base_seed=base_seed))]


def paper_item_specs(ab: AblationConfig, base_seed: int) -> list[RunConfig]:
    """The runs of Section 5.3's paper claims that stand on the ablation method (the
    ``l_extra`` settings, item ``l_extra``; the rebuttal's equal compute, item ``compute``, and
    parts, item ``parts``; those of ``ablation.base_items``) on a further base model
    (``ablation.base_seeds``), beyond its core
    comparisons: the ``l_extra`` arms at every setting; CE-only at each of ``compute_steps``
    and the paper's budgets beside CE + alpha SCE at its fractions of them; raw fine-tuning
    (``none``) with CE, with CE on both windows and with CE + alpha SCE; at every seed."""
    m, out = ab.method, []
    items = [i for i in ab.items if i in ab.base_items]
    for seed in ab.seeds:
        if "l_extra" in items:
            out += l_extra_specs(ab, seed, base_seed)
        if "compute" in items:
            out += [make_run(m, 0.0, seed, steps=n, base_seed=base_seed)
                    for n in ab.compute_steps]
            out += paper_compute_specs(ab, seed, base_seed)
        if "parts" in items:
            out += [make_run("none", 0.0, seed, base_seed=base_seed),
                    make_run("none", 0.0, seed, ce_on="both", base_seed=base_seed),
                    make_run("none", ab.alpha, seed, base_seed=base_seed)]
    return out


def gate_specs(pipe: PipelineConfig) -> list[RunConfig]:
    """The premise gates' fine-tuning runs (``lsa.gates``): CE-only runs of every grid method
    and (``gates.raw_finetune``) of raw fine-tuning without a positional method (``none``), at
    the grid's seeds."""
    ft = pipe.finetune
    if 0.0 not in ft.alphas:
        return []
    raw = ("none",) if pipe.gates.raw_finetune else ()
    specs = [make_run(m, 0.0, s) for s in ft.all_seeds() for m in (*ft.methods, *raw)
             if m == "none" or s in ft.seeds_of(m)]
    for spec in specs:  # the grid's runs, as finetune_specs makes them
        spec.processes = ft.method_processes.get(spec.method)
    return specs


def babilong_specs(bl: BabilongConfig) -> list[RunConfig]:
    """Section 5.4, train design: the BABILong training runs; none in the evaluate design,
    whose jobs evaluate finetune runs."""
    if bl.design == "evaluate":
        return []
    return [RunConfig(name=f"babilong_{grid_run_name(bl.method, a, s)}", method=bl.method,
                      alpha=a, seed=s, ce_on="b") for s in bl.seeds for a in bl.alphas]


def check_plan(pipe: PipelineConfig) -> None:
    """What the parts' settings cannot check alone: run names are unique across the grid and
    the explicit runs, a run the grid and the ablations both name has the same settings in
    both, and the evaluate design names existing fine-tuning runs (ConfigError otherwise)."""
    specs = finetune_specs(pipe.finetune)
    names = [r.name for r in specs]
    if len(set(names)) != len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        raise ConfigError(f"finetune.runs: run names must be unique; {twice[0]!r} is also a "
                          "grid run (grid runs are named METHOD_aALPHA_sSEED)")
    grid = {r.name: r.to_dict() for r in specs}
    for spec in [*ablation_specs(pipe.ablation), *gate_specs(pipe)]:
        if spec.name in grid and grid[spec.name] != spec.to_dict():
            raise ConfigError(f"finetune.runs: run {spec.name!r} has other settings than "
                              f"the ablation run of that name; rename it")
    ft = pipe.finetune
    if ft.bases.seeds and not {0.0, pipe.view.alpha} <= set(ft.alphas):
        raise ConfigError(f"finetune.bases: the base factor compares CE with CE + view.alpha "
                          f"({pipe.view.alpha:g}) on the pipeline's base too, so "
                          f"finetune.alphas ({ft.alphas}) must hold 0 and {pipe.view.alpha:g}")
    for key, seeds in (("ablation.base_seeds", pipe.ablation.base_seeds),
                       ("finetune.bases.seeds", pipe.finetune.bases.seeds)):
        if pipe.pretrain.seed in seeds:
            raise ConfigError(f"{key} = {seeds!r}: {pipe.pretrain.seed} is the pipeline's own "
                              "base model (pretrain.seed); list other pretraining seeds")
        if seeds and pipe.pretrain.model.source != "scratch":
            raise ConfigError(f"{key}: further base models are pretrained from scratch; "
                              f"pretrain.model.source is {pipe.pretrain.model.source!r}")
    for spec in specs:
        if spec.base_seed is not None:
            raise ConfigError(f"finetune.runs: run {spec.name!r} sets base_seed: the runs of "
                              "Sections 5.1-5.2 start from the pipeline's base model; further "
                              "base models carry the paper comparisons of finetune.bases and "
                              "Section 5.3's core comparisons (ablation.base_seeds)")
    for name in pipe.longbench.finetune_runs or []:
        if name not in grid:
            raise ConfigError(f"longbench.finetune_runs = {pipe.longbench.finetune_runs!r}: "
                              f"no fine-tuning run named {name!r}; finetune's runs: "
                              f"{', '.join(grid)}")
    for name in pipe.babilong.finetune_runs or []:
        if name not in grid:
            raise ConfigError(f"babilong.finetune_runs = {pipe.babilong.finetune_runs!r}: "
                              f"no fine-tuning run named {name!r}; finetune's runs: "
                              f"{', '.join(grid)}")


def study_specs(pipe: PipelineConfig, seed: int) -> list[tuple[str, str, RunConfig]]:
    """The confirmatory study's runs on the base of pretraining seed ``seed`` (issue 62,
    ``study.arms``): ``(method, arm, spec)``, each arm on each of its methods at the
    fine-tuning seed ``seed`` (and ``seed + second_seed_offset`` where the arm runs a second
    seed on the method)."""
    st = pipe.study
    return [(method, arm.name, make_run(method, arm.alpha, s, divergence=arm.divergence,
                                        ce_on=arm.ce_on, base_seed=seed, stream=arm.stream))
            for arm in st.arms for method in arm.methods
            for s in (seed, *([seed + st.second_seed_offset] if method in arm.second_seed
                              else []))]


def check_study(pipe: PipelineConfig) -> None:
    """The study's bases are new: none is the pipeline's base model or a further base of
    ``ablation.base_seeds`` / ``finetune.bases.seeds`` (ConfigError otherwise)."""
    st = pipe.study
    ours = {s for stage in st.stage_seeds for s in stage}
    ours |= set(range(st.replacement_start, st.replacement_start + st.max_replacements))
    used = {pipe.pretrain.seed, *pipe.ablation.base_seeds, *pipe.finetune.bases.seeds} & ours
    if used:
        raise ConfigError(f"study.stage_seeds: {sorted(used)} already pretrained other bases "
                          "(pretrain.seed, ablation.base_seeds, finetune.bases.seeds): the "
                          "study's bases need new pretraining seeds")
    if pipe.pretrain.model.source != "scratch":
        raise ConfigError("study: its bases are pretrained from scratch; pretrain.model.source "
                          f"is {pipe.pretrain.model.source!r}")


def runs_of(pipe: PipelineConfig) -> RunSet:
    """Every run of a resolved configuration (a ``RunSet``), planned and checked: a value its
    caller keeps and passes down (a notebook's ``Setup.plan``), never a cache on the
    configuration."""
    return RunSet(pipe)


# ---------------------------------------------------------------------------------------------
# every run of a configuration


class RunSet:
    """Every run of one resolved configuration, built once: ``base`` (the pipeline's base
    model; ``bases``: it and the further ones of ``ablation.base_seeds`` and
    ``finetune.bases``), and by name ``finetune`` (the grid, explicit runs, the base factor's
    and ablations; ``grid``, ``base_factor`` and ``ablation`` name each section's),
    ``babilong`` (train design), ``babilong_eval`` (evaluate design, keyed by the evaluated
    finetune run's name) and ``probes``."""

    def __init__(self, pipe: PipelineConfig, root: Path | None = None):
        """``root``: where the runs' folders lie instead of ``results/<profile>/runs/`` (a
        published snapshot's, ``lsa.published``)."""
        check_plan(pipe)
        self.root = root
        #: the ids of kept runs (the study's kept blocks, ``lsa.kept``): read, never made
        self.kept: set[str] = set()
        #: the study's runs (``study.enabled``): base, method, arm, seed and name of each
        self.study: list[dict[str, Any]] = []

        def new(*args, **kwargs) -> Run:  # every run of the set lies under root
            return Run(*args, root=root, **kwargs)

        self.profile = pipe.profile
        self.design = pipe.babilong.design
        base = new("base", "base", pipe.profile, base_identity(pipe))
        self.base = base
        if pipe.study.enabled:
            self._plan_study(pipe, new)
            return
        self.bases = {"base": base, **{
            base_name(s): new("base", base_name(s), pipe.profile, base_identity(pipe, s))
            for s in dict.fromkeys([*pipe.ablation.base_seeds, *pipe.finetune.bases.seeds])}}
        grid, ablation = finetune_specs(pipe.finetune), ablation_specs(pipe.ablation)
        self.grid = [s.name for s in grid]
        self.ablation = [s.name for s in ablation]
        factor = base_factor_specs(pipe)
        # the factor's runs on every base: the pipeline's (grid runs) first, then the others
        self.base_factor = [*(dict.fromkeys(make_run(s.method, s.alpha, s.seed).name
                                            for s in factor)), *(s.name for s in factor)]
        gates = gate_specs(pipe)
        self.gate_runs = [s.name for s in gates]
        specs = {s.name: s for s in gates}
        specs.update({s.name: s for s in ablation})
        specs.update({s.name: s for s in factor})  # its processes (method_processes) kept
        specs.update({s.name: s for s in grid})  # equal settings (check_plan)
        def start(spec: RunConfig) -> Run:
            return self.bases[base_name(spec.base_seed)]

        self.finetune = {name: new("finetune", name, pipe.profile,
                                   finetune_identity(pipe, start(s), s), s, (start(s),))
                         for name, s in specs.items()}
        self.babilong = {s.name: new("babilong", s.name, pipe.profile,
                                     babilong_identity(pipe, base, s), s, (base,))
                         for s in babilong_specs(pipe.babilong)}
        evaluated = ([] if self.design != "evaluate"
                     else pipe.babilong.finetune_runs or self.grid)
        self.babilong_eval = {}
        for name in evaluated:
            run = self.finetune[name]
            self.babilong_eval[name] = new("babilong-eval", name, pipe.profile,
                                           babilong_eval_identity(pipe, run), run.spec, (run,))
        self.longbench: dict[str, Run] = {}
        if pipe.longbench.enabled:
            for name in pipe.longbench.finetune_runs or self.grid:
                run = self.finetune[name]
                self.longbench[name] = new("longbench", name, pipe.profile,
                                           longbench_identity(pipe, run), run.spec, (run,))
        self.probes: dict[str, Run] = {}
        pop = pipe.population

        def probe(name: str, source: Run | str, rope: dict[str, Any] | None) -> None:
            needs = (base,) if source is base or isinstance(source, str) else (source, base)
            self.probes[name] = new("probe", name, pipe.profile,
                                    probe_identity(pipe, source, rope), None, needs)

        probe("base", base, None)
        for method in pop.rope_methods:
            for factor in pop.rope_factors:
                probe(f"base_{method}_x{factor}", base, {"method": method, "factor": factor})
        if pop.babilong_runs:
            for name, run in self.babilong.items():
                probe(name, run, None)
        for model in pop.models:
            probe(probe_name(model), model, None)
        for model in pop.reference_models:  # forward only, on its own tokens: not in Table 1
            self.probes[f"ref_{model}"] = new("probe", f"ref_{model}", pipe.profile,
                                              reference_identity(pipe, model), None, ())
        # Section 3's grid, where a section reads it
        self.synthetic = ({"synthetic": new("synthetic", "synthetic", pipe.profile,
                                            synthetic_identity(pipe))}
                          if any("synthetic" in spec.uses_runs
                                 for spec in pipe.sections.values()) else {})

    def _plan_study(self, pipe: PipelineConfig, new: Any) -> None:
        """The study's profile: its bases (``lsa.config.base_plan``, the kept bases' gates
        deciding replacements), each with every arm, and nothing else; a run
        of a kept block lies in the kept folder (``lsa.kept``), whose marker it has."""
        check_study(pipe)
        record = read_kept(pipe.profile) if self.root is None else None
        kept_ids = set(record.runs) if record else set()

        def placed(run: Run) -> Run:
            if run.id not in kept_ids:
                return run
            self.kept.add(run.id)
            return dataclasses.replace(run, root=record.runs_folder)

        plan = base_plan(pipe.study, record.passed() if record else {})
        self.grid, self.ablation, self.base_factor, self.gate_runs = [], [], [], []
        self.bases, self.finetune, self.probes = {}, {}, {}
        self.babilong, self.babilong_eval, self.longbench, self.synthetic = {}, {}, {}, {}
        for seed in plan.seeds:
            name = base_name(seed)
            base = self.bases[name] = placed(new("base", name, pipe.profile,
                                                 base_identity(pipe, seed)))
            # the base model measured by the fine-tuning runs' protocol (lsa.jobs.probe): the
            # diverged-run rule's and the moderators' numbers
            self.probes[name] = placed(new("probe", name, pipe.profile,
                                           probe_identity(pipe, base, None), None, (base,)))
            for method, arm, spec in study_specs(pipe, seed):
                self.finetune[spec.name] = placed(new(
                    "finetune", spec.name, pipe.profile, finetune_identity(pipe, base, spec),
                    spec, (base,)))
                self.study.append({"base": seed, "method": method, "arm": arm,
                                   "seed": spec.seed, "name": spec.name})

    def of_kind(self, kind: str) -> dict[str, Run]:
        if kind not in KINDS:
            raise ConfigError(f"run kind {kind!r}: must be one of {', '.join(KINDS)}")
        return {"base": self.bases, "finetune": self.finetune,
                "babilong": self.babilong, "babilong-eval": self.babilong_eval,
                "probe": self.probes, "longbench": self.longbench,
                "synthetic": self.synthetic}[kind]

    def get(self, kind: str, name: str = "base") -> Run:
        """The run ``name`` of ``kind``; a ConfigError naming the known runs otherwise."""
        if kind == "babilong-eval" and self.design != "evaluate":
            raise ConfigError(f"babilong.design = {self.design!r}: fine-tuning runs are "
                              "evaluated on BABILong in the evaluate design only (set design: "
                              "evaluate)")
        runs = self.of_kind(kind)
        if name not in runs:
            where = {"finetune": "finetune.runs", "babilong": "babilong",
                     "babilong-eval": "babilong.finetune_runs",
                     "probe": "population", "longbench": "longbench.finetune_runs (and "
                     "longbench.enabled)"}.get(kind, kind)
            raise ConfigError(f"{where}: no run named {name!r}; known: {', '.join(runs)}")
        return runs[name]

    def __iter__(self) -> Iterator[Run]:
        """Every run the configuration makes (a kept one is read, never made: left out)."""
        for runs in (self.bases, self.finetune, self.babilong, self.babilong_eval, self.probes,
                     self.longbench, self.synthetic):
            yield from (run for run in runs.values() if run.id not in self.kept)

    def used_by(self, kinds: list[str]) -> list[Run]:
        """The runs a section reads (``uses_runs``), each once: ``finetune`` the grid, explicit
        runs and the base factor's (``finetune.bases``), ``ablation`` the ablation runs,
        ``babilong`` the runs of whichever design is configured, ``probe`` the probes."""
        out: dict[str, Run] = {}
        for kind in kinds:
            if kind == "finetune":
                runs = [self.finetune[n] for n in (*self.grid, *self.base_factor)]
            elif kind == "ablation":
                runs = [self.finetune[n] for n in self.ablation]
            elif kind == "longbench":
                runs = list(self.longbench.values())
            elif kind == "gates":
                runs = [self.base, *(self.finetune[n] for n in self.gate_runs),
                        self.probes["base"]]
            elif kind == "probe":
                runs = list(self.probes.values())
            elif kind == "babilong":
                runs = [*self.babilong.values(), *self.babilong_eval.values()]
            elif kind == "synthetic":
                runs = list(self.synthetic.values())
            elif kind == "study":  # each base, then its arms
                runs = [*self.bases.values(), *(self.finetune[r["name"]] for r in self.study)]
            else:
                raise ConfigError(f"uses_runs: {kind!r} is not a kind of runs a section reads")
            out.update({r.id: r for r in runs})
        return list(out.values())
