"""Starting the pipeline so that an interrupted one resumes with no manual step
(``python -m lsa pipeline``, which ``make reproduce`` runs).

A Snakemake invocation that is killed (a closed laptop, a lost SSH session, ``kill -9``) leaves
its lock in ``.snakemake/locks/`` and marks its running jobs incomplete. Started again as it
was, Snakemake stops with "Directory cannot be locked" until ``snakemake --unlock``, and then
with the incomplete files until ``--rerun-incomplete``. ``run_pipeline`` does both, safely:

- the lock is removed only when no Snakemake process is alive in this repository (read from
  ``/proc``: a process whose command is Snakemake and whose working directory is the
  repository); where that cannot be read (no ``/proc``), it is left alone and the message says
  what to run once no other Snakemake is running;
- Snakemake runs with ``--rerun-incomplete``, so the jobs the kill cut are made again (a run
  restarts from its checkpoint, or from its start; a half-written file is never taken as
  done: ``lsa.runs``);
- a run marked finished whose files no longer verify (a file cut or damaged after its job
  ended) loses its marker first, so that Snakemake makes it again (``unmark_broken``; the
  Snakefile itself writes nothing while it is parsed); a job run by hand does the same for its
  run, and stops on a damaged run it reads (``verify_job``).

The configuration those checks and the pre-flight plan with is the one Snakemake runs: one
merge, ``merged_config`` (Snakemake's ``update_config`` over ``config/config.yaml``, the
``--configfile`` files and the ``--config`` values), which ``workflow/rules/common.smk`` uses too.
"""

from __future__ import annotations

import copy
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import yaml

from lsa import paths


def lock_files(root: Path = paths.ROOT) -> list[Path]:
    folder = root / ".snakemake" / "locks"
    return sorted(folder.glob("*.lock")) if folder.is_dir() else []


def snakemake_alive(root: Path = paths.ROOT) -> bool | None:
    """Whether a Snakemake process runs in ``root`` (None: cannot tell, no ``/proc``)."""
    proc = Path("/proc")
    if not (proc / "self" / "cmdline").exists():
        return None
    me = os.getpid()
    target = os.path.realpath(root)
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            cwd = os.path.realpath(os.readlink(entry / "cwd"))
        except OSError:
            continue
        command = b" ".join(os.path.basename(a) for a in argv[:3])
        if b"snakemake" in command and b"--unlock" not in argv and cwd == target:
            return True
    return False


def unlock_if_stale(root: Path = paths.ROOT, snakemake: list[str] | None = None) -> str | None:
    """Remove a lock that no live Snakemake holds; returns what was done (None: no lock)."""
    locks = lock_files(root)
    if not locks:
        return None
    alive = snakemake_alive(root)
    if alive:
        return ("Snakemake's lock is held by a Snakemake process running in this repository: "
                "left alone (wait for it, or stop it first)")
    if alive is None:
        return ("Snakemake's lock is present and this system cannot tell whether another "
                "Snakemake runs here: when none does, run `snakemake --unlock`")
    cmd = [*(snakemake or [sys.executable, "-m", "snakemake"]), "--unlock"]
    out = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
    if out.returncode:
        return f"a stale lock was found, but `snakemake --unlock` failed:\n{out.stderr[-2000:]}"
    return (f"removed a stale Snakemake lock ({len(locks)} lock files, no Snakemake process "
            "alive here): an earlier run was interrupted; its cut jobs are made again")


#: Snakemake's rule for a ``--config`` key (``snakemake.cli.parse_config``)
CONFIG_KEY = re.compile(r"[a-zA-Z_][\w-]*\w$")


def update_config(config: dict, overwrite: dict) -> dict:
    """``overwrite`` merged into ``config`` in place, as Snakemake merges configuration layers
    (``snakemake.utils.update_config``): a mapping value merges key by key into the mapping it
    meets (into an empty one where it meets anything else), any other value replaces what it
    meets, lists included; returns ``config``."""

    def update(into, values):
        for key, value in values.items():
            if not isinstance(into, Mapping):
                into = {}
            if isinstance(value, Mapping):
                into[key] = update(into.get(key, {}), value)
            else:
                into[key] = value
        return into

    update(config, overwrite)
    return config


