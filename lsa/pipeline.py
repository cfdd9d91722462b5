"""The pipeline around the library (no torch): the one resolved configuration file, what each
notebook receives, the Snakemake-only settings, and checks on what a pipeline run wrote.

- ``resolved_text``: the Snakefile validates Snakemake's merged ``config`` once
  (``lsa.config.from_mapping``) and its rule ``resolved_config`` writes it, resolved, to
  ``resolved_file``, ``results/<profile>/config.yaml`` (only when its content changes, so
  timestamps stay stable; parsing the workflow writes nothing); every job (``--config-file``)
  and notebook (``config_file``) of the pipeline reads that file (``write_resolved`` writes it
  outside Snakemake: tests);
- ``notebook_parameters``: what papermill passes to a section's notebook (its settings,
  ``section_settings``, it reads from the resolved file);
- ``workflow_settings``: ``workflow/settings.yaml``: threads, host memory, GPUs, runtime and
  SLURM partition of each job, which jobs stay on the submitting host, and the lsa modules
  that are each job's inputs;
- ``check_outputs``: ``python -m lsa check`` and the tests.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

import yaml

from lsa import paths
from lsa.config import PROFILES, RESOLVED_KEY, PipelineConfig, load_config, read_yaml
from lsa.markers import FINISHED
from lsa.runs import KINDS, runs_of
from lsa.stats import Verdict
from lsa.strict import ConfigError, StrictConfig, merge, setting

VERDICTS = set(get_args(Verdict))  # the paper's verdicts and the controls' outcome words
RUN_INFO_KEYS = {"config", "seed", "git_commit", "packages", "device", "wall_time_s"}
WORKFLOW_SETTINGS = paths.ROOT / "workflow" / "settings.yaml"


# ---------------------------------------------------------------------------------------------
# the resolved configuration


def resolved_file(profile: str) -> Path:
    """Where the pipeline writes the resolved configuration of ``profile``."""
    return paths.results_dir(profile) / "config.yaml"


def relative(path: Path) -> str:
    """A path as the pipeline passes it: relative to the repository (where jobs run)."""
    return os.path.relpath(path, paths.ROOT)


def resolved_text(pipe: PipelineConfig) -> str:
    header = (f"# The resolved configuration of profile {pipe.profile}, written by the Snakefile "
              "from config/config.yaml\n# and any --config / --configfile values. Every job and "
              "notebook of the pipeline reads it.\n# Do not edit: change config/config.yaml or "
              "pass --config, and rerun snakemake.\n")
    body = yaml.safe_dump({RESOLVED_KEY: True, **pipe.to_dict()}, sort_keys=False, width=100)
    return header + body


def write_resolved(pipe: PipelineConfig) -> Path:
    """Write ``results/<profile>/config.yaml`` when its content differs (else leave it, and its
    timestamp, alone); returns its path."""
    from lsa.files import atomic_write_text

    path = resolved_file(pipe.profile)
    text = resolved_text(pipe)
    if not path.exists() or path.read_text() != text:
        atomic_write_text(path, text)
    return path


def pipeline_config(profile: str | None = None, config_file: str | Path | None = None
                    ) -> PipelineConfig:
    """What a pipeline run of ``profile`` used: ``config_file``, else its resolved file when
    the pipeline wrote one, else ``config/config.yaml`` (``python -m lsa check``)."""
    if config_file is None and profile is not None and resolved_file(profile).exists():
        config_file = resolved_file(profile)
    return load_config(config_file, profile=profile)


def notebook_parameters(pipe: PipelineConfig, section: str) -> dict[str, Any]:
    """What papermill passes to a section's notebook in the pipeline (``lsa.notebook``): the
    profile, the resolved file (``config_file``) and, for a notebook over runs, the ids of the
    runs it reads (``run_ids``, its inputs: it fails when its configuration gives others). Its
    settings it reads from that file."""
    params: dict[str, Any] = {"profile": pipe.profile,
                              "config_file": relative(resolved_file(pipe.profile))}
    if pipe.sections[section].uses_runs:
        params["run_ids"] = [r.id for r in runs_of(pipe).used_by(
            pipe.sections[section].uses_runs)]
    return params


def section_settings(pipe: PipelineConfig, section: str) -> dict[str, Any]:
    """A section's settings, as its notebook records them (``run_info.json``) and as the
    Snakefile tracks them (a changed setting reruns the notebook)."""
    return pipe.section_config(section).to_dict()


# ---------------------------------------------------------------------------------------------
# Snakemake-only settings (workflow/settings.yaml)


@dataclass
class Resources(StrictConfig):
    """What one job asks the scheduler for."""

    threads: int = setting(1, ge=1, help="CPU threads (torch intra-op threads of a run job)")
    mem_mb: int = setting(4000, ge=100, help="host memory, MB")
    gpu: int = setting(0, ge=0, help="GPUs")
    runtime: int = setting(240, ge=1, help="wall-time limit, minutes (SLURM --time)")
    partition: str | None = setting(
        None, help="SLURM partition; null: `partitions.gpu` for a job with gpu > 0, else "
                   "`partitions.cpu`")
    local: bool = setting(False, help="a light job: run on the submitting host, not sent to "
                                      "the cluster (Snakemake's localrules)")
    gpu_mem_gb: float | None = setting(
        None, gt=0, help="memory of each GPU the job is planned for, GB (python -m lsa plan "
                         "checks its estimate against it; the pre-flight stops a job that does "
                         "not fit); null: not checked")
    slurm_extra: str | None = setting(
        None, help="extra sbatch options of the job under the SLURM executor (its "
                   "`slurm_extra` resource), e.g. \"--gres=gpu:h100:1 --qos=normal\" or "
                   "\"--constraint=a100-80g\"; null: none")


@dataclass
class Partitions(StrictConfig):
    """The SLURM partitions of jobs without and with GPUs (adapt to your site)."""

    cpu: str = setting("cpu", help="partition of jobs with gpu = 0")
    gpu: str = setting("gpu", help="partition of jobs with gpu > 0")


@dataclass(frozen=True)
class JobResources:
    """A job's resources as the rules declare them (Snakemake's names: ``slurm_partition``
    is the SLURM executor plugin's)."""

    threads: int
    mem_mb: int
    gpu: int
    runtime: int
    slurm_partition: str
    local: bool
    slurm_extra: str | None = None

    def snakemake(self) -> dict[str, Any]:
        """The rule's ``resources:`` (threads are its ``threads:``; ``slurm_extra`` only where
        it is set)."""
        out = {"mem_mb": self.mem_mb, "gpu": self.gpu, "runtime": self.runtime,
               "slurm_partition": self.slurm_partition}
        if self.slurm_extra:
            out["slurm_extra"] = self.slurm_extra
        return out


