"""Command line: ``python -m lsa <command>`` (also installed as ``lsa``).

    python -m lsa config   [--profile P] [--section S]  the notebooks' validated parameters
    python -m lsa config   --resolved | --fields | --runs   the resolved configuration, every
                                                        setting documented, every run's folder
    python -m lsa pipeline [--profile P] [--cores N]    Snakemake for a profile, resuming an
                                                        interrupted run (stale lock, cut jobs);
                                                        a finished one is recorded in
                                                        results/LAST_PROFILE (notebooks run
                                                        alone read that profile)
    python -m lsa check    [--profile P]                check the outputs of a pipeline run
    python -m lsa plan     [--profile P]                per job: memory, FLOPs, GPU-hours beside
                                                        its claim; the pre-flight check
    python -m lsa fetch    books | longbench babilong [--from DIR]
                                                        fetch inputs into data/ (pinned, checked)
    python -m lsa pretrain [--profile P] [--run base_sN] the profile's base model (a run folder)
    python -m lsa finetune --run NAME [--profile P]     one context-extension run
    python -m lsa babilong --run NAME [--profile P]     one BABILong fine-tuning run (train design)
    python -m lsa babilong-eval --run NAME [--profile P]
    python -m lsa longbench --run NAME [--profile P]
                                                        a finetune run on BABILong (evaluate design)
    python -m lsa probe    --run NAME [--profile P]     a model of the Table 1 population that
                                                        is not a fine-tuning run (base, RoPE, ...)
    python -m lsa synthetic [--profile P]               Section 3's grid of small models (a run)
    python -m lsa bench    misalign [--quick | --shape S] cost of CE + SCE vs CE only
    python -m lsa bench    jobs [--profile P]           job throughput at 1 and 2 threads
    python -m lsa bench    notebooks [--only 01,03]     each notebook run alone, timed
    python -m lsa bench    pins [--profile P]           pinned CPU kernels: cost and drift
    python -m lsa bench    real-lm [--windows 512,1024]  SmolLM2-135M's fine-tuning cost here
    python -m lsa timings  [--profile P]                where a profile's time went
    python -m lsa article                               the replication article from the
                                                        published snapshots (docs/article/)
    python -m lsa compare  [--profile P]                a reproduce's claims beside the
                                                        published snapshot's, claim by claim
    python -m lsa publish  [--profile P] [--results-only|--rerender] snapshot into docs/results/
    python -m lsa study    keep | design | run --bases N [--profile study]
                                                        the confirmatory study (issue 62): keep
                                                        its complete bases, its design's numbers,
                                                        or make its next N bases, base by base

Every command but check reads config/config.yaml for the profile (default: its `profile`);
`--config-file results/<profile>/config.yaml` reads the configuration a pipeline run resolved
instead (the Snakefile passes it to every job, with `--expect-id`: a job whose own run id
differs fails with a message that says why). check reads that file when it exists.

Errors follow one rule (CONTRIBUTING.md, "One rule for errors"): each problem is one line on
stderr with the command that fixes it, paths quoted for the shell; no traceback for anything
a user can cause; the exit status says the kind (``EXIT``): 1 a check failed (``check``, the
pre-flight), 2 usage (an argument, a run name), 3 configuration, 4 a missing input, 5 a
damaged file; a closed pipe (``lsa config | head -1``) ends quietly.
"""

from __future__ import annotations

import argparse
import os
import sys

import yaml

from lsa.config import PROFILES, ConfigError, load_config
from lsa.files import DamagedFile, InputFormatError
from lsa.markers import IncompleteOutputs
from lsa.runs import runs_of

#: the exit status of each kind of problem (the module docstring)
EXIT = {"check": 1, "usage": 2, "configuration": 3, "missing": 4, "damaged": 5}
DESCRIPTION = ("The replication's command line: the pipeline, its checks and plan, one job of "
               "a run by hand, the fetch of inputs, measurements and publishing.\n\n"
               + __doc__.split("\n\n", 2)[2])


class UsageError(ValueError):
    """An argument the command cannot take (an unknown run name, a run of another design)."""


def problem(args, text: str) -> None:
    """One problem, one line on stderr, named by the command that met it."""
    print(f"lsa {getattr(args, 'command', '')}: {text}".replace(" : ", ": ", 1),
          file=sys.stderr)


