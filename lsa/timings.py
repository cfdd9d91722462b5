"""Where a profile's time went: the pipeline's own measurements, summarised.

Every Snakemake rule writes a benchmark file (``logs/<profile>/benchmarks/<job>.tsv``: wall
seconds ``s``, ``cpu_time``, ``max_rss`` in MB, ...); every run folder (``lsa.runs``) records
its training wall time (``train_summary.json``) and its whole job's (``run_info.json``), so a
run's evaluation time is the difference. ``make reproduce`` records the end-to-end wall time in
``logs/<profile>/reproduce.json``. Nothing here is estimated: a job that did not run in the last
pipeline invocation keeps the benchmark file of the run that made it.

    python -m lsa timings --profile mini
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from lsa import paths
from lsa.runs import FINISHED, runs_root

#: kind -> the prefix of its Snakemake job names and of its run folders' names (first match
#: wins; a run folder matching none is a fine-tuning run, a job matching none is "other")
KINDS = (("base model", "base_model", ("base-", "base_s")),  # base_sN: further base models
         ("fine-tuning run", "finetune_", None),
         ("BABILong evaluation", "babilong-eval_", "babilong-eval_"),
         ("reference model (decomposition)", "probe_ref_", "probe_ref_"),
         ("probe (Table 1 population)", "probe_", "probe_"),
         ("BABILong run", "babilong_", "babilong_"), ("notebook", "section_", None))


def logs_dir(profile: str) -> Path:
    return paths.output_root() / "logs" / profile


def reproduce_file(profile: str) -> Path:
    return logs_dir(profile) / "reproduce.json"


def kind_of(name: str, folder: bool = False) -> str:
    """The kind of a Snakemake job name, or of a run folder's name (``folder=True``)."""
    for kind, job_prefix, folder_prefix in KINDS:
        prefix = folder_prefix if folder else job_prefix
        if prefix and name.startswith(prefix):
            return kind
    return "fine-tuning run" if folder else "other"


def job_times(profile: str) -> list[dict[str, Any]]:
    """One row per benchmarked job: name, kind, wall and CPU seconds, peak resident MB."""
    rows = []
    for tsv in sorted((logs_dir(profile) / "benchmarks").glob("*.tsv")):
        with open(tsv, newline="") as fh:
            records = list(csv.DictReader(fh, delimiter="\t"))
        if not records:
            continue
        last = records[-1]
        rows.append({"job": tsv.stem, "kind": kind_of(tsv.stem), "wall_s": float(last["s"]),
                     "cpu_s": _number(last.get("cpu_time")),
                     "max_rss_mb": _number(last.get("max_rss"))})
    return rows


def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def run_split(folder: Path) -> dict[str, float] | None:
    """Training and evaluation seconds of one finished run folder (None if not finished)."""
    try:
        train = json.loads((folder / FINISHED).read_text())
        info = json.loads((folder / "run_info.json").read_text())
    except (OSError, ValueError):
        return None
    total = info.get("wall_time_s")
    trained = train.get("wall_time_s", 0.0)
    if total is None:
        return None
    return {"train_s": float(trained), "evaluation_s": max(0.0, float(total) - float(trained))}


def breakdown(profile: str, run_ids: set[str] | None = None) -> list[dict[str, Any]]:
    """Per kind of job: count, summed and mean wall seconds, and for training runs the part
    spent training vs evaluating (from the run folders: those of ``run_ids`` where given, the
    profile's own runs; profiles that share a runs folder, ``mini`` and ``mini-full``, would
    otherwise count each other's)."""
    root = runs_root(profile)
    splits = {}
    if root.exists():
        for folder in root.iterdir():
            if run_ids is not None and folder.name not in run_ids:
                continue
            split = run_split(folder)
            if split:
                splits[folder.name] = split
    by_kind: dict[str, dict[str, Any]] = {}
    for row in job_times(profile):
        agg = by_kind.setdefault(row["kind"], {"kind": row["kind"], "jobs": 0, "wall_s": 0.0,
                                               "train_s": 0.0, "evaluation_s": 0.0})
        agg["jobs"] += 1
        agg["wall_s"] += row["wall_s"]
    for name, split in splits.items():
        kind = kind_of(name, folder=True)
        if kind in by_kind:
            by_kind[kind]["train_s"] += split["train_s"]
            by_kind[kind]["evaluation_s"] += split["evaluation_s"]
    out = []
    for kind in [k for k, _, _ in KINDS] + ["other"]:
        if kind in by_kind:
            agg = by_kind[kind]
            agg["mean_wall_s"] = agg["wall_s"] / agg["jobs"]
            out.append(agg)
    return out


