"""The GPU and cluster path in dry runs: the resources and partitions Snakemake assigns each
job under profiles/local and profiles/slurm, the rules kept on the submitting host, the check
before any job is submitted (lsa/cluster.py, a stand-in sbatch), GPUs claimed per job,
multi-process runs (their identity, their global batch, their `accelerate launch`), and the
jobs' conda environment. The same path with real processes:
tests/e2e/long/test_cluster_processes.py."""

import argparse
import json
import os
import re
import signal
import subprocess
import sys
from types import SimpleNamespace

import pytest
import yaml
from support import ROOT, run, tool, workflow_script
from support.cluster import HAS_SLURM_PLUGIN, MULTI, SHOW_CONFIG, assigned_resources

from lsa import cluster, devices
from lsa.config import OptimConfig, load_config
from lsa.pipeline import planned_resources, rule_name, workflow_settings
from lsa.runs import runs_of

LSA_PROFILES = ["smoke", "gpu-small", "paper"]


def dry_run(*args: str):
    out = run([tool("snakemake"), "-n", "--forceall", *args])
    assert out.returncode == 0, out.stderr[-3000:] + out.stdout[-3000:]
    return out.stdout


def check_resources(stdout: str, profile: str, gpu_limit: int | None = None,
                    overrides: dict | None = None) -> dict[str, dict[str, str]]:
    """Every planned job has the memory, runtime, GPUs and partition workflow/settings.yaml
    gives it (GPUs capped at the machine's `gpu` resource where Snakemake runs the jobs)."""
    assigned = assigned_resources(stdout)
    wanted = planned_resources(load_config(profile=profile, overrides=overrides))
    planned = set(assigned) - {"all"}
    assert planned and planned <= set(wanted), planned - set(wanted)
    for name in planned:
        job, got = wanted[name], assigned[name]
        gpu = job.gpu if gpu_limit is None else min(job.gpu, gpu_limit)
        assert int(got["mem_mb"]) == job.mem_mb, (name, got)
        assert int(got["runtime"]) == job.runtime, (name, got)
        assert int(got["gpu"]) == gpu, (name, got)
        assert got["slurm_partition"] == job.slurm_partition, (name, got)
        assert got["slurm_partition"] == ("gpu" if job.gpu else "cpu"), (name, got)
    return assigned


@pytest.mark.parametrize("profile", LSA_PROFILES)
def test_local_profile_gives_each_job_its_resources(profile, out_root, gpu_data):
    # on a machine with 8 GPUs (the profile's `gpu: 0` says none: GPU jobs get 0)
    stdout = dry_run("--profile", "profiles/local", "--resources", "gpu=8",
                     "--config", f"profile={profile}")
    assigned = check_resources(stdout, profile)
    runs = {rule_name(r): r for r in runs_of(load_config(profile=profile))}
    gpus = {int(assigned[name]["gpu"]) for name in runs}
    # paper's full fine-tunes: 4 processes, a GPU each (finetune.method_processes, processes);
    # Section 3's grid is a CPU job in every profile
    assert gpus == {"smoke": {0}, "gpu-small": {0, 1}, "paper": {0, 1, 4}}[profile]
    assert all(int(assigned[rule_name(r)]["gpu"]) == 0 for r in runs.values()
               if r.kind == "synthetic")
    # the run jobs' commands are those finished runs were made by (a changed command would
    # retrain them): the job takes its GPU count from settings.yaml itself (lsa.devices)
    commands = [line for line in stdout.splitlines() if " -m lsa " in line]
    assert len(commands) == len(runs) and not any(" --gpus" in line for line in commands)
    assert all(line.endswith("--no-progress > " + line.split(" > ")[-1]) for line in commands)
    check_resources(dry_run("--profile", "profiles/local", "--config", f"profile={profile}"),
                    profile, gpu_limit=0)


@pytest.mark.skipif(not HAS_SLURM_PLUGIN, reason="snakemake-executor-plugin-slurm is not "
                    "installed (pip install -e '.[slurm]')")