def _load(args):
    """The configuration a command reads: ``--config-file``, else config/config.yaml."""
    return load_config(getattr(args, "config_file", None), profile=args.profile)


def _config(args) -> int:
    from lsa import pipeline

    pipe = _load(args)
    if args.resolved:
        print(pipeline.resolved_text(pipe), end="")
        return 0
    if args.fields:
        _print_fields()
        return 0
    if args.runs:
        for run in runs_of(pipe):
            state = "finished" if run.finished else "not made"
            print(f"{run.kind:14} {run.name:24} {run.id}  ({state})")
        return 0
    sections = [args.section] if args.section else list(pipe.sections)
    for key in sections:
        if key not in pipe.sections:
            raise ConfigError(f"--section {key!r}: unknown; allowed: {', '.join(pipe.sections)}")
        print(f"# {key} ({pipe.profile})")
        print(yaml.safe_dump(pipeline.notebook_parameters(pipe, key), sort_keys=False))
    return 0


def _print_fields() -> None:
    """Every setting of config/config.yaml: type, default, bounds and meaning."""
    import dataclasses
    import typing

    from lsa.config import PipelineConfig

    def walk(cls, prefix):
        hints = typing.get_type_hints(cls)
        doc = " ".join((cls.__doc__ or "").split("\n\n")[0].split())
        print(f"\n## {prefix or 'top level'}: {doc}")
        nested = []
        for row in cls.describe():
            tp = hints[row["name"]]
            name = f"{prefix}.{row['name']}" if prefix else row["name"]
            if dataclasses.is_dataclass(tp):
                nested.append((tp, name))
                continue
            item = (typing.get_args(tp) or [None])[0]
            if dataclasses.is_dataclass(item):  # a list of settings (finetune.runs)
                nested.append((item, f"{name}[]"))
            bounds = f" [{row['bounds']}]" if row["bounds"] else ""
            default = "required" if row["required"] else f"default {row['default']!r}"
            print(f"- {row['name']} ({row['type']}; {default}){bounds}: {row['help']}")
        for tp, name in nested:
            walk(tp, name)

    walk(PipelineConfig, "")


def _check(args) -> int:
    import shlex

    from lsa.pipeline import output_states, pipeline_config

    pipe = pipeline_config(args.profile, args.config_file)
    states = output_states(pipe)
    counts = {state: sum(s == state for s, _ in states.values())
              for state in ("made", "not made", "damaged")}
    make = shlex.join(["python", "-m", "lsa", "pipeline", "--profile", pipe.profile])
    if counts["made"] == counts["damaged"] == 0:
        print(f"profile {pipe.profile}: nothing made yet ({len(states)} runs and sections); "
              f"make them: {make}")
        return EXIT["check"]
    for key, (state, problems) in states.items():
        # the pipeline remakes a damaged run (lsa.launch.unmark_broken); a section, forced
        fix = make if key not in pipe.sections else shlex.join(
            ["python", "-m", "lsa", "pipeline", "--profile", pipe.profile, "--",
             "--forcerun", f"section_{key}"])
        for line in problems if state == "damaged" else []:
            problem(args, f"{line}; make it again: {fix}")
    print(f"profile {pipe.profile}: {counts['made']} made, {counts['not made']} not made, "
          f"{counts['damaged']} damaged, of {len(states)} runs and sections"
          + ("" if counts["made"] == len(states) else f"; make the rest: {make}"))
    return 0 if counts["made"] == len(states) else EXIT["check"]


#: Snakemake options after which a successful exit does not mean the pipeline finished
_NOT_A_RUN = {"-n", "--dry-run", "--dryrun", "--touch", "-t", "--list", "-l", "--summary",
              "-S", "--detailed-summary", "-D", "--dag", "--rulegraph", "--unlock"}


def _is_cluster(snakemake_args: list[str]) -> bool:
    """Whether Snakemake sends the jobs elsewhere (an executor or a profile named slurm): the
    submitting host then needs no GPU of its own."""
    return any("slurm" in a for a in snakemake_args) or "--executor" in snakemake_args