@dataclass
class PlanAssumptions(StrictConfig):
    """What ``python -m lsa plan`` assumes to turn FLOPs and decoding steps into hours: stated
    assumptions with their source, not measurements (replace them with a measured throughput,
    e.g. from scripts/gpu_check.sh's gpu_check.json, when you have one)."""

    tflops: list[float] = setting(
        factory=lambda: [100.0, 300.0], each_gt=0,
        help="effective training/forward TFLOP/s per GPU, low and high end of the range")
    decode_step_s: list[float] = setting(
        factory=lambda: [0.02, 0.06], each_gt=0,
        help="seconds per greedy decoding step of transformers' generate (a batch shares a "
             "step), low and high end")
    longbench_samples: int = setting(
        300, ge=1, help="samples per LongBench-E dataset when its file is not at hand and no "
                        "limit is set (an upper bound)")
    source: str = setting("unstated", help="where the numbers come from (printed by the plan)")

    def validate(self) -> None:
        for name in ("tflops", "decode_step_s"):
            pair = getattr(self, name)
            if len(pair) != 2 or pair[0] > pair[1]:
                self._fail(name, "must be [low, high] with low <= high")


@dataclass
class PlanSettings(StrictConfig):
    """``plan:`` of workflow/settings.yaml: the assumptions per lsa profile and the published
    architectures of downloaded models (used when their config.json is not at hand)."""

    default: PlanAssumptions = setting(factory=PlanAssumptions,
                                       help="the assumptions of every profile")
    profiles: dict[str, dict[str, Any]] = setting(
        factory=dict, help="per lsa profile: PlanAssumptions' keys overriding `default`")
    architectures: dict[str, dict[str, Any]] = setting(
        factory=dict, help="hub id (or smollm2) -> vocab_size, hidden_size, n_layers, n_heads, "
                           "n_kv_heads, intermediate_size, tie_embeddings, source")

    def validate(self) -> None:
        for profile in self.profiles:
            if profile not in PROFILES:
                raise ConfigError(f"plan.profiles.{profile}: unknown profile; allowed: "
                                  f"{', '.join(PROFILES)}")
            self.assumptions(profile)
        keys = {"vocab_size", "hidden_size", "n_layers", "n_heads", "intermediate_size"}
        for name, arch in self.architectures.items():
            missing = sorted(keys - set(arch))
            if missing:
                raise ConfigError(f"plan.architectures.{name}: lacks {missing[0]}")
            unknown = sorted(set(arch) - keys - {"n_kv_heads", "tie_embeddings", "source"})
            if unknown:
                raise ConfigError(f"plan.architectures.{name}.{unknown[0]}: unknown key")
            for key in keys:
                if not isinstance(arch[key], int) or isinstance(arch[key], bool) or arch[key] < 1:
                    raise ConfigError(f"plan.architectures.{name}.{key} = {arch[key]!r}: must "
                                      "be an integer >= 1")

    def assumptions(self, profile: str) -> PlanAssumptions:
        return PlanAssumptions.from_dict(merge(self.default.to_dict(),
                                               self.profiles.get(profile) or {}),
                                         prefix=f"plan.profiles.{profile}")


