"""The cluster route on a real scheduler: a single-node SLURM from Debian's packages
(``scripts/slurm_local.sh``) runs the smoke profile through ``profiles/slurm``, from a copy of
the working tree under a folder with a space (the environment outside it, as lsa/cluster.py
advises), and its runs (metrics, summaries, logs), each section's ``metrics.json`` (timings
and the repository's location aside) and its claims files (byte for byte) equal those of the
local smoke run (``smoke_pipeline``: the one ``make test`` leaves in results/smoke, else made
here). Snakemake runs from this environment's interpreter, or, where that one's path holds a
space (a checkout at such a path and its .venv, which the check before ``sbatch`` rightly
refuses), from one of this environment made at a path without a space, as the refusal tells a
user to do (``submitting_interpreter``); the refusal itself is checked in
tests/e2e/long/test_cluster_processes.py.

It starts and stops daemons, so it runs only under ``make test-cluster``, which sets
``LSA_REQUIRE_SLURM``; there a machine that cannot install or start SLURM fails it. Without
the variable (``make test``, ``make check``) it is skipped.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from support import ROOT, copy_working_tree, outputs, run
from support.cluster import submitting_interpreter

REQUIRE = "LSA_REQUIRE_SLURM"
# skipped at collection, before the session's smoke run is made for it
pytestmark = [pytest.mark.skipif(
    not os.environ.get(REQUIRE), reason=f"starts SLURM daemons: make test-cluster ({REQUIRE}=1)")]
SCRIPT = ROOT / "scripts" / "slurm_local.sh"


def slurm_local(action: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(SCRIPT), action], capture_output=True, text=True, timeout=900)


@pytest.fixture
def slurm():
    """SLURM up for the test, its daemons stopped after it (by their process ids)."""
    try:
        started = slurm_local("start")
        if started.returncode != 0:
            pytest.fail("could not install or start SLURM (scripts/slurm_local.sh start):\n"
                        + started.stdout[-3000:] + started.stderr[-3000:])
        yield
    finally:
        stopped = slurm_local("stop")
        assert stopped.returncode == 0, stopped.stderr[-3000:]


def located(value, root: Path):
    """``value`` with the repository's location written ``<repository>`` (LongBench's fixture
    records the folder it was read from, under the repository)."""
    return json.loads(json.dumps(value).replace(json.dumps(str(root))[1:-1], "<repository>"))


def claims_files(results) -> dict[str, bytes]:
    return {str(p.relative_to(results)): p.read_bytes()
            for p in sorted(results.rglob("claims*")) if p.is_file()}


def test_the_smoke_profile_through_slurm_gives_the_local_results(slurm, smoke_pipeline,
                                                                  tmp_path, monkeypatch):
    monkeypatch.delenv("LSA_OUTPUT_ROOT", raising=False)
    reference, reference_claims = outputs(), claims_files(ROOT / "results" / "smoke")
    clone = tmp_path / "a folder with spaces" / "lsa"
    clone.mkdir(parents=True)
    copy_working_tree(clone)
    if (ROOT / "data" / "books").exists():  # the fetched corpus, as `lsa fetch books` gives it
        shutil.copytree(ROOT / "data" / "books", clone / "data" / "books")
    env = {"PYTHONPATH": str(clone)}  # the copy's lsa, in the jobs too (sbatch exports it)
    python = submitting_interpreter(tmp_path)  # outside the copy, as the refusal advises
    out = run([python, "-m", "snakemake", "--profile", "profiles/slurm", "--config",
               "profile=smoke", "--slurm-status-command", "squeue"], cwd=clone, env=env,
              timeout=3 * 3600)
    log = out.stdout + out.stderr
    assert out.returncode == 0, log[-6000:]

    # every job but the local rules went through sbatch, and SLURM ran each to completion
    remote = set(re.findall(r"^rule (\S+):$", log, re.MULTILINE))
    local = set(re.findall(r"^localrule (\S+):$", log, re.MULTILINE))
    submitted = dict(re.findall(r"submitted with SLURM jobid (\d+) \(log: .*/rule_([^/]+)/",
                                log))
    assert remote and local and set(submitted.values()) == remote and not remote & local
    states = subprocess.run(["squeue", "-h", "-t", "all", "-o", "%i %P %T", "-j",
                             ",".join(submitted)], capture_output=True, text=True, check=True)
    assert sorted(states.stdout.split("\n")[:-1]) == sorted(
        f"{job} cpu COMPLETED" for job in submitted)

    monkeypatch.setenv("LSA_OUTPUT_ROOT", str(clone))
    assert located(outputs(), clone) == located(reference, ROOT)
    assert claims_files(clone / "results" / "smoke") == reference_claims
    assert reference_claims