@pytest.mark.parametrize("profile", LSA_PROFILES)
def test_slurm_profile_sends_gpu_jobs_to_the_gpu_partition(profile, out_root, gpu_data):
    stdout = dry_run("--profile", "profiles/slurm", "--config", f"profile={profile}")
    assigned = check_resources(stdout, profile)
    # no placeholder account: a cluster that keeps accounts is asked for one (lsa.cluster)
    assert not any("slurm_account" in got for got in assigned.values())
    if profile == "paper":  # Llama-2-7B is read into host memory before the GPU
        for run_ in runs_of(load_config(profile="paper")):
            got = assigned[rule_name(run_)]
            if run_.kind == "synthetic":  # Section 3's grid: small models on the CPU
                assert got["slurm_partition"] == "cpu" and int(got["gpu"]) == 0
                continue
            assert got["slurm_partition"] == "gpu" and int(got["gpu"]) == run_.processes
            # runtimes from python -m lsa plan (tests/unit/test_plan.py), an hour at least
            assert int(got["mem_mb"]) >= 48000 and int(got["runtime"]) >= 60


def test_the_accounting_of_a_cluster_is_read_from_scontrol():
    assert cluster.accounting_storage(SHOW_CONFIG.format("accounting_storage/slurmdbd")) == \
        "accounting_storage/slurmdbd"
    assert cluster.accounting_storage("MinJobAge = 300 sec\n") is None

    def scontrol(text, rc=0):
        return lambda cmd, **kw: SimpleNamespace(returncode=rc, stdout=text)

    assert cluster.cluster_accounting(scontrol(SHOW_CONFIG.format("accounting_storage/none"))) \
        is False
    assert cluster.cluster_accounting(scontrol(SHOW_CONFIG.format("accounting_storage/slurmdbd")))
    assert cluster.cluster_accounting(scontrol("", rc=1)) is None  # no controller to ask

    def missing(cmd, **kw):
        raise FileNotFoundError(cmd[0])

    assert cluster.cluster_accounting(missing) is None  # no SLURM client here


def test_an_interpreter_path_with_a_space_is_refused_for_cluster_jobs():
    assert cluster.interpreter_problem("slurm", "/opt/lsa/.venv/bin/python") is None
    line = cluster.interpreter_problem("slurm", "/tmp/my lsa/.venv/bin/python")
    assert "'/tmp/my lsa/.venv/bin/python'" in line and "exit 127" in line
    assert "issue 3211" in line and "path without a space" in line and "\n" not in line
    assert cluster.interpreter_problem("slurm", "/tmp/tab\there/python")


def test_slurm_needs_an_account_where_the_cluster_keeps_accounts_and_squeue_where_not():
    assert cluster.slurm_problems(True, [], False, "sacct") == []
    assert cluster.slurm_problems(None, ["base"], False, "sacct") == []  # nothing known
    (line,) = cluster.slurm_problems(True, ["probe", "base", "base"], False, "sacct")
    assert line.startswith("this cluster keeps accounts and 2 rule(s) name none (base, ...)")
    assert "slurm_account" in line and "--slurm-no-account" in line
    assert cluster.slurm_problems(True, ["base"], True, "sacct") == []  # no account, on purpose
    (line,) = cluster.slurm_problems(False, ["base"], False, "sacct")
    assert "accounting_storage/none" in line and "--slurm-status-command squeue" in line
    assert cluster.slurm_problems(False, ["base"], False, "squeue") == []