@dataclass
class WorkflowSettings(StrictConfig):
    """``workflow/settings.yaml``."""

    run_modules: dict[str, list[str]] = setting(
        help="per kind of run: the lsa modules that determine its numbers (its inputs), each a "
             "path under lsa/ or the name of a list in module_groups (modules_of expands them)")
    run_resources: dict[str, dict[str, dict[str, Any]]] = setting(
        help="per kind of run: resources (Resources' keys) under `default`, overridden key by "
             "key per lsa profile")
    sections: dict[str, dict[str, Any]] = setting(
        help="per section notebook: resources (Resources' keys) under `default`, overridden "
             "key by key per section (its module inputs are what it imports: "
             "lsa.imports.notebook_inputs)")
    partitions: Partitions = setting(factory=Partitions, help="SLURM partitions (cpu, gpu)")
    light: Resources = setting(factory=lambda: Resources(local=True),
                               help="the bookkeeping jobs (resolved configuration, kernel, "
                                    "report figures)")
    module_groups: dict[str, list[str]] = setting(
        factory=dict, help="lists of lsa modules that several kinds of run share, named in "
                           "run_modules instead of repeated there")
    kernel_start_timeout: int = setting(
        300, ge=1, help="seconds papermill waits for a section notebook's kernel to start "
                        "(--start-timeout); each cell may take the job's runtime "
                        "(--execution-timeout: section_job's runtime, in seconds)")
    plan: PlanSettings = setting(factory=PlanSettings,
                                 help="the assumptions of python -m lsa plan (lsa/plan.py)")

    def validate(self) -> None:
        missing = sorted(set(KINDS) - set(self.run_modules))
        if missing:
            self._fail("run_modules", f"lacks the run kind {missing[0]!r}")
        for profile, kinds in self.run_resources.items():
            if profile != "default" and profile not in PROFILES:
                raise ConfigError(f"run_resources.{profile}: unknown profile; allowed: "
                                  f"default, {', '.join(PROFILES)}")
            unknown = sorted(set(kinds) - set(KINDS))
            if unknown:
                raise ConfigError(f"run_resources.{profile}.{unknown[0]}: unknown run kind; "
                                  f"allowed: {', '.join(KINDS)}")
            for kind in KINDS:
                self.resources(profile, kind)  # every layer is valid
        for key in self.sections:
            self.section(key)
        for name, modules in self.module_groups.items():
            if name.endswith(".py") or name in KINDS:
                raise ConfigError(f"module_groups.{name}: a group's name is neither a module "
                                  "(*.py) nor a run kind")
            for module in modules:
                if not module.endswith(".py"):
                    raise ConfigError(f"module_groups.{name}: {module!r} is not a module (a "
                                      "group lists modules only)")
        for kind, entries in self.run_modules.items():
            for entry in entries:
                if not entry.endswith(".py") and entry not in self.module_groups:
                    raise ConfigError(f"run_modules.{kind}: {entry!r} is neither a module "
                                      "(*.py) nor a name of module_groups")
            for module in self.modules_of(kind):
                if not (paths.ROOT / "lsa" / module).exists():
                    raise ConfigError(f"run_modules.{kind}: no module lsa/{module}")

    def modules_of(self, kind: str) -> list[str]:
        """The lsa modules (paths under lsa/) that determine a ``kind`` of run's numbers, the
        inputs of its jobs: its ``run_modules`` list, each group name replaced by the group's
        modules, in order, without repeats."""
        modules = [m for entry in self.run_modules[kind]
                   for m in self.module_groups.get(entry, [entry])]
        return list(dict.fromkeys(modules))

    def resources(self, profile: str, kind: str) -> Resources:
        """The resources of a run job: ``default``, then the profile's values on top."""
        data = merge(self.run_resources.get("default", {}).get(kind) or {},
                     self.run_resources.get(profile, {}).get(kind) or {})
        return Resources.from_dict(data, prefix=f"run_resources.{profile}.{kind}")

    def section(self, key: str) -> Resources:
        """The resources of a section's notebook job: ``default``, then the section's."""
        return Resources.from_dict(merge(self.sections.get("default") or {},
                                         self.sections.get(key) or {}), prefix=f"sections.{key}")

    def job(self, res: Resources, processes: int = 1, what: str = "job") -> JobResources:
        """What a job declares: its partition chosen by its GPUs, and one GPU per process for
        a run of several processes (``lsa.devices``)."""
        gpu = res.gpu
        if processes > 1:
            if gpu not in (0, 1, processes):
                raise ConfigError(f"{what}: {processes} processes, one GPU each, but its "
                                  f"resources say gpu = {gpu}")
            gpu = processes
        partition = res.partition or (self.partitions.gpu if gpu else self.partitions.cpu)
        return JobResources(res.threads, res.mem_mb, gpu, res.runtime, partition, res.local,
                            res.slurm_extra)

    def plan_for(self, profile: str) -> PlanAssumptions:
        """The plan's assumptions for ``profile``: ``plan.default``, then its own."""
        return self.plan.assumptions(profile)

    def run_job(self, profile: str, run) -> JobResources:
        """A run job's resources (``lsa.runs.Run``: its kind and process count)."""
        return self.job(self.resources(profile, run.kind), run.processes, run.describe())

    def section_job(self, key: str) -> JobResources:
        return self.job(self.section(key), what=f"section {key}")

    def notebook_timeouts(self, key: str) -> dict[str, int]:
        """papermill's limits on a section's notebook, in seconds: ``start`` for its kernel to
        start (``kernel_start_timeout``), ``execution`` for each cell (the job's runtime: no
        cell may outlast the wall time its job is given)."""
        return {"start": self.kernel_start_timeout,
                "execution": self.section_job(key).runtime * 60}