def _pipeline(args) -> int:
    from lsa import paths
    from lsa.launch import pipeline_configs, run_pipeline

    pipe = _load(args)
    profile = args.profile or pipe.profile
    is_run = not _NOT_A_RUN & set(args.snakemake_args)
    if is_run:  # before any job: a missing file, wheel or GPU would fail hours in
        from lsa.preflight import preflight

        pipe = pipeline_configs(profile, args.config, args.snakemake_args)[0]
        report = preflight(pipe, cluster=_is_cluster(args.snakemake_args))
        for line in report.notes:
            print(f"lsa pipeline: note: {line}", file=sys.stderr)
        if report.problems:
            print(f"lsa pipeline: {report.text(profile)}", file=sys.stderr)
            return EXIT["check"]
    status = run_pipeline(profile, args.cores, args.config, args.snakemake_args)
    if status == 0 and is_run:
        # what a notebook run alone reads by default (lsa.notebook: profile = None)
        print(f"lsa pipeline: profile {profile} finished "
              f"({paths.write_last_profile(profile)})", flush=True)
    return status


def _fetch(args) -> int:
    from pathlib import Path

    if "books" in args.what:
        from lsa.data.books import locate_books

        folder, source = locate_books()
        print(f"books: {folder} (source: {source})")
    others = [w for w in args.what if w != "books"]
    if others:
        from lsa.fetch import FetchError, fetch

        pipe = _load(args)
        datasets = list(dict.fromkeys([*pipe.longbench.datasets,
                                       *_load_all_longbench_datasets()]))
        try:
            for line in fetch(others, datasets, Path(args.source) if args.source else None):
                print(line)
        except FetchError as err:
            print(f"lsa fetch: {err}", file=sys.stderr)
            return EXIT["check"]
    return 0


def _load_all_longbench_datasets() -> list[str]:
    """Every profile's LongBench-E datasets (one fetch serves them all)."""
    out = []
    for profile in PROFILES:
        lb = load_config(profile=profile).longbench
        if lb.enabled and lb.data_dir != "fixture":
            out += lb.datasets
    return out


def _plan(args) -> int:
    from lsa import plan
    from lsa.preflight import preflight

    pipe = _load(args)
    print(plan.markdown(pipe, plan.plan_profile(pipe)), end="")
    report = preflight(pipe, hub=not args.no_hub)
    for line in report.notes:
        print(f"lsa plan: note: {line}", file=sys.stderr)
    if report.problems:
        print(f"lsa plan: {report.text(pipe.profile)}", file=sys.stderr)
        return EXIT["check"]
    print(f"\npre-flight: profile {pipe.profile} has everything it needs here")
    return 0


def _set_threads(args) -> None:
    if getattr(args, "threads", None):
        import torch

        torch.set_num_threads(args.threads)


def job_run(args):
    """The configuration and the run a job command names; fails, before any compute, on an
    unknown run and on a run id other than ``--expect-id`` (what the pipeline expects)."""
    pipe = _load(args)
    kind = "base" if args.command == "pretrain" else args.command
    try:
        run = runs_of(pipe).get(kind, getattr(args, "run", None) or "base")
    except ConfigError as err:  # a run the configuration does not have: the argument's fault
        raise UsageError(f"--run {getattr(args, 'run', None) or 'base'}: {err} (python -m lsa "
                         "config --runs lists them)") from None
    source = args.config_file or "config/config.yaml"
    run.expect(args.expect_id, f"{source} (profile {pipe.profile}, seed {pipe.seed})")
    return pipe, run


def _job_argv(args) -> list[str]:
    """The job's own arguments, for the processes ``accelerate launch`` starts."""
    argv = [args.command]
    for flag, value in (("--profile", args.profile), ("--config-file", args.config_file),
                        ("--run", getattr(args, "run", None)), ("--expect-id", args.expect_id),
                        ("--threads", args.threads)):
        if value is not None:
            argv += [flag, str(value)]
    return argv + (["--no-progress"] if args.no_progress else [])


