"""Command line: ``python -m lsa <command>`` (also installed as ``lsa``).

    python -m lsa config  [--profile P] [--section S]   show the validated configuration
    python -m lsa check   [--profile P]                 check the outputs of a pipeline run
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
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except ConfigError as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
