"""Fault injection: the smoke pipeline killed at several points (as a closed laptop or a lost SSH
session would: SIGKILL to Snakemake and everything it started), then started again with the
command `make reproduce` runs (`python -m lsa pipeline`), with no other step. What it makes
equals what the uninterrupted run made (`smoke_pipeline`), and no run folder holds a duplicated
or truncated file.

The faulted pipeline starts from the uninterrupted run's finished runs, all but the three the
kills land in, and makes Section 5.3 (notebook 04, which reads those three): every way of dying
is met in these jobs, and training the rest again checked nothing more (issue 59: the whole
profile again, one job at a time, was the longest test of make test).

The kills are deterministic (``lsa.faults``): each invocation is given every point that has not
fired yet and dies at the first it reaches, so every point fires exactly once, whatever order
Snakemake runs the jobs in.
"""

import os
import subprocess
import sys

from support import ROOT, copy_made_runs, outputs

from lsa import faults, paths
from lsa.launch import lock_files
from lsa.pipeline import pipeline_config, relative, section_problems
from lsa.runs import LOG, runs_of

#: one kill per way of dying, each a start of its own (issue 59 cut two: a step before any
#: checkpoint, which restarts the run as a step after one truncates its log, and a section's
#: metrics file, written by the same atomic write as a run's)
POINTS = [
    "checkpoint:pi_a0_s1-*:8",               # while the second checkpoint is written
    "train:pi_a0.1_s1-*:6",                  # a step after a checkpoint: it resumes from it
    "write:pi_a0_s0-*/metrics.json",         # half-way through a run's metrics file
    "notebook:04_ablations",                 # while a notebook (a section's job) runs
]
#: the runs the kills land in (made again), and the section that reads them (the target)
REMADE = ("pi_a0_s1", "pi_a0.1_s1", "pi_a0_s0")
SECTION = "04_ablations"


def start(env):
    """`python -m lsa pipeline` as the leader of a new process group (LSA_FAULT_GROUP), with
    the environment's bin folder off PATH (not activated). One job at a time: with two at once
    (1-thread jobs, workflow/settings.yaml) a kill would also cut the job beside it at a point
    the test does not choose, and where each run resumes from would depend on the timing. The
    limit is host memory (every job asks for 4000 MB), not cores: at 2 cores each job keeps the
    threads it has in the uninterrupted run (the base model 2), and on a CPU where 1 and 2
    threads round differently (tests/unit/test_train_threads.py) the results stay comparable
    bit for bit."""
    target = relative(paths.metrics_file("smoke", SECTION))  # as the Snakefile names it
    script = (f'export {faults.GROUP_ENV}=$$; exec "$0" -m lsa pipeline --profile smoke '
              '--cores 2 -- "$1" --resources mem_mb=4000')
    return subprocess.run(["bash", "-c", script, sys.executable, str(target)], cwd=ROOT, env=env,
                          capture_output=True, text=True, start_new_session=True)


def test_a_killed_pipeline_resumes_to_the_same_results(smoke_pipeline, tmp_path, monkeypatch):
    reference = outputs(only={*REMADE, SECTION})
    monkeypatch.setenv("LSA_OUTPUT_ROOT", str(tmp_path))
    given = copy_made_runs(exclude=REMADE)
    env = {**os.environ, "PATH": "/usr/bin:/bin", "LSA_OUTPUT_ROOT": str(tmp_path)}
    env.pop(faults.ENV, None)
    fired, left, logs = [], list(POINTS), []
    while left:
        log = tmp_path / "fired.txt"
        log.unlink(missing_ok=True)
        out = start({**env, faults.ENV: "|".join(left), faults.LOG_ENV: str(log)})
        logs.append(out.stdout[-3000:] + out.stderr[-3000:])
        assert out.returncode == -9, "the pipeline ended without reaching " + \
            ", ".join(left) + "\n" + logs[-1]
        (point,) = log.read_text().split()
        fired.append(point)
        left = [p for p in left if not faults.matches(point, p)]
        assert lock_files(ROOT), "a killed Snakemake leaves its lock"
        assert len(fired) <= len(POINTS)
    final = start(env)
    assert final.returncode == 0, final.stdout[-5000:] + final.stderr[-5000:]
    assert "removed a stale Snakemake lock" in final.stdout
    assert len(fired) == len(POINTS)

    pipe = pipeline_config("smoke")
    for folder in given:  # the runs it was given are not made again
        summary = [root / "results" / "smoke" / "runs" / folder / "train_summary.json"
                   for root in (ROOT, tmp_path)]
        assert summary[0].stat().st_mtime_ns == summary[1].stat().st_mtime_ns, folder
    made = [run for run in runs_of(pipe) if run.id.rsplit("-", 1)[0] in REMADE]
    assert len(made) == len(REMADE) and all(run.finished for run in made)
    assert section_problems(pipe, SECTION) == []
    for run in made:  # no duplicated or truncated file
        leftovers = [p.name for p in run.folder.iterdir()
                     if p.name.endswith(".tmp") or p.name.startswith("checkpoint")]
        assert leftovers == [], (run.id, leftovers)
        assert run.problems() == []
        steps = [r["step"] for r in run.log()]
        assert steps == list(range(1, len(steps) + 1)), (run.id, steps)
    resumed = {run.name: run.summary()["resumed_from"] for run in made}
    assert resumed["pi_a0.1_s1"] == 4 and resumed["pi_a0_s0"] == 8  # from their checkpoints
    assert (LOG, outputs(only={*REMADE, SECTION})) == (LOG, reference)
