"""The Snakemake workflow: dry runs per profile, lint, configuration errors, and the one
resolved configuration every job and notebook reads."""

import argparse
import shlex

import pytest
import yaml
from support import ROOT, run, tool, workflow_script
from support.dryrun import planned_jobs, resolve

from lsa.config import PROFILES, load_config
from lsa.pipeline import resolved_file, workflow_settings, write_resolved
from lsa.runs import ablation_specs, runs_of


@pytest.mark.parametrize("profile", PROFILES)
def test_dry_run_plans_every_section(profile, out_root, gpu_data):  # the GPU profiles' files
    out = run([tool("snakemake"), "-n", "--forceall", "--config", f"profile={profile}"])
    assert out.returncode == 0, out.stderr + out.stdout
    for key in load_config(profile=profile).sections:
        assert f"section_{key}" in out.stdout
        assert f"results/{profile}/{key}/metrics.json" in out.stdout


def test_lint_is_clean(out_root):
    out = run([tool("snakemake"), "--lint"])
    assert out.returncode == 0
    assert "Congratulations" in out.stdout + out.stderr, out.stdout + out.stderr


def test_bad_config_fails_with_a_clear_message(out_root):
    out = run([tool("snakemake"), "-n", "--config", "profile=huge"])
    assert out.returncode != 0
    assert "profile = 'huge'" in out.stdout + out.stderr
    out = run([tool("snakemake"), "-n", "--config", "seed=-x"])
    assert out.returncode != 0
    assert "seed" in out.stdout + out.stderr


def check_plan(stdout: str, seed: int) -> dict[str, str]:
    """Every planned job, parsed as the job parses its arguments, computes from the resolved
    file the run id (folder) the Snakefile expects and declared as its output."""
    from lsa.__main__ import job_run

    jobs = planned_jobs(stdout)
    assert jobs
    ids = {}
    for words in jobs:
        opts = dict(zip(words[1::2], words[2::2]))
        args = argparse.Namespace(command=words[0], profile=None, run=opts.get("--run"),
                                  config_file=opts["--config-file"],
                                  expect_id=opts["--expect-id"])
        pipe, job = job_run(args)  # what the job itself computes
        assert pipe.seed == seed and job.id == opts["--expect-id"]
        assert f"runs/{job.id}/train_summary.json" in stdout
        ids[job.describe()] = job.id
    return ids


def test_config_values_reach_every_job_through_the_resolved_file(out_root):
    """`snakemake --config profile=smoke seed=1`: rule resolved_config writes the resolved
    file, each job reads it and computes the folder the Snakefile expects (not
    config/config.yaml's)."""
    out = run([tool("snakemake"), "-n", "-p", "--forceall", "--config", "profile=smoke",
               "seed=1"])
    assert out.returncode == 0, out.stderr + out.stdout
    assert not resolved_file("smoke").exists()  # planned, not written
    resolve("--config", "profile=smoke", "seed=1")
    resolved = yaml.safe_load(resolved_file("smoke").read_text())
    assert resolved["seed"] == 1 and resolved["pretrain"]["seed"] == 1
    seeded = check_plan(out.stdout, seed=1)
    default = {r.describe(): r.id for r in runs_of(load_config(profile="smoke"))}
    assert seeded.keys() == default.keys()
    assert all(seeded[k] != default[k] for k in default)  # the seed is part of every identity
    # the notebooks receive the same file and the ids of the runs they read
    line = next(x for x in out.stdout.splitlines() if "05_babilong.ipynb -k" in x)
    params = yaml.safe_load(shlex.split(line.split(" -y ", 1)[1].split(" > ")[0])[0])
    assert params["config_file"].endswith("results/smoke/config.yaml")
    assert set(params) == {"profile", "config_file", "run_ids"}  # settings: from that file
    # its BABILong runs, then the premise gates' runs (lsa.gates)
    wanted = runs_of(load_config(resolved_file("smoke"))).used_by(["babilong", "gates"])
    assert sorted(params["run_ids"]) == sorted(r.id for r in wanted)
    assert {seeded[k] for k in seeded if k.startswith("babilong")} <= set(params["run_ids"])


def test_a_user_configfile_reaches_every_job(out_root, tmp_path):
    mine = tmp_path / "mine.yaml"
    mine.write_text("profile: smoke\nseed: 1\nprofiles:\n  smoke:\n    finetune:\n"
                    "      methods: [pi]\n      alphas: [0.0, 0.3]\n    longbench:\n"
                    "      finetune_runs: [pi_a0_s0, pi_a0.3_s0]\n")
    out = run([tool("snakemake"), "-n", "-p", "--forceall", "--configfile", str(mine)])
    assert out.returncode == 0, out.stderr + out.stdout
    resolve("--configfile", str(mine))
    ids = check_plan(out.stdout, seed=1)
    grid = {"finetune run pi_a0_s0", "finetune run pi_a0.3_s0"}
    specs = ablation_specs(load_config(profile="smoke").ablation)
    ablation = {f"finetune run {s.name}" for s in specs}
    gates = {"finetune run pi_a0_s0", "finetune run none_a0_s0"}  # the premise gates' CE runs
    assert {k for k in ids if k.startswith("finetune")} == grid | ablation | gates
    assert {k for k in ids if k.startswith("longbench")} == {"longbench run pi_a0_s0",
                                                             "longbench run pi_a0.3_s0"}
    assert load_config(resolved_file("smoke")).finetune.alphas == [0.0, 0.3]


