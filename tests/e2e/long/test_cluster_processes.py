"""The cluster path with real processes: nothing is submitted from an interpreter at a path
with a space, the sharded full fine-tuning config on two CPU processes, and a two-process
fine-tuning job through ``accelerate launch``. The dry runs and checks before submitting:
tests/workflow/test_cluster.py."""

import json
import sys

import pytest
import yaml
from support import ROOT, copy_working_tree, run
from support.cluster import HAS_SLURM_PLUGIN, SHOW_CONFIG, interpreter_at, submitting_interpreter

from lsa import devices
from lsa.config import load_config
from lsa.runs import runs_of


@pytest.mark.skipif(not HAS_SLURM_PLUGIN, reason="snakemake-executor-plugin-slurm is not "
                    "installed (pip install -e '.[slurm]')")
def test_nothing_is_submitted_from_an_interpreter_at_a_path_with_a_space(tmp_path):
    """`snakemake --profile profiles/slurm` with a stand-in sbatch on PATH (it records its calls
    and fails), scontrol and sacct (a cluster without accounting): from an interpreter at a
    path with a space it stops with one line before any sbatch; from this one (one outside
    the checkout where this one's path holds a space: `submitting_interpreter`) it submits."""
    clone, bin_ = tmp_path / "lsa", tmp_path / "bin"
    clone.mkdir()
    bin_.mkdir()
    copy_working_tree(clone)
    calls = tmp_path / "sbatch.calls"
    (bin_ / "sbatch").write_text(f'#!/bin/sh\necho "$@" >> "{calls}"\nexit 1\n')
    (bin_ / "scontrol").write_text(
        "#!/bin/sh\ncat <<EOF\n" + SHOW_CONFIG.format("accounting_storage/none") + "EOF\n")
    # as on such a cluster (the plugin asks it for an account to guess)
    (bin_ / "sacct").write_text("#!/bin/sh\necho Slurm accounting storage is disabled >&2\n"
                                "exit 1\n")
    for tool_ in bin_.iterdir():
        tool_.chmod(0o755)
    env = {"PATH": f"{bin_}:/usr/bin:/bin", "PYTHONPATH": str(clone)}
    cmd = ["-m", "snakemake", "--profile", "profiles/slurm", "--config", "profile=smoke"]

    spaced = interpreter_at(tmp_path / "an env with a space")
    out = run([spaced, *cmd, "--slurm-status-command", "squeue"], cwd=clone, env=env)
    assert out.returncode == 1 and not calls.exists()
    (line,) = [x for x in out.stderr.splitlines() if x.startswith("lsa: no job was submitted")]
    assert "holds a space" in line and "path without a space" in line and "; and " not in line
    assert "Job 0 has been submitted" not in out.stdout + out.stderr
    # without accounting, sacct (the plugin's default where it is installed) sees no job end
    python = submitting_interpreter(tmp_path)
    out = run([python, *cmd, "--slurm-status-command", "sacct"], cwd=clone, env=env)
    assert out.returncode == 1 and not calls.exists()
    assert "add --slurm-status-command squeue" in out.stderr
    # the same workflow from an interpreter at a path without a space reaches sbatch (which
    # fails here)
    out = run([python, *cmd, "--slurm-status-command", "squeue"], cwd=clone, env=env)
    assert out.returncode == 1 and "lsa: no job was submitted" not in out.stderr
    submitted = calls.read_text().splitlines()
    assert submitted and all(" -p cpu " in c and f" --wrap={python} -m snakemake " in c
                             and " -A " not in c for c in submitted)  # no placeholder account


def test_the_fsdp_config_shards_a_llama_over_two_processes(tmp_path):
    """workflow/accelerate/fsdp.yaml, launched as a multi-process run is (two gloo processes
    on the CPU, a tiny Llama): every decoder layer is a shard unit, each process holds half of
    the parameters, and after three steps on different batches both hold the same model."""
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file",
           str(ROOT / "workflow" / "accelerate" / "fsdp.yaml"), "--num_processes", "2",
           "--main_process_port", str(devices.free_port()),
           str(ROOT / "tests" / "support" / "fsdp_two_processes.py"), str(tmp_path)]
    env = {"PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
    out = run(cmd, env=env, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    procs = [json.loads((tmp_path / f"process{i}.json").read_text()) for i in range(2)]
    for p in procs:
        assert p["fsdp_version"] == 2 and p["wrap"] == ["LlamaDecoderLayer"] and p["units"] == 2
        assert p["processes"] == 2 and p["cpu_ram_efficient_loading"] is True
        assert "FULL_STATE_DICT" in p["state_dict_type"]
        assert 0 < p["local"] < p["total"]
        assert all(loss == loss and loss > 0 for loss in p["losses"])
    assert procs[0]["local"] + procs[1]["local"] == procs[0]["total"]
    assert procs[0]["weights_sum"] == procs[1]["weights_sum"]
    assert procs[0]["losses"] != procs[1]["losses"]  # each process trained on its own data


def test_a_two_process_finetune_job_runs_through_accelerate_on_the_cpu(out_root, tmp_path):
    """`python -m lsa finetune` of a run with `processes: 2` on the CPU: the job starts two
    gloo processes through `accelerate launch` (workflow/accelerate/fsdp.yaml; without a GPU
    accelerate runs them as DDP), which train one run together (the summary counts 2
    processes, one log line per optimizer step) from the global batch of the configuration
    (grad_accum 2 of 2 processes: one micro-batch each), and the main one marks it finished."""
    from lsa import paths
    from lsa.config import read_yaml
    from lsa.runs import read_log
    from lsa.strict import merge

    raw = merge(read_yaml(paths.CONFIG_FILE), {"profiles": {"smoke": {"finetune": {
        "optim": {"grad_accum": 2},
        "runs": [{"name": "pi2p", "method": "pi", "alpha": 0.1, "processes": 2}]}}}})
    mine = tmp_path / "two.yaml"
    mine.write_text(yaml.safe_dump(raw, sort_keys=False))
    env = {"OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    common = ["--config-file", str(mine), "--profile", "smoke", "--threads", "1",
              "--no-progress"]
    out = run([sys.executable, "-m", "lsa", "pretrain", *common], env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    out = run([sys.executable, "-m", "lsa", "finetune", "--run", "pi2p", "--gpus", "0",
               *common], env=env, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "accelerate.commands.launch --config_file" in out.stdout
    job = runs_of(load_config(mine, profile="smoke")).finetune["pi2p"]
    assert job.finished and job.processes == 2 and job.identity["run"]["processes"] == 2
    assert job.summary()["processes"] == 2
    assert [r["step"] for r in read_log(job.folder)] == list(range(1, 11))
    assert job.problems() == []