def config_value(text: str):
    """One ``--config KEY=VALUE`` value as Snakemake reads it (an int, a float, ``True`` /
    ``False``, else YAML, else the text; empty: None), except that YAML keeps its types:
    Snakemake's own loader makes every scalar inside a mapping or list a string (``{alphas:
    [0.0]}`` would give ``'0.0'``, which the strict configuration refuses)."""
    if text == "":
        return None
    for parse in (int, float, {"True": True, "False": False}.__getitem__, yaml.safe_load):
        try:
            value = parse(text)
        except (ValueError, KeyError, yaml.YAMLError):
            continue
        if not callable(value):
            return value
    return text


def config_values(entries: list[str] | None) -> dict:
    """``--config KEY=VALUE ...`` as one mapping, each entry merged in order
    (``update_config``: a later nested value extends an earlier one); a ``ConfigError`` on an
    entry without ``=`` or with a key Snakemake refuses."""
    from lsa.config import ConfigError

    out: dict = {}
    for entry in entries or []:
        key, sep, text = entry.partition("=")
        if not sep or not CONFIG_KEY.match(key):
            raise ConfigError(f"--config {entry!r}: each value is KEY=VALUE, KEY a name "
                              "(letters, digits, _ or -), e.g. seed=1 or "
                              "'profiles={smoke: {finetune: {alphas: [0.0, 0.3]}}}'")
        update_config(out, {key: config_value(text)})
    return out


def merged_config(configfiles=(), config: list[str] | None = None, replace: bool = False,
                  base: Path = paths.CONFIG_FILE) -> dict:
    """The configuration Snakemake plans with, merged as Snakemake merges it
    (``snakemake.workflow.Workflow.configfile``): the command line's layers, each
    ``--configfile`` then the ``--config`` values (``config_values``), form one override; the
    Snakefile's ``configfile:`` (``config/config.yaml``, ``base``) is merged into a copy of it
    and the override merged again on top (``replace``: ``--replace-workflow-config``, the
    override alone). The one merge of the pre-flight, the broken-run check
    (``pipeline_configs``) and the Snakefile (``workflow/rules/common.smk``)."""
    from lsa.config import read_yaml

    override: dict = {}
    for name in configfiles:
        update_config(override, read_yaml(Path(name)))
    update_config(override, config_values(config))
    merged = copy.deepcopy(override)
    if not replace:
        update_config(merged, read_yaml(base))
        update_config(merged, override)
    return merged


def snakemake_options(extra: list[str] | None, root: Path = paths.ROOT) -> tuple[list[Path], bool]:
    """The ``--configfile`` files among Snakemake's options (each resolved as Snakemake, started
    in ``root``, resolves it) and whether ``--replace-workflow-config`` is among them."""
    extra, files = list(extra or []), []
    for i, word in enumerate(extra):
        name, eq, value = word.partition("=")
        if name in ("--configfile", "--configfiles"):
            values = [value] if eq else []
            if not eq:
                for later in extra[i + 1:]:
                    if later.startswith("-"):
                        break
                    values.append(later)
            files += [root / Path(v).expanduser() for v in values]
    return files, "--replace-workflow-config" in extra


def pipeline_configs(profile: str, config: list[str] | None = None,
                     extra: list[str] | None = None) -> list:
    """The configurations a Snakemake invocation will plan with (``merged_config`` of the
    ``--configfile`` files among ``extra``, ``profile`` and the ``KEY=VALUE`` values of
    ``config``, as ``run_pipeline`` passes them); and, for a profile whose runs lie in
    another's folder (``lsa.runs.SHARED_RUNS``), that profile's too."""
    from lsa.config import from_mapping
    from lsa.runs import SHARED_RUNS

    files, replace = snakemake_options(extra)
    raw = merged_config(files, [f"profile={profile}", *(config or [])], replace)
    pipes = [from_mapping(raw)]
    if pipes[0].profile in SHARED_RUNS:
        pipes.append(from_mapping(raw, profile=SHARED_RUNS[pipes[0].profile]))
    return pipes


