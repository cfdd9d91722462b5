# Helpers shared by the rules. The merged `config` (config/config.yaml + --configfile +
# --config) is validated once, resolved for the chosen profile and written to
# results/<profile>/config.yaml; every job and notebook reads that file, so a job computes the
# run folder the rules expect (each job also checks it: --expect-id).

import os
import shlex
import sys

import yaml
from snakemake.settings.types import DeploymentMethod

from lsa.config import from_mapping
from lsa.pipeline import (notebook_parameters, section_settings, unmark_broken_runs,
                          workflow_settings, write_resolved)
from lsa import paths
from lsa.imports import notebook_inputs
from lsa.runs import FINISHED, SHARED_RUNS, runs_of

PIPE = from_mapping(config)
PROFILE = PIPE.profile
RUNS = runs_of(PIPE)  # every run of the configuration, built once
SETTINGS = workflow_settings()  # workflow/settings.yaml: resources and module inputs

# a run marked finished whose files no longer verify is not finished: made again
for _run, _problems in unmark_broken_runs(RUNS):
    print(f"lsa: {_run.describe()} ({_run.id}) will be made again, its files do not verify: "
          + "; ".join(_problems), file=sys.stderr)


# The interpreter that runs Snakemake runs the jobs too (`python -m lsa`, `python -m papermill`),
# so `.venv/bin/snakemake` works without activating the environment; with --use-conda, the
# job's own environment's `python`.
PYTHON = ("python" if DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method
          else shlex.quote(sys.executable))


def rel(path):
    """Paths relative to the repository, as Snakemake likes them."""
    return os.path.relpath(path, workflow.basedir)


# rewritten only when its content changes; an `ancient` input of every job (what the job reads,
# not what triggers it: a changed setting changes the run ids, i.e. the outputs, instead)
RESOLVED = rel(write_resolved(PIPE))

# mini-full keeps its runs beside mini's (lsa.runs.SHARED_RUNS): a run both profiles configure
# alike is made under mini's resolved file, so that its Snakemake record (inputs, command) is
# the same in both and a finished run is never remade for the other profile
if PROFILE in SHARED_RUNS:
    _SHARED = from_mapping(config, profile=SHARED_RUNS[PROFILE])
    SHARED_RESOLVED = rel(write_resolved(_SHARED))
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


def rule_name(run):
    if run.kind == "base":
        return run.job
    return run.kind.replace("-", "_") + "_" + "".join(c if c.isalnum() else "_" for c in run.name)


def modules(names):
    return [f"lsa/{name}" for name in names]