def fake_workflow(executor="slurm", local=False, dryrun=False, main=True, accounts=("a", None),
                  no_account=False, status="squeue"):
    """What lsa.cluster reads of a Snakemake workflow about to execute: two submitted jobs
    with the given accounts, and a local one without."""
    jobs = [SimpleNamespace(rule=SimpleNamespace(name=f"rule{i}"), is_local=False,
                            resources={"slurm_account": a} if a else {})
            for i, a in enumerate(accounts)]
    jobs.append(SimpleNamespace(rule=SimpleNamespace(name="all"), is_local=True, resources={}))
    return SimpleNamespace(
        is_main_process=main, local_exec=local, dryrun=dryrun,
        executor_plugin=SimpleNamespace(name=executor),
        executor_settings=SimpleNamespace(no_account=no_account, status_command=status),
        dag=SimpleNamespace(needrun_jobs=lambda: iter(jobs)))


def test_the_check_runs_for_cluster_submission_only():
    spaced, keeps = "/x y/python", (lambda: True)
    (line,) = cluster.submission_problems(fake_workflow(), spaced, lambda: None)
    assert line.startswith("the interpreter's path holds a space ('/x y/python'): the slurm ")
    both = cluster.submission_problems(fake_workflow(), spaced, keeps)
    assert len(both) == 2 and "1 rule(s) name none (rule1, ...)" in both[1]
    assert cluster.submission_problems(fake_workflow(accounts=("a", "b")), "/p", keeps) == []
    # another cluster executor: the interpreter only
    assert len(cluster.submission_problems(fake_workflow("cluster-generic"), spaced, keeps)) == 1
    assert cluster.submission_problems(fake_workflow("cluster-generic"), "/p", keeps) == []
    for quiet in (fake_workflow(local=True), fake_workflow(dryrun=True),
                  fake_workflow(main=False)):  # local jobs, a dry run, a job's own Snakemake
        assert cluster.submission_problems(quiet, spaced, keeps) == []


# the local executor runs every rule locally (is_local): read the localrules themselves
API_SCRIPT = workflow_script('print("LOCAL=" + json.dumps(sorted(r.name for r in wf.rules '
                             'if r.name in wf._localrules)))')


@pytest.mark.parametrize("profile", ["smoke", "mini-full"])
def test_light_rules_stay_on_the_submitting_host(profile, out_root):
    out = run([sys.executable, "-c", API_SCRIPT, profile])
    assert out.returncode == 0, out.stderr[-3000:]
    local = set(json.loads(out.stdout.split("LOCAL=")[1].splitlines()[0]))
    wanted = {"all", "resolved_config", "jupyter_kernel", "report_files",
              "section_06_replication_report"}
    assert local == wanted | ({"resolved_config_shared"} if profile == "mini-full" else set())
    assert workflow_settings().section_job("06_replication_report").local


# paper with its CLEX runs in one process each (its own: 4, config/config.yaml)
SINGLE = {"profile": "paper", "profiles": {"paper": {"finetune": {"runs": [
    {"name": "clex4k_a0_s0", "method": "clex", "alpha": 0.0, "l_train": 4096},
    {"name": "clex4k_a0.1_s0", "method": "clex", "alpha": 0.1, "l_train": 4096}]}}}}


def multi_runs(on_top=MULTI):
    """paper's runs with MULTI on top, as Snakemake merges a --configfile (dicts key by key)."""
    from lsa import paths
    from lsa.config import from_mapping, read_yaml
    from lsa.strict import merge

    return runs_of(from_mapping(merge(read_yaml(paths.CONFIG_FILE), on_top))).finetune


def test_a_multi_process_run_is_another_run_with_a_gpu_per_process(out_root, tmp_path,
                                                                   gpu_data):
    default = multi_runs(SINGLE)
    mine = tmp_path / "multi.yaml"
    mine.write_text(yaml.safe_dump(MULTI))
    multi = multi_runs()
    # the process count is part of the identity above 1 only: other runs keep their ids
    assert multi["clex4k_a0_s0"].processes == 4
    assert multi["clex4k_a0_s0"].identity["run"]["processes"] == 4
    assert multi["clex4k_a0_s0"].id != default["clex4k_a0_s0"].id
    assert multi["clex4k_a0.1_s0"].id == default["clex4k_a0.1_s0"].id
    assert "processes" not in default["clex4k_a0_s0"].identity["run"]
    stdout = dry_run("--profile", "profiles/local", "--resources", "gpu=8",
                     "--configfile", str(mine))
    assigned = assigned_resources(stdout)
    assert assigned["finetune_clex4k_a0_s0"]["gpu"] == "4"
    assert assigned["finetune_clex4k_a0_1_s0"]["gpu"] == "1"
    assert f"--expect-id {multi['clex4k_a0_s0'].id} " in stdout