def _place(args, run) -> int | None:
    """Pin the job to GPUs of its own (``--gpus N``: ``lsa.devices``) and start a run of
    several processes through ``accelerate launch``; returns that launch's exit status, or
    None when this process runs the job itself."""
    import os
    import subprocess

    from lsa import devices

    if args.gpus is None:  # what the pipeline gives the job (workflow/settings.yaml)
        from lsa.pipeline import workflow_settings

        args.gpus = workflow_settings().run_job(run.profile, run).gpu
    worker = devices.is_launched_worker()
    if worker and int(os.environ[devices.LAUNCHED_ENV]) != run.processes:
        raise ConfigError(f"{run.describe()}: started with {os.environ[devices.LAUNCHED_ENV]} "
                          f"processes, its configuration says processes = {run.processes} (part "
                          "of its identity): set the run's `processes`, and let the job start "
                          "them (python -m lsa finetune --run NAME --gpus N)")
    if args.gpus and run.processes > args.gpus and devices.visible_gpus():
        raise ConfigError(f"{run.describe()}: {run.processes} processes need as many GPUs, "
                          f"the job has --gpus {args.gpus}")
    if args.gpus and not worker and not devices.scheduler_pins_gpus() and \
            devices.visible_gpus():  # none: a CPU machine, the job runs on the CPU
        args.gpu_claim = devices.claim_gpus(args.gpus, wait_s=None)  # held until it ends
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(args.gpu_claim.devices)
        print(f"lsa: {run.describe()} on GPU {os.environ['CUDA_VISIBLE_DEVICES']}", flush=True)
    if run.processes > 1 and not worker:
        cmd = devices.accelerate_command(run.processes, _job_argv(args))
        print("lsa:", " ".join(cmd), flush=True)
        return subprocess.run(cmd).returncode
    return None


def _job(args) -> int:
    """One run of the kind named by the subcommand (pretrain, finetune, babilong,
    babilong-eval, probe, longbench or synthetic)."""
    pipe, run = job_run(args)
    from lsa.devices import is_launched_worker
    from lsa.launch import verify_job
    from lsa.pipeline import workflow_settings
    from lsa.preflight import job_notes

    if not is_launched_worker():  # as the pipeline does: a damaged run is made again
        for line in verify_job(run, pipe.profile):
            print(f"lsa: {line}", flush=True)

    # what the job claims: --gpus, else its kind's GPUs in workflow/settings.yaml (a CPU
    # profile's multi-process run uses gloo on the CPU); its launched processes were checked
    settings = workflow_settings()
    claimed = args.gpus if args.gpus is not None else (
        settings.run_job(run.profile, run).gpu
        if settings.resources(run.profile, run.kind).gpu else 0)
    try:  # no silent CPU run of a GPU job, no silent drop of NF4 (lsa.preflight)
        for line in ([] if is_launched_worker() else job_notes(pipe, run, claimed)):
            print(f"lsa: {line}", flush=True)
    except RuntimeError as err:
        problem(args, str(err))
        return EXIT["check"]
    launched = _place(args, run)
    if launched is not None:
        return launched
    from lsa.devices import main_process_writes, per_process_pipe
    from lsa.jobs import run_job

    _set_threads(args)
    with main_process_writes(run):  # one process of several: lsa.devices
        folder = run_job(per_process_pipe(pipe, run), run, progress=not args.no_progress)
    print(folder)
    return 0


def _bench(args) -> int:
    if args.what == "jobs":
        from lsa.throughput import main as jobs_main

        return jobs_main(args)
    if args.what == "real-lm":
        from lsa.reallm import main as reallm_main

        return reallm_main(args)
    if args.what == "pins":
        from lsa.pins import main as pins_main

        return pins_main(args)
    if args.what == "notebooks":
        from lsa.readers import main as readers_main

        return readers_main(args)
    from lsa.bench import main as bench_main

    return bench_main(args)


def _timings(args) -> int:
    from lsa import timings
    from lsa.runs import runs_of

    pipe = _load(args)
    if args.record_since is not None:
        timings.record_reproduce(pipe.profile, args.record_since, args.cores)
    if not timings.job_times(pipe.profile):
        print(f"profile {pipe.profile}: nothing to time yet (no job of its pipeline has run: "
              f"no {timings.logs_dir(pipe.profile) / 'benchmarks'}/*.tsv); run "
              f"python -m lsa pipeline --profile {pipe.profile}")
        return 0
    print(timings.markdown(pipe.profile, {r.id for r in runs_of(pipe)}), end="")
    return 0


def _article(args) -> int:
    from lsa import article

    print(article.write())
    if args.site:
        page, pdf = article.build()
        print(f"site: {page} (serve {page.parent.parent} with any static host, e.g. python "
              f"-m http.server -d {page.parent.parent}); PDF: {pdf}")
    return 0


