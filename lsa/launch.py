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
  Snakefile itself writes nothing while it is parsed).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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


def pipeline_configs(profile: str, config: list[str] | None = None,
                     extra: list[str] | None = None) -> list:
    """The configurations a Snakemake invocation will plan with: ``config/config.yaml``, the
    ``--configfile`` files among ``extra``, the ``KEY=VALUE`` values of ``config`` (YAML, as
    Snakemake reads them) and ``profile``; and, for a profile whose runs lie in another's
    folder (``lsa.runs.SHARED_RUNS``), that profile's too."""
    import yaml

    from lsa.config import from_mapping, read_yaml
    from lsa.runs import SHARED_RUNS
    from lsa.strict import merge

    raw = read_yaml(paths.CONFIG_FILE)
    extra = list(extra or [])
    for i, word in enumerate(extra):
        if word in ("--configfile", "--configfiles"):
            for name in extra[i + 1:]:
                if name.startswith("-"):
                    break
                raw = merge(raw, read_yaml(Path(name)))
    for item in config or []:
        key, _, value = item.partition("=")
        raw[key] = yaml.safe_load(value)
    pipes = [from_mapping(raw, profile=profile)]
    if profile in SHARED_RUNS:
        pipes.append(from_mapping(raw, profile=SHARED_RUNS[profile]))
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
    print("lsa pipeline:", " ".join(cmd[1:]), flush=True)
    return subprocess.run(cmd, cwd=root).returncode