def test_a_process_count_must_divide_grad_accum():
    from lsa.strict import ConfigError

    with pytest.raises(ConfigError, match="processes = 3 must divide optim.grad_accum"):
        load_config(profile="paper", overrides={"profiles": {"paper": {"finetune": {"runs": [
            {"name": "x", "method": "clex", "processes": 3}]}}}})
    optim = OptimConfig(batch_size=1, grad_accum=16)
    for processes in (1, 2, 4, 16):
        each = devices.per_process_optim(optim, processes)
        assert each.batch_size * each.grad_accum * processes == 16  # the global batch
    runs = multi_runs()
    pipe = load_config(profile="paper")
    each = devices.per_process_pipe(pipe, runs["clex4k_a0_s0"])
    assert each.finetune.optim.grad_accum == 4 and pipe.finetune.optim.grad_accum == 16
    assert devices.per_process_pipe(pipe, runs["clex4k_a0.1_s0"]) is pipe


def test_a_multi_process_job_claims_its_gpus_and_starts_accelerate(tmp_path, monkeypatch):
    from lsa import __main__ as cli

    mine = tmp_path / "multi.yaml"
    mine.write_text(yaml.safe_dump(MULTI))
    job = multi_runs()["clex4k_a0_s0"]
    monkeypatch.setenv(devices.ENV_LOCKS, str(tmp_path / "locks"))
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.delenv(devices.LAUNCHED_ENV, raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3,4,5")
    started = []
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: started.append(
        (cmd, os.environ["CUDA_VISIBLE_DEVICES"])) or argparse.Namespace(returncode=0))
    args = argparse.Namespace(command="finetune", profile=None, config_file=str(mine),
                              run="clex4k_a0_s0", expect_id=job.id, threads=8, gpus=4,
                              no_progress=True)
    assert cli._place(args, job) == 0
    (cmd, visible), = started
    assert not (tmp_path / "locks" / "gpu4.lock").exists()  # the first free ones
    assert visible == "0,1,2,3"
    assert cmd[1:4] == ["-m", "accelerate.commands.launch", "--config_file"]
    assert cmd[4] == str(ROOT / "workflow" / "accelerate" / "fsdp.yaml")
    assert cmd[cmd.index("--num_processes") + 1] == "4"
    assert cmd[cmd.index("-m", 4):][:4] == ["-m", "lsa", "finetune", "--config-file"]
    assert "--gpus" not in cmd and f"--expect-id={job.id}" not in cmd and job.id in cmd
    args.gpu_claim.release()
    # by default the job claims what workflow/settings.yaml gives it: a GPU per process
    args.gpus, started[:] = None, []
    assert cli._place(args, job) == 0 and args.gpus == 4 and started[0][1] == "0,1,2,3"
    args.gpu_claim.release()
    # on a machine without GPUs nothing is claimed and the processes run on the CPU
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setattr(devices, "visible_gpus", lambda env=None: [])
    args.gpus, started[:] = None, []
    assert cli._place(args, job) == 0 and started[0][1] == ""
    # a launched process whose count is not the run's fails before any compute
    monkeypatch.setenv(devices.LAUNCHED_ENV, "2")
    with pytest.raises(Exception, match="started with 2 processes"):
        cli._place(args, job)


CLAIM = """
import sys, time
from lsa import devices
claim = devices.claim_gpus(int(sys.argv[1]), ["0", "1"], wait_s=0)
print(",".join(claim.devices), flush=True)
time.sleep(60)
"""