def test_the_resolved_file_round_trips_and_is_rewritten_only_when_it_changes(out_root):
    import os

    pipe = load_config(profile="smoke", overrides={"seed": 3})
    path = write_resolved(pipe)
    again = load_config(path)
    assert again == pipe and [r.id for r in runs_of(again)] == [r.id for r in runs_of(pipe)]
    os.utime(path, (1, 1))
    write_resolved(pipe)
    assert path.stat().st_mtime == 1  # same content: untouched
    write_resolved(load_config(profile="smoke"))
    assert path.stat().st_mtime > 1 and load_config(path).seed == 0
    with pytest.raises(Exception, match="resolved configuration of profile 'smoke'"):
        load_config(path, profile="mini")
    with pytest.raises(Exception, match="takes no overrides"):
        load_config(path, overrides={"seed": 1})


def test_workflow_settings_cover_every_run_kind_and_section():
    from lsa.imports import notebook_inputs

    settings = workflow_settings()
    pipe = load_config()
    for key, spec in pipe.sections.items():
        inputs = notebook_inputs(ROOT / "notebooks" / spec.notebook)
        assert inputs and all((ROOT / "lsa" / module).exists() for module in inputs)
        assert settings.section(key).threads >= 1
    assert settings.section("06_replication_report").mem_mb == 1000
    assert settings.section("04_ablations").mem_mb == 4000  # the default
    assert settings.resources("gpu-small", "finetune").gpu == 1
    assert settings.resources("mini", "finetune").threads == 1  # two at a time
    # modules that only orchestrate are no run's input (editing them retrains nothing)
    for kind in settings.run_modules:
        assert not {"config.py", "strict.py", "runs.py", "markers.py", "pipeline.py",
                    "files.py", "__main__.py", "runtable.py"} & set(settings.modules_of(kind))
    # the shared parts are named once (module_groups), each kind's list names them
    assert "misalign.py" in settings.module_groups["core"]
    assert all("misalign.py" in settings.modules_of(kind) for kind in settings.run_modules
               if kind != "synthetic")  # Section 3's regression models: no language model
    assert not any("misalign.py" in entries for entries in settings.run_modules.values())


def test_bad_workflow_settings_fail_with_a_clear_message(tmp_path):
    from lsa.strict import ConfigError

    raw = yaml.safe_load((ROOT / "workflow" / "settings.yaml").read_text())
    raw["run_resources"]["mini"] = {"finetune": {"threads": 0}}
    path = tmp_path / "settings.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match="run_resources.mini.finetune: threads = 0: must be >= 1"):
        workflow_settings(path)
    raw["run_resources"]["mini"] = {}
    raw["sections"]["01_synthetic_study"] = {"threads": 0}
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match=r"sections.01_synthetic_study: threads = 0"):
        workflow_settings(path)
    raw["sections"]["01_synthetic_study"] = {}
    raw["run_modules"]["probe"] = ["core", "measure"]
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match=r"run_modules.probe: 'measure' is neither a module"):
        workflow_settings(path)
    raw["run_modules"]["probe"] = ["core", "nothing.py"]
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match=r"run_modules.probe: no module lsa/nothing.py"):
        workflow_settings(path)


RULES_SCRIPT = workflow_script('print("RULES=" + json.dumps({r.name: [r._restart_times, '
                               'r.shellcmd] for r in wf.rules}))')


def test_a_section_notebook_has_timeouts_and_one_retry(out_root):
    """papermill gives each section's kernel workflow/settings.yaml's kernel_start_timeout to
    start and each cell the job's runtime; a failed notebook is retried once, a run job never
    (its command is unchanged: a changed command would retrain every run)."""
    import json
    import sys

    out = run([sys.executable, "-c", RULES_SCRIPT, "smoke"])
    assert out.returncode == 0, out.stderr[-3000:]
    rules = json.loads(out.stdout.split("RULES=")[1].splitlines()[0])
    settings = workflow_settings()
    for key in load_config(profile="smoke").sections:
        retries, shell = rules[f"section_{key}"]
        timeouts = settings.notebook_timeouts(key)
        assert retries == 1, key
        assert f" --start-timeout {timeouts['start']} " in shell, shell
        assert f" --execution-timeout {timeouts['execution']} " in shell, shell
    assert settings.notebook_timeouts("01_synthetic_study") == {
        "start": settings.kernel_start_timeout,
        "execution": 60 * settings.section_job("01_synthetic_study").runtime}
    for name in ("base_model", "resolved_config", "report_files"):
        assert not rules[name][0] and "timeout" not in rules[name][1], name


def test_jobs_run_the_interpreter_that_runs_snakemake(out_root):
    """`.venv/bin/snakemake` with the environment not activated (its bin folder not on PATH):
    every job runs `<that python> -m lsa` or `<that python> -m papermill`, never a `python` or
    `papermill` looked up on PATH."""
    import os
    import sys

    env = {"PATH": "/usr/bin:/bin", "LSA_OUTPUT_ROOT": os.environ["LSA_OUTPUT_ROOT"]}
    out = run([tool("snakemake"), "-n", "-p", "--forceall", "--config", "profile=smoke"],
              env=env)
    assert out.returncode == 0, out.stderr + out.stdout
    programs = [shlex.split(line.split(module)[0])[-1] for line in out.stdout.splitlines()
                for module in (" -m lsa ", " -m papermill ") if module in line]
    assert len(programs) >= 6
    for program in programs:
        assert os.path.samefile(program, sys.executable), program
