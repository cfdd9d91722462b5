# Helpers shared by the rules.

import os

import yaml

from lsa import paths
from lsa.config import from_mapping

PIPE = from_mapping(config)
PROFILE = PIPE.profile


def rel(path):
    """Paths relative to the repository, as Snakemake likes them."""
    return os.path.relpath(path, workflow.basedir)


def section_outputs(key):
    return {
        "notebook": rel(paths.executed_notebook(PROFILE, key)),
        "metrics": rel(paths.metrics_file(PROFILE, key)),
    }


# lsa modules whose code determines a trained run's numbers (editing one retrains)
BASE_MODULES = [
    f"lsa/{m}"
    for m in (
        "runs.py", "train.py", "misalign.py", "models.py", "data/books.py", "data/tokens.py",
        "extend/__init__.py", "evaluate/perplexity.py",
    )
]
RUN_MODULES = BASE_MODULES + ["lsa/extend/attention.py", "lsa/extend/clex.py"]
BABILONG_MODULES = ["lsa/data/babi.py", "lsa/data/babilong.py", "lsa/evaluate/babilong.py"]
BABILONG_EVAL_MODULES = BABILONG_MODULES + ["lsa/evaluate/babilong_prompts.py"]


def run_output(run_id):
    return rel(paths.results_dir(PROFILE) / "runs" / run_id / "train_summary.json")


def rule_name(name):
    return "".join(c if c.isalnum() else "_" for c in name)


BASE_OUTPUT = run_output(PIPE.base_run_id())
FINETUNE_OUTPUTS = {
    run.name: run_output(PIPE.finetune_run_id(run.name))
    for run in PIPE.settings["finetune"].all_runs()
}
# BABILong, train design (mini, smoke): fine-tuning runs on BABILong samples
BABILONG_OUTPUTS = {
    run.name: run_output(PIPE.babilong_run_id(run.name))
    for run in PIPE.settings["babilong"].all_runs()
}
# BABILong, evaluate design (gpu-small, paper): finished fine-tuning runs evaluated with the
# benchmark's prompts, keyed by the fine-tuning run's name
BABILONG_EVAL_OUTPUTS = {
    run.name: run_output(PIPE.babilong_eval_run_id(run.name)) for run in PIPE.babilong_eval_runs()
}
TRAINING_OUTPUTS = {"finetune": FINETUNE_OUTPUTS, "babilong": BABILONG_OUTPUTS}
# what a section's `uses_runs` reads: for babilong, the runs of whichever design is configured
RUN_OUTPUTS = {
    "finetune": FINETUNE_OUTPUTS,
    "babilong": {**BABILONG_OUTPUTS, **BABILONG_EVAL_OUTPUTS},
}