def test_each_job_claims_gpus_of_its_own_until_it_ends(tmp_path, monkeypatch):
    monkeypatch.setenv(devices.ENV_LOCKS, str(tmp_path))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    holder = subprocess.Popen([sys.executable, "-c", CLAIM, "1"], stdout=subprocess.PIPE,
                              text=True, env=env)
    try:
        assert holder.stdout.readline().strip() == "0"
        second = devices.claim_gpus(1, ["0", "1"], wait_s=0)
        assert second.devices == ["1"]  # not the other job's
        second.release()
        with pytest.raises(devices.GpuClaimError, match="no 2 free GPUs among 0,1"):
            devices.claim_gpus(2, ["0", "1"], wait_s=0)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    both = devices.claim_gpus(2, ["0", "1"], wait_s=5, poll_s=0.05)  # a killed job frees them
    assert both.devices == ["0", "1"]
    both.release()
    with pytest.raises(devices.GpuClaimError, match="asks for 3 GPUs, 2 are visible"):
        devices.claim_gpus(3, ["0", "1"])
    assert devices.visible_gpus({"CUDA_VISIBLE_DEVICES": "2,3"}) == ["2", "3"]
    assert devices.scheduler_pins_gpus({"SLURM_JOB_ID": "7"})
    assert not devices.scheduler_pins_gpus({})


def test_the_job_environment_has_the_dependencies_and_no_test_tools():
    """workflow/envs/lsa.yaml (--use-conda): pyproject's dependencies (and the LongBench
    scorer) without Snakemake, JupyterLab, the test tools or an install of the repository
    (Snakemake builds it from a copy elsewhere: the rules put the workflow on PYTHONPATH)."""
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    env = yaml.safe_load((ROOT / "workflow" / "envs" / "lsa.yaml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    users = yaml.safe_load((ROOT / "environment.yml").read_text())
    torch_pin = [p for d in users["dependencies"] if isinstance(d, dict) for p in d["pip"]
                 if p.startswith("torch")]

    def name(req):
        return re.split(r"[<>=;\[ ]", req, maxsplit=1)[0].lower()

    wanted = [r for r in project["dependencies"] if name(r) not in ("snakemake", "jupyterlab",
                                                                   "torch")]
    wanted += project["optional-dependencies"]["longbench"]
    assert sorted(p for p in pip if not p.startswith("torch")) == sorted(wanted)
    assert [p for p in pip if p.startswith("torch")] == torch_pin
    test_tools = {name(r) for r in project["optional-dependencies"]["test"]} - {"lsa"}
    assert not test_tools & {name(p) for p in pip}
    assert not [p for p in pip if p.startswith("-e") or p.startswith(".")]


def test_notebooks_run_in_the_workflow_kernel(out_root):
    """Every section runs in the kernel `lsa` that rule jupyter_kernel registers for the
    interpreter of the jobs, found through JUPYTER_PATH (not a user's `python3`)."""
    stdout = run([tool("snakemake"), "-n", "-p", "--forceall", "--config",
                  "profile=smoke"]).stdout
    lines = [line for line in stdout.splitlines() if " -m papermill " in line]
    assert len(lines) == len(load_config(profile="smoke").sections)
    for line in lines:
        assert " -k lsa " in line and "-k python3" not in line
        assert "Shell command: JUPYTER_PATH=.snakemake/lsa-jupyter/share/jupyter " in line
    out = run([tool("snakemake"), "--cores", "1", "--forcerun", "jupyter_kernel",
               "--config", "profile=smoke", "--", "jupyter_kernel"])
    assert out.returncode == 0, out.stderr[-3000:]
    spec = json.loads((ROOT / ".snakemake/lsa-jupyter/share/jupyter/kernels/lsa/kernel.json")
                      .read_text())
    assert os.path.samefile(spec["argv"][0], sys.executable)
    assert spec["display_name"] == "Python (lsa)"


