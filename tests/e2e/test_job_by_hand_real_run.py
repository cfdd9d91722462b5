"""A real run damaged after its job trained is named by ``lsa check`` and never used: its job run
by hand trains it again, and a job that reads it stops with one line (issue 73; the
verification itself, on folders made by hand: tests/unit/test_markers.py and
tests/workflow/test_job_by_hand.py)."""

import json
import os
import shutil
import subprocess
import sys

from support import DAMAGES, ROOT, change_byte, copy_made_runs, cut_file, names

from lsa.config import load_config
from lsa.files import DamagedFile
from lsa.launch import verify_job
from lsa.markers import FINISHED, output_problems
from lsa.pipeline import run_problems
from lsa.runs import runs_of


def test_every_damage_to_a_real_run_is_named_and_never_used(smoke_pipeline, out_root, capsys):
    """The smoke base model and run pi_a0_s0 as the smoke pipeline made them. Each file of
    either (the ones its marker records, and the marker), damaged alone each way (cut,
    emptied, deleted, one byte changed), is named by what ``lsa check`` and the job by hand
    run (``run_problems``, ``verify_job``: the run taken away to be made again, or the job
    stopped on its base model). Then, with files of both damaged at once as the checks of
    issue 73 found them passing, ``lsa check`` names each; the job by hand makes the run
    again (rc 0 with files that verify, the same perplexity), and a damaged base model stops
    it with one line naming each file (rc 5)."""
    from lsa.__main__ import EXIT, main

    env = {**os.environ, "LSA_OUTPUT_ROOT": str(out_root)}

    def job(*words):
        return subprocess.run([sys.executable, "-m", "lsa", *words, "--profile", "smoke",
                               "--no-progress"], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=900)

    pipe = load_config(profile="smoke")
    plan = runs_of(pipe)
    assert copy_made_runs(only={"base", "pi_a0_s0"}) == [plan.base.id,
                                                         plan.finetune["pi_a0_s0"].id]
    base, run = plan.base, plan.finetune["pi_a0_s0"]
    for r, label in ((base, "base"), (run, "pi_a0_s0")):
        recorded = [*json.loads((r.folder / FINISHED).read_text())["files"], FINISHED]
        assert {"model/model.safetensors", "model/config.json", "model/generation_config.json",
                "config.json", "metrics.jsonl"} < set(recorded)
        for name in recorded:
            for damage in DAMAGES:
                DAMAGES[damage](r.folder / name)
                if not r.finished:  # its marker deleted: not made, so made by its job
                    assert (name, damage) == (FINISHED, "deleted")
                else:
                    assert any(line.startswith(f"run {label}: ") and names(line, name)
                               for line in run_problems(pipe, r)), (name, damage)
                    try:  # the job by hand's verification, before any compute
                        note = "; ".join(verify_job(run, "smoke"))
                    except DamagedFile as err:  # a damaged base model stops the job
                        note = str(err)
                    assert names(note, name) and run.finished == (r is base), (name, damage)
                shutil.rmtree(r.folder)
                shutil.copytree(ROOT / "results" / "smoke" / "runs" / r.id, r.folder)

    before = json.loads((run.folder / "metrics.json").read_text())
    damaged = {"model/model.safetensors": change_byte, "model/config.json": DAMAGES["deleted"],
               "model/generation_config.json": DAMAGES["emptied"],
               "config.json": DAMAGES["deleted"], "metrics.json": DAMAGES["cut"]}
    for name, damage in damaged.items():
        damage(run.folder / name)
    assert main(["check", "--profile", "smoke"]) == EXIT["check"]
    err = capsys.readouterr().err
    assert all(any(line.startswith("lsa check: run pi_a0_s0: ") and names(line, name)
                   for line in err.splitlines()) for name in damaged)
    out = job("finetune", "--run", "pi_a0_s0")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "is made again, its files do not verify" in out.stdout
    assert all(names(out.stdout, name) for name in damaged)
    assert output_problems(run.folder) == [] and run.finished
    after = json.loads((run.folder / "metrics.json").read_text())
    assert after["perplexity"] == before["perplexity"]  # the same run, made again
    damaged = {"model/model.safetensors": change_byte, "tokenizer/tokenizer.json":
               DAMAGES["deleted"], "model/generation_config.json": DAMAGES["cut"]}
    for name, damage in damaged.items():
        damage(base.folder / name)
    cut_file(run.folder / "metrics.json", 3000)
    out = job("finetune", "--run", "pi_a0_s0")
    assert out.returncode == 5 and "Traceback" not in out.stderr
    (line,) = out.stderr.splitlines()
    assert all(names(line, name) for name in damaged)
    assert line.endswith("python -m lsa pretrain --profile smoke")
