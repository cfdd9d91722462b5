"""What the cluster tests share: whether the SLURM plugin is installed, a stand-in `scontrol
show config`, the resources a dry run shows per rule, a multi-process configuration, this
environment's interpreter at a path of the test's choosing."""

import importlib.util
import re
import sys
from pathlib import Path

from lsa.cluster import interpreter_problem

HAS_SLURM_PLUGIN = importlib.util.find_spec("snakemake_executor_plugin_slurm") is not None


def assigned_resources(stdout: str) -> dict[str, dict[str, str]]:
    """Rule name -> the resources a dry run's output shows for its job."""
    out, name = {}, None
    for line in stdout.splitlines():
        match = re.match(r"^(?:local)?rule (\S+):$", line)
        if match:
            name = match.group(1)
        elif name and line.strip().startswith("resources:"):
            items = line.split("resources:", 1)[1].strip().split(", ")
            out[name] = dict(item.split("=", 1) for item in items)
            name = None
    return out


SHOW_CONFIG = """Configuration data as of 2026-12-06T04:10:00
AccountingStorageHost   = (null)
AccountingStorageType   = {}
MinJobAge               = 3600 sec
"""


MULTI = {"profile": "paper", "profiles": {"paper": {"finetune": {"runs": [
    {"name": "clex4k_a0_s0", "method": "clex", "alpha": 0.0, "l_train": 4096, "processes": 4},
    {"name": "clex4k_a0.1_s0", "method": "clex", "alpha": 0.1, "l_train": 4096}]}}}}


def interpreter_at(link: Path) -> str:
    """This environment's interpreter through ``link``, a symlink to the environment made
    there: the same Python, packages and data files (nbconvert's templates in share/jupyter,
    which the report rule reads) at a path of the test's choosing, with a space or without one,
    for the cluster route's check of the interpreter's path (lsa/cluster.py)."""
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(sys.prefix, target_is_directory=True)
    return str(link / Path(sys.executable).relative_to(sys.prefix))


def submitting_interpreter(folder: Path) -> str:
    """An interpreter the cluster route submits jobs from: this one, else, where its path holds
    a space (a checkout at such a path and its .venv), this environment through a symlink at
    ``folder``/env, which must lie outside the checkout at a path without a space (what the
    refusal, lsa/cluster.py, tells a user to do)."""
    if interpreter_problem("slurm", sys.executable) is None:
        return sys.executable
    python = interpreter_at(folder / "env")
    assert interpreter_problem("slurm", python) is None, f"{folder} holds a space too"
    return python
