"""The workflow does not depend on where the repository lives: in a copy of the working tree
under a path with a space (as a clone under /tmp would be), Snakemake's dry runs of a CPU and a
GPU profile plan every section, the arguments of their lsa jobs parse as a shell parses them,
and the copy runs its own lsa."""

import os
import re
import shlex
import subprocess
import sys

import pytest
from support import ROOT, copy_working_tree, tool

from lsa.config import load_config


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs a git checkout to copy")
def test_dry_runs_pass_in_a_copy_under_a_path_with_a_space(tmp_path, gpu_data):
    # dry runs only (issue 59): the whole workflow test file in the copy took a minute and
    # checked no more of the path than this
    clone = tmp_path / "a folder with spaces" / "lsa copy"
    clone.mkdir(parents=True)
    copy_working_tree(clone)
    env = {**os.environ, "PYTHONPATH": str(clone)}  # the copy's lsa, not this checkout's
    env.pop("LSA_OUTPUT_ROOT", None)
    # the CPU rules, and the GPU ones with multi-process jobs (paper: accelerate's config
    # files); the GPU profile reads gpu_data's stand-in benchmark files
    for profile in ("smoke", "paper"):
        out = subprocess.run([tool("snakemake"), "-n", "-p", "--forceall", "--config",
                              f"profile={profile}"], cwd=clone, env=env, capture_output=True,
                             text=True)
        assert out.returncode == 0, profile + out.stdout[-4000:] + out.stderr[-3000:]
        assert f"Working directory: {clone}" in out.stdout + out.stderr
        for key in load_config(profile=profile).sections:
            assert f"results/{profile}/{key}/metrics.json" in out.stdout, (profile, key)
        jobs = [shlex.split(line.split(" -m lsa ", 1)[1].split(" > ")[0])
                for line in out.stdout.splitlines() if " -m lsa " in line]
        # every lsa job's arguments parse as a shell parses them
        assert all(re.fullmatch("[a-z][a-z-]*", job[0]) for job in jobs), profile  # subcommand
    check = subprocess.run([sys.executable, "-c", "import lsa.paths as p; print(p.ROOT)"],
                           cwd=clone, env=env, capture_output=True, text=True)
    assert check.stdout.strip() == str(clone)  # the copy ran its own code