def rule_name(run) -> str:
    """The Snakemake rule of a run's job (``lsa.runs.Run``)."""
    if run.kind == "base":
        return run.job
    return run.kind.replace("-", "_") + "_" + "".join(c if c.isalnum() else "_" for c in run.name)


#: the light bookkeeping rules (workflow/rules/setup.smk and report.smk), named once: the
#: rules of the resolved files (the profile's, then, for a profile that shares runs, the other
#: profile's: lsa.runs.SHARED_RUNS), then the kernel and the report's figures; they take the
#: `light` resources of workflow/settings.yaml and stay local when those say so
RESOLVED_RULES = ("resolved_config", "resolved_config_shared")
LIGHT_RULES = (*RESOLVED_RULES, "jupyter_kernel", "report_files")


def planned_resources(pipe: PipelineConfig, settings: WorkflowSettings | None = None
                      ) -> dict[str, JobResources]:
    """Every rule of a profile's workflow and the resources it declares (tests compare them
    with what Snakemake assigns)."""
    settings = settings or workflow_settings()
    out = {rule_name(run): settings.run_job(pipe.profile, run) for run in runs_of(pipe)}
    out.update({f"section_{key}": settings.section_job(key) for key in pipe.sections})
    out.update({name: settings.job(settings.light) for name in LIGHT_RULES})
    return out


