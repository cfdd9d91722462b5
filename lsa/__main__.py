"""Command line: ``python -m lsa <command>`` (also installed as ``lsa``).

    python -m lsa config   [--profile P] [--section S]  show the validated configuration
    python -m lsa check    [--profile P]                check the outputs of a pipeline run
    python -m lsa fetch    books                        fetch the book corpus into data/
    python -m lsa pretrain [--profile P]                the profile's base model (a run folder)
    python -m lsa finetune --run NAME [--profile P]     one context-extension run
    python -m lsa babilong --run NAME [--profile P]     one BABILong fine-tuning run (train design)
    python -m lsa babilong-eval --run NAME [--profile P] a finetune run on BABILong (evaluate design)
    python -m lsa bench    misalign [--quick]           cost of CE + SCE vs CE only
    python -m lsa timings  [--profile P]                where a profile's time went
    python -m lsa publish  [--profile P]                snapshot into docs/results/ (committed)
"""

from __future__ import annotations

import argparse
import sys

import yaml

from lsa.config import PROFILES, ConfigError, load_config


def _config(args) -> int:
    pipe = load_config(profile=args.profile)
    sections = [args.section] if args.section else list(pipe.sections)
    for key in sections:
        if key not in pipe.sections:
            raise ConfigError(f"--section {key!r}: unknown; allowed: {', '.join(pipe.sections)}")
        print(f"# {key} ({pipe.profile})")
        print(yaml.safe_dump(pipe.notebook_parameters(key), sort_keys=False))
    return 0


def _check(args) -> int:
    from lsa.pipeline import check_outputs

    pipe = load_config(profile=args.profile)
    problems = check_outputs(pipe)
    for problem in problems:
        print("FAIL", problem)
    if not problems:
        print(f"outputs of profile {pipe.profile}: {len(pipe.sections)} sections OK")
    return 1 if problems else 0


def _fetch(args) -> int:
    from lsa.data.books import locate_books

    folder, source = locate_books()
    print(f"books: {folder} (source: {source})")
    return 0


def _set_threads(args) -> None:
    if getattr(args, "threads", None):
        import torch

        torch.set_num_threads(args.threads)


def _pretrain(args) -> int:
    from lsa.runs import pretrain

    _set_threads(args)
    print(pretrain(load_config(profile=args.profile), progress=not args.no_progress))
    return 0


def _run(args) -> int:
    """One run of the kind named by the subcommand (finetune, babilong or babilong-eval)."""
    from lsa import runs

    _set_threads(args)
    pipe = load_config(profile=args.profile)
    if args.command == "babilong-eval":
        pipe.babilong_eval_run(args.run)  # unknown run or train design: fail early
        job = runs.babilong_evaluate
    else:
        pipe.settings[args.command].run(args.run)  # type: ignore[attr-defined]  # unknown: fail early
        job = runs.finetune if args.command == "finetune" else runs.babilong_run
    print(job(pipe, args.run, progress=not args.no_progress))
    return 0


def _bench(args) -> int:
    from lsa.bench import main as bench_main

    return bench_main(args)


def _timings(args) -> int:
    from lsa import timings
    from lsa.config import load_config

    profile = load_config(profile=args.profile).profile
    if args.record_since is not None:
        timings.record_reproduce(profile, args.record_since, args.cores)
    print(timings.markdown(profile), end="")
    return 0


def _publish(args) -> int:
    from lsa.config import load_config
    from lsa.publish import NotPublishable, publish

    try:
        print(publish(load_config(profile=args.profile).profile))
    except NotPublishable as exc:
        print(f"not published: {exc}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="lsa", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("config", help="print the validated notebook parameters")
    p.add_argument("--profile", choices=PROFILES)
    p.add_argument("--section")
    p.set_defaults(func=_config)
    p = sub.add_parser("check", help="check the files a pipeline run wrote")
    p.add_argument("--profile", choices=PROFILES)
    p.set_defaults(func=_check)
    p = sub.add_parser("fetch", help="fetch input data into data/")
    p.add_argument("what", choices=["books"])
    p.set_defaults(func=_fetch)
    for name, func, helptext in (("pretrain", _pretrain, "train or load the base model"),
                                 ("finetune", _run, "one context-extension run"),
                                 ("babilong", _run, "one BABILong fine-tuning run"),
                                 ("babilong-eval", _run, "evaluate a finetune run on BABILong")):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("--profile", choices=PROFILES)
        p.add_argument("--no-progress", action="store_true")
        p.add_argument("--threads", type=int, help="torch CPU threads (default: torch's)")
        if name != "pretrain":
            p.add_argument("--run", required=True, help="a run name (python -m lsa config shows them)")
        p.set_defaults(func=func)
    p = sub.add_parser("bench", help="measure the regularizer's time and memory cost")
    p.add_argument("what", choices=["misalign"])
    p.add_argument("--quick", action="store_true", help="tiny shapes (tests)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--out", help="JSON output (default results/bench/misalign.json)")
    p.add_argument("--memory-only", action="store_true", help=argparse.SUPPRESS)
    p.set_defaults(func=_bench)
    p = sub.add_parser("timings", help="where a profile's time went (from the pipeline's "
                       "benchmark files)")
    p.add_argument("--profile", choices=PROFILES)
    p.add_argument("--record-since", type=float, help=argparse.SUPPRESS)  # make reproduce
    p.add_argument("--cores", default="?", help=argparse.SUPPRESS)
    p.set_defaults(func=_timings)
    p = sub.add_parser("publish", help="copy a finished profile's report into docs/results/")
    p.add_argument("--profile", choices=PROFILES)
    p.set_defaults(func=_publish)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except ConfigError as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