def markdown(profile: str, run_ids: set[str] | None = None) -> str:
    """The breakdown as a Markdown table, with the end-to-end time when it was recorded."""
    rows = breakdown(profile, run_ids)
    lines = ["| kind | jobs | wall (min, summed) | mean per job (min) | training (min) | "
             "evaluation (min) |", "|---|---|---|---|---|---|"]
    for r in rows:
        train = f"{r['train_s'] / 60:.1f}" if r["train_s"] else "-"
        evaluation = f"{r['evaluation_s'] / 60:.1f}" if r["evaluation_s"] else "-"
        lines.append(f"| {r['kind']} | {r['jobs']} | {r['wall_s'] / 60:.1f} | "
                     f"{r['mean_wall_s'] / 60:.2f} | {train} | {evaluation} |")
    total = sum(r["wall_s"] for r in rows)
    lines.append(f"| all jobs | {sum(r['jobs'] for r in rows)} | {total / 60:.1f} | | | |")
    end_to_end = reproduce_file(profile)
    rec = json.loads(end_to_end.read_text()) if end_to_end.exists() else None
    if rec:
        lines.append("")
        lines.append(f"End to end (`make reproduce`, {rec.get('cores', '?')} cores, jobs in "
                     f"parallel where the cores allow): {rec['wall_s'] / 60:.1f} min, finished "
                     f"{rec.get('finished_utc', '?')}.")
    bound = floor(profile, rec.get("cores") if rec else None)
    if bound:
        lines.append("")
        lines.append(f"Floor of the makespan (the core time the jobs held, wall x threads, "
                     f"{bound['core_s'] / 60:.1f} min, over {bound['cores']} cores): "
                     f"{bound['floor_s'] / 60:.1f} min"
                     + (f"; makespan / floor: {rec['wall_s'] / bound['floor_s']:.2f}"
                        if rec else "") + ".")
    return "\n".join(lines) + "\n"


def cores_of(cores: str | int | None) -> int:
    """A core count as ``make reproduce`` records it (``all`` or a number)."""
    import os

    try:
        return max(1, int(cores))
    except (TypeError, ValueError):
        return os.cpu_count() or 1


#: (job-name prefix, run kind) of the run jobs (workflow/rules/common.smk's rule names)
RUN_JOBS = (("base_model", "base"), ("finetune_", "finetune"),
            ("babilong_eval_", "babilong-eval"), ("babilong_", "babilong"),
            ("probe_", "probe"), ("longbench_", "longbench"), ("synthetic_", "synthetic"))


def job_threads(profile: str, job: str, settings=None) -> int:
    """The threads a job asked for (``settings``: workflow/settings.yaml, read when not given);
    1 for the light jobs."""
    if settings is None:
        from lsa.pipeline import workflow_settings

        settings = workflow_settings()
    if job.startswith("section_"):
        return settings.section(job.removeprefix("section_")).threads
    for prefix, kind in RUN_JOBS:
        if job.startswith(prefix):
            return settings.resources(profile, kind).threads
    return 1


def floor(profile: str, cores: str | int | None = None) -> dict[str, float] | None:
    """The lower bound of the pipeline's makespan: the core time its jobs held (each job's wall
    seconds times its threads, from Snakemake's benchmark files) over the cores; no schedule
    of these jobs on these cores ends sooner. Snakemake's own ``cpu_time`` does not serve: it
    samples a job every 0.5 s for its first 15 s, then every 30 s, so a job of under a minute
    loses up to 30 s of it (it is kept beside, as ``cpu_s``). None when nothing was measured."""
    rows = job_times(profile)
    if not rows:
        return None
    from lsa.pipeline import workflow_settings

    n, settings = cores_of(cores), workflow_settings()  # read once for every job
    core_s = sum(r["wall_s"] * min(job_threads(profile, r["job"], settings), n) for r in rows)
    return {"core_s": core_s, "cpu_s": sum(r["cpu_s"] or 0.0 for r in rows), "cores": n,
            "floor_s": core_s / n}


def record_reproduce(profile: str, started: float, cores: str) -> Path | None:
    """Write ``reproduce.json`` (end-to-end wall time since ``started``, an epoch time) when the
    invocation ran at least one job; a rerun that ran nothing keeps the earlier record."""
    import datetime as _dt
    import time

    from lsa import files

    bench = logs_dir(profile) / "benchmarks"
    ran = [p for p in bench.glob("*.tsv") if p.stat().st_mtime >= started] if bench.exists() \
        else []
    if not ran:
        return None
    now = time.time()
    bound = floor(profile, cores)
    return files.write_json(reproduce_file(profile), {
        "profile": profile, "wall_s": round(now - started, 1), "cores": cores,
        "jobs_run": len(ran), "git_commit": files.git_commit(),
        "finished_utc": _dt.datetime.fromtimestamp(now, _dt.UTC).isoformat(
            timespec="seconds"),
        **({"jobs_core_s": round(bound["core_s"], 1), "floor_s": round(bound["floor_s"], 1)}
           if bound else {}),
        "packages": files.installed_versions()})
