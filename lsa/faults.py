"""Fault injection for the tests: a crash at a named point, as a closed laptop would cause one.

The library calls ``point(name)`` where an interruption is worth testing:

- ``train:<run folder>:<step>``: inside optimizer step ``step`` (after the backward pass,
  before the weights change), ``lsa.train.train``;
- ``checkpoint:<run folder>:<step>``: while the checkpoint of ``step`` is written;
- ``write:<folder>/<file>``: half-way through an atomic write (``lsa.files``), with half the
  bytes in the temporary file;
- ``notebook:<section>``: as a section notebook opens its configuration
  (``lsa.notebook.open_section``).

Nothing happens unless ``LSA_FAULT`` holds shell-style patterns (``fnmatch``, separated by
``|``) one of which matches the point's name. Then the process appends the point's name to the
file ``LSA_FAULT_LOG`` (when set) and kills, with SIGKILL (no clean-up, no ``finally``), the
process group ``LSA_FAULT_GROUP`` (the Snakemake invocation the test started in a session of
its own), every ancestor of this process up to that group's leader (a job may run in a session
of its own), and itself. Without ``LSA_FAULT_GROUP`` it kills itself only.
"""

from __future__ import annotations

import fnmatch
import os
import signal
from pathlib import Path

ENV = "LSA_FAULT"
GROUP_ENV = "LSA_FAULT_GROUP"
LOG_ENV = "LSA_FAULT_LOG"


def matches(name: str, patterns: str) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns.split("|") if p)


def point(name: str) -> None:
    """Crash here when ``LSA_FAULT`` matches ``name`` (see the module's docstring)."""
    patterns = os.environ.get(ENV)
    if patterns and matches(name, patterns):
        log = os.environ.get(LOG_ENV)
        if log:
            with open(log, "a") as fh:
                fh.write(name + "\n")
        crash()


def _parent(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])  # the field after the command name


def crash() -> None:
    group = os.environ.get(GROUP_ENV)
    if group:
        leader = int(group)
        chain, pid = [], os.getppid()
        while pid and pid > 1 and pid != leader:
            chain.append(pid)
            pid = _parent(pid)
        if pid != leader:  # not started by that group's leader: leave our ancestors alone
            chain = []
        for target in chain:
            try:
                os.kill(target, signal.SIGKILL)
            except OSError:
                pass
        try:
            os.killpg(leader, signal.SIGKILL)
        except OSError:
            pass
    os.kill(os.getpid(), signal.SIGKILL)
