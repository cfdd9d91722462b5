"""What the cluster tests share: whether the SLURM plugin is installed, a stand-in `scontrol
show config`, the resources a dry run shows per rule, a multi-process configuration."""

import importlib.util
import re

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
