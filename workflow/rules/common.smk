# Helpers shared by the rules. The merged configuration (config/config.yaml + --configfile +
# --config, merged by lsa.launch.merged_config: the one merge `python -m lsa pipeline`'s
# pre-flight and broken-run check use too) is validated once and resolved for the chosen
# profile; rule resolved_config writes
# it to results/<profile>/config.yaml, and every job and notebook reads that file, so a job
# computes the run folder the rules expect (each job also checks it: --expect-id).

import os
import shlex
import sys
from pathlib import Path

import yaml
from snakemake.settings.types import DeploymentMethod

from lsa.config import from_mapping
from lsa.launch import merged_config
from lsa.pipeline import (LIGHT_RULES, RESOLVED_RULES, notebook_parameters, resolved_file,
                          resolved_text, rule_name, section_settings, workflow_settings)
from lsa import paths
from lsa.imports import notebook_inputs
from lsa.markers import FINISHED
from lsa.preflight import data_files
from lsa.runs import SHARED_RUNS, digest, runs_of

# Snakemake's own `config` holds the same layers, but its --config parser makes every value
# inside a mapping a string; merged_config merges them as Snakemake does and keeps YAML's types
RAW_CONFIG = merged_config(workflow.config_settings.configfiles,
                           workflow.config_settings.config_args,
                           workflow.config_settings.replace_workflow_config)
PIPE = from_mapping(RAW_CONFIG)
PROFILE = PIPE.profile
RUNS = runs_of(PIPE)  # every run of the configuration, built once
SETTINGS = workflow_settings()  # workflow/settings.yaml: resources and module inputs
# Parsing writes nothing: the resolved file is the output of a rule (resolved_config), and a
# finished run whose files no longer verify is unmarked by `python -m lsa pipeline`
# (lsa.launch), before Snakemake plans.


# The interpreter that runs Snakemake runs the jobs too (`python -m lsa`, `python -m papermill`),
# so `.venv/bin/snakemake` works without activating the environment; with --use-conda, the
# job's own environment's `python` (workflow/envs/lsa.yaml: the dependencies without the
# project), which reads lsa from the workflow's folder (PYTHONPATH).
if DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method:
    PYTHON = "PYTHONPATH=" + shlex.quote(workflow.basedir) + " python"
else:
    PYTHON = shlex.quote(sys.executable)
ENV = "../envs/lsa.yaml"  # relative to the rule files


def rel(path):
    """Paths relative to the repository, as Snakemake likes them."""
    return os.path.relpath(path, workflow.basedir)


def job_resources(res):
    """A rule's `resources:` (lsa.pipeline.JobResources)."""
    return res.snakemake()


def resolved_stamp(path, text):
    """results/<profile>/.resolved/<digest of the resolved text>.digest"""
    return os.path.join(os.path.dirname(path), ".resolved", digest(text) + ".digest")


LIGHT = SETTINGS.job(SETTINGS.light)
LOCAL_RULES = []  # rules whose resources say `local` (the Snakefile's localrules)
# an `ancient` input of every job (what the job reads, not what triggers it: a changed setting
# changes the run ids, i.e. the outputs, instead); made by rule resolved_config
RESOLVED = rel(resolved_file(PROFILE))
RESOLVED_TEXT = {RESOLVED: resolved_text(PIPE)}

# mini-full keeps its runs beside mini's (lsa.runs.SHARED_RUNS): a run both profiles configure
# alike is made under mini's resolved file, so that its Snakemake record (inputs, command) is
# the same in both and a finished run is never remade for the other profile
if PROFILE in SHARED_RUNS:
    _SHARED = from_mapping(RAW_CONFIG, profile=SHARED_RUNS[PROFILE])
    SHARED_RESOLVED = rel(resolved_file(_SHARED.profile))
    RESOLVED_TEXT[SHARED_RESOLVED] = resolved_text(_SHARED)
    SHARED_IDS = {run.id for run in runs_of(_SHARED)}
else:
    SHARED_RESOLVED, SHARED_IDS = None, set()


def run_config(run):
    """The resolved file a run's job reads (an input that never triggers it: ancient)."""
    return SHARED_RESOLVED if run.id in SHARED_IDS else RESOLVED


def section_outputs(key):
    return {
        "notebook": rel(paths.executed_notebook(PROFILE, key)),
        "metrics": rel(paths.metrics_file(PROFILE, key)),
    }


def run_output(run):
    """A run's output: the marker written last in its folder."""
    return rel(run.folder / FINISHED)




def modules(names):
    return [f"lsa/{name}" for name in names]


# The Jupyter kernel every section notebook runs in: `lsa`, registered by rule jupyter_kernel
# for the interpreter that runs the jobs (the job environment's under --use-conda) in a folder
# of the workflow's own, found first through JUPYTER_PATH (a user's `lsa` or `python3`
# kernelspec elsewhere is never used)
KERNEL = "lsa"
KERNEL_DIR = ".snakemake/lsa-jupyter"
KERNEL_SPEC = f"{KERNEL_DIR}/share/jupyter/kernels/{KERNEL}/kernel.json"