def _compare(args) -> int:
    from lsa.compare import compare_profile

    pipe = _load(args)
    found = compare_profile(pipe.profile, list(pipe.sections))
    if found is None:
        print(f"compare {pipe.profile}: not published (no docs/results/{pipe.profile}/"
              "claims.csv): nothing to compare with")
        return 0
    table, line = found
    moved = table[table["status"] != "identical"]
    if len(moved) and not args.quiet:
        print(moved.to_markdown(index=False, floatfmt=".3g"), end="\n\n")
    print(line)
    if args.record:
        from lsa import published
        from lsa.compare import record
        from lsa.publish import run_kernels

        here = ", ".join(f"{r['kernels']}: {r['runs']} runs" for r in run_kernels(
            published.read_runs(pipe, runs_of(pipe))))
        print(f"recorded: {record(pipe.profile, table, here)} (make publish states it as the "
              "snapshot's tolerance)")
    return 0


def _power(args) -> int:
    from lsa import runtable
    from lsa.sections.finetuning import tables as ft_tables

    pipe = _load(args)
    plan = runs_of(pipe)
    if args.published:
        from lsa import published
        from lsa.runs import RunSet

        snapshot = published.load(pipe.profile)
        if snapshot is None:
            problem(args, f"{pipe.profile} is not published with its run files (no "
                          f"docs/results/{pipe.profile}/MANIFEST.json): read the profile's "
                          f"own runs: python -m lsa power --profile {pipe.profile}")
            return EXIT["missing"]
        print(f"from {snapshot.describe()}\n")
        plan = RunSet(pipe, root=snapshot.runs)
    runs = runtable.collect_runs(pipe, plan, plan.grid)
    if runs.empty:
        problem(args, f"no finished fine-tuning runs of profile {pipe.profile}: make them: "
                      f"python -m lsa pipeline --profile {pipe.profile}")
        return EXIT["missing"]
    print("Seeds (the pipeline's base model):\n")
    print(ft_tables.power_table(runs, args.alpha).to_markdown(index=False, floatfmt=".4g"))
    # the base factor: its runs, and the ablation's core comparisons on further bases
    names = list(dict.fromkeys([*plan.base_factor, *plan.ablation]))
    bases = ft_tables.base_power_table(runtable.collect_runs(pipe, plan, names), args.alpha)
    print("\nBase models (seeds nested in bases; runs on two or more base models):\n")
    print(bases.to_markdown(index=False, floatfmt=".4g") if len(bases) else
          "none: the profile has no runs on a second base model (finetune.bases, "
          "ablation.base_seeds)")
    return 0


def _publish(args) -> int:
    from lsa import generated
    from lsa.publish import NotPublishable, publish, render_again, rerender

    profile = _load(args).profile
    step, failed = ((rerender, "not rendered again") if args.rerender  # nothing trained
                    else (render_again, "not published") if args.results_only
                    else (publish, "not published"))
    try:
        print(step(profile))
    except NotPublishable as exc:
        problem(args, f"{failed}: {exc}")
        return EXIT["check"] if step is publish else EXIT["missing"]
    for path in generated.rewrite():  # the docs' numbers and the article this snapshot gives
        print(path)
    return 0


def _study(args) -> int:
    """``study keep``: keep the complete bases (gates and finiteness printed, no outcome);
    ``study design``: the design's boundaries and power; ``study run --bases N``: the pipeline
    on the next N bases not kept, one base after the other (its model, then its arms)."""
    from lsa import kept, study

    pipe = _load(args)
    if not pipe.study.enabled:
        raise ConfigError(f"profile {pipe.profile} is not a study profile (study.enabled); "
                          "use --profile study")
    if args.what == "design":
        d = study.design(pipe.study)
        for k, (z, p) in enumerate(zip(d.z, d.p), start=1):
            print(f"look {k} after {sum(d.stages[:k])} bases: z {z:.3f}, nominal p {p:.5f}, "
                  f"H1's interval at {1 - p:.2%}")
        return 0
    if args.what == "lock":
        return _study_lock(pipe)
    plan = runs_of(pipe)
    if args.what == "keep":
        for line in kept.keep(pipe, plan):
            print(line)
        return 0
    from lsa.markers import FINISHED
    from lsa.pipeline import relative

    todo = [runs for runs in kept.base_runs(plan).values()
            if not any(r.id in plan.kept for r in runs)][:args.bases]
    for runs in todo:  # base by base: each base's block before the next base's pretraining
        targets = [relative(r.folder / FINISHED) for r in runs]
        code = _pipeline_targets(args, pipe.profile, targets)
        if code:
            return code
    print(f"{len(todo)} bases made; keep them: python -m lsa study keep --profile "
          f"{pipe.profile}")
    return 0


