"""A real run cut after its job trained is trained again when its job is run by hand (the
verification itself, on folders made by hand: tests/workflow/test_job_by_hand.py)."""

import json
import os
import subprocess
import sys

from support import ROOT, copy_made_runs, cut_file

from lsa.config import load_config
from lsa.markers import output_problems
from lsa.runs import runs_of


def test_a_real_run_cut_after_its_job_is_trained_again_by_hand(smoke_pipeline, out_root):
    """The smoke base model and run pi_a0_s0 as the smoke pipeline made them; metrics.json and
    the model file cut; the job by hand makes the run again (rc 0 with files that verify, the
    same perplexity), and a cut base model stops it with one line (rc 5)."""
    env = {**os.environ, "LSA_OUTPUT_ROOT": str(out_root)}

    def job(*words):
        return subprocess.run([sys.executable, "-m", "lsa", *words, "--profile", "smoke",
                               "--no-progress"], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=900)

    plan = runs_of(load_config(profile="smoke"))
    assert copy_made_runs(only={"base", "pi_a0_s0"}) == [plan.base.id,
                                                         plan.finetune["pi_a0_s0"].id]
    base, run = plan.base, plan.finetune["pi_a0_s0"]
    before = json.loads((run.folder / "metrics.json").read_text())
    cut_file(run.folder / "metrics.json", 3000)
    cut_file(run.folder / "model" / "model.safetensors", 3000)
    out = job("finetune", "--run", "pi_a0_s0")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "is made again, its files do not verify" in out.stdout
    assert output_problems(run.folder) == [] and run.finished
    after = json.loads((run.folder / "metrics.json").read_text())
    assert after["perplexity"] == before["perplexity"]  # the same run, made again
    cut_file(base.folder / "model" / "model.safetensors", 3000)
    cut_file(run.folder / "metrics.json", 3000)
    out = job("finetune", "--run", "pi_a0_s0")
    assert out.returncode == 5 and "Traceback" not in out.stderr
    (line,) = out.stderr.splitlines()
    assert "model/model.safetensors" in line and "python -m lsa pretrain --profile smoke" in line