def unmark_broken(profile: str, config: list[str] | None = None,
                  extra: list[str] | None = None) -> list[str]:
    """Before Snakemake plans: take the finished marker away from every run of the invocation
    whose files no longer verify (``lsa.pipeline.unmark_broken_runs``), so that it is made
    again; returns what was done, one line a run."""
    from lsa.pipeline import unmark_broken_runs
    from lsa.runs import runs_of

    notes = []
    for pipe in pipeline_configs(profile, config, extra):
        for run, problems in unmark_broken_runs(runs_of(pipe)):
            notes.append(f"{run.describe()} ({run.id}) will be made again, its files do not "
                         "verify: " + "; ".join(problems))
    return notes


def cache_problems(root: Path | None = None) -> list[tuple[Path, str]]:
    """Damaged files among the caches the jobs read and make again when absent
    (``data/tokens/*.npy``, the books' token ids; ``data/tokenizers/*/tokenizer.json``): each
    with what is wrong (a cut array, JSON that does not parse)."""
    import json

    import numpy as np

    root = root or paths.CACHE
    found = []
    for path in sorted((root / "tokens").glob("*.npy")):
        try:
            np.load(path, mmap_mode="r")
        except (OSError, ValueError, EOFError) as exc:
            found.append((path, f"unreadable ({exc})"))
    for path in sorted((root / "tokenizers").glob("*/tokenizer.json")):
        try:
            json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            found.append((path, f"unreadable ({exc})"))
    return found


def verify_job(run, profile: str) -> list[str]:
    """What ``python -m lsa pipeline`` checks before Snakemake plans, for one job run by hand
    (``python -m lsa <kind> --run NAME``): ``run`` marked finished whose files no longer verify
    loses its marker, so that the job makes it again (returns that note); a run it reads that is
    marked finished but does not verify (a file of it deleted, cut or changed since its marker
    recorded its checksum: ``lsa.markers.output_problems``) or a damaged cache stops it before
    any compute: ``DamagedFile`` naming each file and the command that remakes it."""
    from lsa.files import DamagedFile, shell_path
    from lsa.pipeline import unmark_broken_runs

    def needed(r):
        for need in r.needs:
            yield from needed(need)
            yield need

    for need in dict.fromkeys(needed(run)):
        problems = need.problems() if need.finished else []
        if problems:
            command = shlex.join(["python", "-m", "lsa", *need.command, "--profile", profile])
            raise DamagedFile(f"{need.describe()} {shell_path(need.folder)} does not verify: "
                              f"{'; '.join(problems)}; remake it: {command}")
    for path, problem in cache_problems():
        command = shlex.join(["python", "-m", "lsa", *run.command, "--profile", profile])
        raise DamagedFile(f"{shell_path(path)}: {problem}; a cache the job makes again when "
                          f"absent: rm -- {shell_path(path)} && {command}")
    return [f"{r.describe()} ({r.id}) is made again, its files do not verify: "
            + "; ".join(problems) for r, problems in unmark_broken_runs([run])]


def run_pipeline(profile: str, cores: str = "all", config: list[str] | None = None,
                 extra: list[str] | None = None, root: Path = paths.ROOT) -> int:
    """``snakemake --cores CORES --rerun-incomplete [EXTRA] --config profile=PROFILE
    [CONFIG]`` after removing a stale lock and unmarking the finished runs whose files no
    longer verify (``unmark_broken``: parsing the workflow changes no file, so this is done
    here); returns Snakemake's exit status."""
    note = unlock_if_stale(root)
    if note:
        print(f"lsa pipeline: {note}", flush=True)
    if "-n" not in (extra or []) and "--dry-run" not in (extra or []):
        for line in unmark_broken(profile, config, extra):
            print(f"lsa pipeline: {line}", flush=True)
    cmd = [sys.executable, "-m", "snakemake", "--cores", str(cores), "--rerun-incomplete",
           *(extra or []), "--config", f"profile={profile}", *(config or [])]
    print("lsa pipeline:", shlex.join(cmd[1:]), flush=True)
    return subprocess.run(cmd, cwd=root).returncode