def _study_lock(pipe) -> int:
    """``study lock``: the freeze's ``docs/study.lock`` (``lsa.freeze``), for the commit that
    last changed the committed pre-registration; a locked file with uncommitted changes stops
    it (the lock must describe a commit)."""
    import subprocess

    from lsa import freeze, paths

    def git(*cmd: str) -> str:
        return subprocess.run(["git", *cmd], cwd=paths.ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()

    commit = git("log", "-1", "--format=%H", "--", freeze.PREREGISTRATION)
    if not commit:
        raise FileNotFoundError(f"{freeze.PREREGISTRATION} is not committed: commit the "
                                "pre-registration first")
    dirty = git("status", "--porcelain", "--", *freeze.locked_files())
    if dirty:
        raise UsageError(f"locked files have uncommitted changes: {dirty.splitlines()[0]} ...; "
                         "commit them first")
    lock = freeze.write(pipe, commit)
    print(f"{freeze.LOCK.relative_to(paths.ROOT)}: the freeze at {commit[:12]}, "
          f"{len(lock['files'])} files and the study's settings; commit it")
    return 0


def _pipeline_targets(args, profile: str, targets: list[str]) -> int:
    """Snakemake on ``targets`` of ``profile`` (the study's bases, one at a time)."""
    import subprocess

    return subprocess.call(snakemake_targets(str(args.cores), profile, targets))


def snakemake_targets(cores: str, profile: str, targets: list[str]) -> list[str]:
    """Snakemake's command for ``targets`` of ``profile``: the targets before ``--config``,
    whose values run to the end of the line (a target after it is read as a config entry)."""
    return [sys.executable, "-m", "snakemake", "--cores", cores, *targets, "--config",
            f"profile={profile}"]


def _profile_options(p: argparse.ArgumentParser, file_default: str = "default: "
                     "config/config.yaml") -> None:
    p.add_argument("--profile", choices=PROFILES)
    p.add_argument("--config-file", help=f"a resolved configuration, results/<profile>/"
                                         f"config.yaml, as the pipeline passes it ({file_default})")


def main(argv: list[str] | None = None) -> int:
    from importlib.metadata import PackageNotFoundError, version

    try:
        release = version("lsa")
    except PackageNotFoundError:  # run from a clone that was not installed
        release = "unknown (not installed)"
    parser = argparse.ArgumentParser(prog="lsa", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"lsa {release}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                title="commands (python -m lsa COMMAND --help: its options)")
    p = command(sub, "config", help="print the validated notebook parameters")
    _profile_options(p)
    p.add_argument("--section")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--resolved", action="store_true",
                      help="the whole resolved configuration (what the Snakefile writes)")
    what.add_argument("--fields", action="store_true",
                      help="every setting: type, default, bounds, meaning")
    what.add_argument("--runs", action="store_true", help="every run: kind, name, folder")
    p.set_defaults(func=_config)
    p = command(sub, "check", help="check the files a pipeline run wrote")
    _profile_options(p, "default: results/<profile>/config.yaml when the pipeline wrote it")
    p.set_defaults(func=_check)
    p = command(sub, "pipeline", help="run Snakemake for a profile; an interrupted run "
                       "resumes (a stale lock is removed, cut jobs are made again)")
    p.add_argument("--profile", choices=PROFILES)
    p.add_argument("--cores", default="all")
    p.add_argument("--config", nargs="*", default=[], metavar="KEY=VALUE",
                   help="more Snakemake --config values (profile= is set by --profile)")
    p.add_argument("snakemake_args", nargs="*", metavar="-- SNAKEMAKE_ARGS",
                   help="anything else for Snakemake, after --")
    p.set_defaults(func=_pipeline)
    p = command(sub, "plan", help="per job: memory estimate, FLOPs and GPU-hours beside "
                       "its claim (workflow/settings.yaml), then the pre-flight check")
    _profile_options(p)
    p.add_argument("--no-hub", action="store_true", help="leave the hub check out (offline)")
    p.set_defaults(func=_plan)
    p = command(sub, "fetch", help="fetch input data into data/ (books: the npm corpus; "
                       "longbench, babilong: pinned, checksummed benchmark files)")
    p.add_argument("what", nargs="+", choices=["books", "longbench", "babilong"])
    p.add_argument("--from", dest="source", metavar="DIR",
                   help="read the benchmark files from DIR instead of the network")
    _profile_options(p)
    p.set_defaults(func=_fetch)
    for name, helptext in (("pretrain", "train or load the base model"),
                           ("finetune", "one context-extension run"),
                           ("babilong", "one BABILong fine-tuning run (train design)"),
                           ("babilong-eval", "evaluate a finetune run on BABILong"),
                           ("probe", "measure a model of the Table 1 population"),
                           ("longbench", "evaluate a finetune run on LongBench-E"),
                           ("synthetic", "train and test Section 3's grid of small models")):
        p = command(sub, name, help=helptext)
        _profile_options(p)
        p.add_argument("--no-progress", action="store_true")
        p.add_argument("--threads", type=int, help="torch CPU threads (default: torch's)")
        p.add_argument("--gpus", type=int, default=None,
                       help="GPUs the job claims for itself among CUDA_VISIBLE_DEVICES "
                            "(lsa.devices); default: its gpu resource in "
                            "workflow/settings.yaml; 0: CUDA_VISIBLE_DEVICES as it is")
        if name == "synthetic":
            p.add_argument("--run", default="synthetic", help="synthetic (its one run)")
        elif name != "pretrain":
            p.add_argument("--run", required=True,
                           help="a run name (python -m lsa config --runs shows them)")
        else:
            p.add_argument("--run", default="base",
                           help="base (default) or a further base model of "
                                "ablation.base_seeds (base_sN)")
        p.add_argument("--expect-id", help="the run folder the pipeline expects; the job fails "
                                           "before any compute when its own differs")
        p.set_defaults(func=_job)
    p = command(sub, "bench", help="measure the regularizer's cost (misalign), the jobs' "
                       "throughput by thread count (jobs) or how long each notebook run alone "
                       "takes (notebooks)")
    p.add_argument("what", choices=["misalign", "jobs", "notebooks", "pins", "real-lm"])
    p.add_argument("--only", help="notebooks: a comma-separated subset by number (01,03)")
    p.add_argument("--profile", choices=PROFILES, help="jobs: the shapes of this profile "
                   "(default mini)")
    p.add_argument("--kinds", help="jobs: a comma-separated subset of the kinds")
    p.add_argument("--seconds", type=float, default=10.0,
                   help="jobs: seconds of work per setting")
    p.add_argument("--steps", type=int, default=None,
                   help="pins: units per kind and kernel configuration (default 50); real-lm: "
                        "timed steps per cell (default 2)")
    p.add_argument("--model", choices=["smollm2", "scratch"],
                   help="real-lm: SmolLM2-135M from its wheel (default) or a scratch stand-in")
    p.add_argument("--windows", help="real-lm: fine-tuning windows (default 512,1024,2048)")
    p.add_argument("--length-profile", metavar="LENGTHS",
                   help="real-lm: instead, the model's NLL on the held-out books at these "
                        "lengths (each dividing the longest) and its copy probe at the "
                        "shortest")
    p.add_argument("--window", type=int, help=argparse.SUPPRESS)
    p.add_argument("--mode", choices=["full", "lora"], help=argparse.SUPPRESS)
    p.add_argument("--objective", help=argparse.SUPPRESS)
    p.add_argument("--lengths", help=argparse.SUPPRESS)
    p.add_argument("--threads", type=int, help=argparse.SUPPRESS)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--quick", action="store_true", help="tiny shapes (tests)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--shape", choices=["mini", "llama32k", "llama32k_h1024", "llama7b"],
                   help="misalign: one shape (llama7b: a Llama-2-7B-like loss, hidden 4096, "
                        "vocabulary 32000, 2 x 8192 positions; slow on a CPU)")
    p.add_argument("--out", help="JSON output (default results/bench/<what>[-<profile>].json)")
    p.add_argument("--memory-only", action="store_true", help=argparse.SUPPRESS)
    p.set_defaults(func=_bench)
    p = command(sub, "timings", help="where a profile's time went (from the pipeline's "
                       "benchmark files)")
    _profile_options(p)
    p.add_argument("--record-since", type=float, help=argparse.SUPPRESS)  # make reproduce
    p.add_argument("--cores", default="?", help=argparse.SUPPRESS)
    p.set_defaults(func=_timings)
    p = command(sub, "article", help="the replication article (docs/article/index.md) from the "
                       "published snapshots: a reproducibility summary, then the report")
    p.add_argument("--site", action="store_true", help="and its static site and PDF "
                   "(build/article/; needs the article extra and chromium)")
    p.set_defaults(func=_article)
    p = command(sub, "compare", help="a reproduce's claims beside the published snapshot's, "
                       "claim by claim: identical, moved within or beyond the snapshot's "
                       "stated tolerance, verdict moved")
    _profile_options(p)
    p.add_argument("--quiet", action="store_true", help="the summary line alone")
    p.add_argument("--record", action="store_true", help="keep this comparison as the "
                   "measurement between two kernel configurations (docs/bench/kernels-P.csv) "
                   "that the next make publish states as the snapshot's tolerance")
    p.set_defaults(func=_compare)
    p = command(sub, "power", help="the seeds' power computation from a profile's finished "
                       "runs: seed-to-seed spread of the paired NLL differences, and the seeds "
                       "that resolve the paper's effect")
    _profile_options(p)
    p.add_argument("--alpha", type=float, default=0.1, help="the regularized runs' alpha")
    p.add_argument("--published", action="store_true",
                   help="read the profile's published run files (docs/results/<profile>/) "
                        "instead of results/<profile>/")
    p.set_defaults(func=_power)
    p = command(sub, "publish", help="copy a finished profile's report into docs/results/")
    _profile_options(p)
    p.add_argument("--results-only", action="store_true",
                   help="only write the committed snapshot's pages (RESULTS.md, its notebooks' "
                        "commits) again from its own files (its part on what moved since the "
                        "previous snapshot kept as it was)")
    p.add_argument("--rerender", action="store_true",
                   help="run the committed snapshot's notebooks again on its run files "
                        "(nothing trained) and take what they compute: claims, figures, "
                        "notebooks, pages")
    p.set_defaults(func=_publish)
    p = command(sub, "study", help="the confirmatory study (issue 62): keep its complete bases "
                       "(prints gates and finiteness only), its design, make its next bases, "
                       "or write its lock (docs/study.lock) at the freeze")
    p.add_argument("what", choices=["keep", "design", "run", "lock"])
    _profile_options(p)
    p.add_argument("--bases", type=int, default=1, help="run: how many bases to make")
    p.add_argument("--cores", default="all", help="run: Snakemake's --cores")
    p.set_defaults(func=_study)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except BrokenPipeError:  # `lsa config | head -1`: the reader has gone, say nothing
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # nor when Python flushes stdout at exit
        return 141  # 128 + SIGPIPE, as a command killed by the closed pipe
    except KeyboardInterrupt:
        problem(args, "interrupted")
        return 130
    except UsageError as exc:
        problem(args, str(exc))
        return EXIT["usage"]
    except ConfigError as exc:
        problem(args, f"configuration error: {exc}")
        return EXIT["configuration"]
    except FileNotFoundError as exc:  # an input that is not there (books, a run, a file)
        problem(args, _one_line(exc))
        return EXIT["missing"]
    except (DamagedFile, InputFormatError, IncompleteOutputs) as exc:
        problem(args, _one_line(exc))
        return EXIT["damaged"]


def _one_line(exc: BaseException) -> str:
    """An error's message on one line (a message of several lines joined by "; ")."""
    if isinstance(exc, OSError) and exc.filename:  # open() of a file that is not there
        from lsa.files import shell_path

        return f"{shell_path(exc.filename)}: {exc.strerror or 'missing'}"
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return "; ".join(lines)


def command(sub, name: str, help: str, **kwargs) -> argparse.ArgumentParser:
    """A subcommand whose ``--help`` starts with what it does (its line in the list)."""
    return sub.add_parser(name, help=help, description=help, **kwargs)


if __name__ == "__main__":
    sys.exit(main())
