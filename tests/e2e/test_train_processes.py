"""The trainer under two processes (``accelerate launch``): one log line per step and the
single-process schedule."""

import json
import math

import pytest
from support import ROOT, run, tool

from lsa.markers import read_log
from lsa.train import lr_lambda


def test_two_processes_step_the_schedule_once_per_optimizer_step(tmp_path):
    """``accelerate launch`` with two CPU processes: one log line per step, written once, with
    the single-process schedule; both processes end with the same weights and draw the same
    CLEX scales (t = 1 leaves the ODE without gradient: DDP must accept it)."""
    from support.train_two_processes import OPTIM

    # on CPU, ``--cpu`` alone starts one process: ``--multi_gpu`` starts two gloo ones
    result = run([tool("accelerate"), "launch", "--multi_gpu", "--num_processes", "2",
                  "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
                  str(ROOT / "tests" / "support" / "train_two_processes.py"), str(tmp_path)],
                 env={"PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1",
                      "CUDA_VISIBLE_DEVICES": ""}, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    procs = [json.loads((tmp_path / f"process{i}.json").read_text()) for i in (0, 1)]
    assert [p["summary"]["processes"] for p in procs] == [2, 2]
    log = read_log(tmp_path / "run")
    assert [r["step"] for r in log] == list(range(1, OPTIM.steps + 1))
    fn = lr_lambda(OPTIM)
    assert [r["lr"] for r in log] == pytest.approx([OPTIM.lr * fn(s) for s in range(OPTIM.steps)])
    assert procs[0]["draws"] == procs[1]["draws"] and 1.0 in procs[0]["draws"]
    assert len(procs[0]["draws"]) == OPTIM.steps * OPTIM.grad_accum
    assert procs[0]["weights_sum"] == pytest.approx(procs[1]["weights_sum"], rel=1e-6)
    assert procs[0]["weights_abs_sum"] == pytest.approx(procs[1]["weights_abs_sum"], rel=1e-6)
    assert math.isfinite(log[-1]["ce"])


# --- the progress line of a job (no bar): when, what it says, and that it changes nothing ----








