"""What the workflow's dry-run tests share: the lsa commands a dry run plans, and the
resolved configuration written by its own rule."""

import shlex

from . import run, tool


def planned_jobs(stdout: str) -> list[list[str]]:
    """The ``python -m lsa`` commands of a dry run's (``-p``) shell commands."""
    jobs = []
    for line in stdout.splitlines():
        if " -m lsa " in line:
            words = shlex.split(line.split(" -m lsa ", 1)[1].split(" > ")[0])
            jobs.append(words)
    return jobs


def resolve(*config: str) -> None:
    """Run rule resolved_config (a dry run writes nothing)."""
    out = run([tool("snakemake"), "--cores", "1", *config, "--", "resolved_config"])
    assert out.returncode == 0, out.stderr + out.stdout