def workflow_settings(path: Path | None = None) -> WorkflowSettings:
    """``workflow/settings.yaml``, validated."""
    raw = read_yaml(path or WORKFLOW_SETTINGS)
    return WorkflowSettings.from_dict(raw, prefix="")


# ---------------------------------------------------------------------------------------------
# checks on what a pipeline run wrote


def unmark_broken_runs(runs) -> list[tuple[Any, list[str]]]:
    """Take the finished marker away from every marked run whose files do not verify
    (``lsa.runs.Run.unmark_if_broken``: a file deleted, cut or changed after the job ended, or
    no checksums recorded), so that Snakemake makes the run again instead of reading broken
    files; returns those runs and their problems. ``python -m lsa pipeline`` calls it before
    Snakemake plans (``lsa.launch.unmark_broken``)."""
    return [(run, problems) for run in runs if (problems := run.unmark_if_broken())]


def check_runs(pipe: PipelineConfig) -> list[str]:
    """Problems in the folders of every run of the configuration."""
    return [p for run in runs_of(pipe) for p in run_problems(pipe, run)]


def run_problems(pipe: PipelineConfig, run) -> list[str]:
    """Problems in one run's folder: its files (``lsa.markers.output_problems``: each file
    named, checked against the checksums its marker records) and the metrics its kind must
    hold."""
    label = run.name if run.kind == "base" else \
        f"{run.kind}_{run.name}" if run.kind in ("babilong-eval", "probe", "longbench") \
        else run.name
    problems: list[str] = []
    if run.finished:
        problems.extend(f"run {label}: {p}" for p in run.problems())
    try:
        metrics = json.loads((run.folder / "metrics.json").read_text())
        json.loads((run.folder / FINISHED).read_text())
    except (OSError, ValueError) as exc:
        problems.append(f"run {label}: unfinished or unreadable ({exc})")
        return problems
    if run.kind == "base":
        ppl = metrics.get("validation_perplexity", {})
    elif run.kind in ("babilong", "babilong-eval"):
        ppl = {}
        rows = metrics.get("accuracy", [])
        if not rows or not all(isinstance(r.get("correct"), bool) for r in rows):
            problems.append(f"run {label}: no BABILong accuracy rows")
    elif run.kind == "longbench":
        ppl = {}
        score = metrics.get("longbench_e")
        if set(metrics.get("per_dataset", {})) != set(pipe.longbench.datasets):
            problems.append(f"run {label}: LongBench-E datasets "
                            f"{sorted(metrics.get('per_dataset', {}))}, expected "
                            f"{sorted(pipe.longbench.datasets)}")
        if not isinstance(score, (int, float)) or not 0 <= score <= 100:
            problems.append(f"run {label}: LongBench-E score {score!r}")
    elif run.kind == "synthetic":  # Section 3's grid: a test loss per model and length
        ppl = {}
        rows = metrics.get("per_length", [])
        if not rows or not all(isinstance(r.get("mse"), (int, float)) and math.isfinite(r["mse"])
                               for r in rows):
            problems.append(f"run {label}: no finite test loss per model and length")
    elif "reference" in run.identity:  # a reference model: the decomposition only
        ppl = {}
        mis = metrics.get("misalignment", {}).get("mean")
        if not isinstance(mis, (int, float)) or not math.isfinite(mis) or mis < 0:
            problems.append(f"run {label}: misalignment metric {mis!r}")
    else:
        ppl = metrics.get("perplexity", {})
        ft = pipe.finetune
        wanted = {str(n) for n in (ft.eval_lengths(run.spec) if run.kind == "finetune" else
                                   [m * ft.l_train for m in ft.eval_multiples])}
        if set(ppl) != wanted:
            problems.append(f"run {label}: perplexity at {sorted(ppl)}, expected "
                            f"{sorted(wanted)}")
        mis = metrics.get("misalignment", {}).get("mean")
        if not isinstance(mis, (int, float)) or not math.isfinite(mis) or mis < 0:
            problems.append(f"run {label}: misalignment metric {mis!r}")
    for length, value in ppl.items():
        if not (isinstance(value.get("ppl"), (int, float)) and math.isfinite(value["ppl"])
                and value["ppl"] > 1):
            problems.append(f"run {label}: perplexity at {length} is {value.get('ppl')!r}")
    if not (run.folder / "run_info.json").exists():
        problems.append(f"run {label}: run_info.json missing")
    return problems


