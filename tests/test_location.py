"""The tests do not depend on where the repository lives: the workflow's dry runs pass in a
copy of the working tree under a path with a space, as a clone under /tmp would be."""

import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT

pytestmark = pytest.mark.slow

# what the copy runs: dry runs, where the repository's path enters: every profile's (the
# Snakefile and every path it builds), one with the jobs' commands printed and parsed as a shell
# would (quoting), and BABILong's plans. The other workflow tests (lint, configuration errors,
# settings) ran here too until issue 59: minutes of make test that checked no path.
TESTS = ["tests/test_workflow.py::test_dry_run_plans_every_section",
         "tests/test_workflow.py::test_config_values_reach_every_job_through_the_resolved_file",
         "tests/test_babilong_eval.py::test_dry_run_lists_the_jobs_of_the_profile_design"]


def copy_working_tree(target):
    """The files git tracks, and the untracked ones it does not ignore, as they are now."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], cwd=ROOT, capture_output=True, check=True)
    for name in filter(None, listed.stdout.decode().split("\0")):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs a git checkout to copy")
def test_dry_runs_pass_in_a_copy_under_a_path_with_a_space(tmp_path):
    clone = tmp_path / "a folder with spaces" / "lsa copy"
    clone.mkdir(parents=True)
    copy_working_tree(clone)
    env = {**os.environ, "PYTHONPATH": str(clone)}  # the copy's lsa, not this checkout's
    env.pop("LSA_OUTPUT_ROOT", None)
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          *TESTS], cwd=clone, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    assert " passed" in out.stdout
    check = subprocess.run([sys.executable, "-c", "import lsa.paths as p; print(p.ROOT)"],
                           cwd=clone, env=env, capture_output=True, text=True)
    assert check.stdout.strip() == str(clone)  # the copy ran its own code