def output_states(pipe: PipelineConfig) -> dict[str, tuple[str, list[str]]]:
    """Every output of ``pipe.profile``, a run (by id) or a section (by key), with its state,
    ``made``, ``not made`` (a run without its finished marker, a section without its
    ``metrics.json``) or ``damaged`` (made, with problems: ``run_problems``,
    ``section_problems``), and its problems (``python -m lsa check``)."""
    out = {}
    for run in runs_of(pipe):
        problems = run_problems(pipe, run)
        out[run.id] = ("not made" if not run.finished else "damaged" if problems else "made",
                       problems)
    for key in pipe.sections:
        problems = section_problems(pipe, key)
        made = paths.metrics_file(pipe.profile, key).exists()
        out[key] = ("not made" if not made else "damaged" if problems else "made", problems)
    return out


def check_outputs(pipe: PipelineConfig) -> list[str]:
    """Every problem found in the outputs of ``pipe.profile``; an empty list means all is well."""
    return check_runs(pipe) + check_sections(pipe)


def check_sections(pipe: PipelineConfig) -> list[str]:
    """Problems in the section notebooks' outputs (metrics, provenance, figures, tables)."""
    return [p for key in pipe.sections for p in section_problems(pipe, key)]


def verdict_problems(key: str, claims: list[dict[str, Any]]) -> list[str]:
    """Claims of section ``key`` whose verdict is not a word of their kind: the confirmatory
    study's (origin ``study``: ``lsa.study.STUDY_VERDICTS``, its pre-registration's words),
    else the paper's verdicts and the controls' outcomes (``lsa.stats.Verdict``)."""
    from lsa.study import STUDY_VERDICTS

    return [f"{key}: claim {c.get('id')} has verdict {c.get('verdict')!r}" for c in claims
            if c.get("verdict") not in (STUDY_VERDICTS if c.get("origin") == "study"
                                        else VERDICTS)]


def section_problems(pipe: PipelineConfig, key: str) -> list[str]:
    """Problems in one section's outputs (``check_sections``)."""
    import nbformat

    problems: list[str] = []
    profile = pipe.profile
    folder = paths.section_dir(profile, key)
    try:
        metrics = json.loads(paths.metrics_file(profile, key).read_text())
        info = json.loads((folder / "run_info.json").read_text())
    except (OSError, ValueError) as exc:
        problems.append(f"{key}: metrics.json or run_info.json missing or unreadable ({exc})")
        return problems
    if info.get("config") != section_settings(pipe, key):
        problems.append(f"{key}: run_info.json config differs from the {profile} profile")
    missing = RUN_INFO_KEYS - set(info)
    if missing:
        problems.append(f"{key}: run_info.json lacks {sorted(missing)}")
    problems += verdict_problems(key, metrics.get("claims", []))
    for name in metrics.get("figures", []):
        for ext in ("png", "pdf"):
            fig = paths.figures_dir(profile) / f"{name}.{ext}"
            if not fig.exists() or fig.stat().st_size < 1000:
                problems.append(f"{key}: figure {fig} missing or empty")
    for name in metrics.get("tables", []):
        for ext in ("csv", "md"):
            if not (folder / f"{name}.{ext}").exists():
                problems.append(f"{key}: table {name}.{ext} missing")
    nb_path = paths.executed_notebook(profile, key)
    try:
        nb = nbformat.read(nb_path, as_version=4)
    except OSError as exc:
        problems.append(f"{key}: executed notebook missing ({exc})")
        return problems
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                problems.append(f"{key}: executed notebook has an error: {output.get('ename')}")
    return problems

