"""The submitting host's check before a cluster executor sends any job (the Snakefile's
``onstart``: it runs where the workflow was parsed and is about to be executed, never inside a
job and never on a dry run). Each problem is one line saying why and what to do; any stops the
workflow before the first ``sbatch``.

- **Interpreter**: under a non-local executor the interpreter's path goes into every job's
  command unquoted, twice upstream (the executor interface's job script and the SLURM jobstep
  plugin's ``srun``; Snakemake issue 3211 is the same defect for local spawned jobs), so a path
  with a space fails every job at once (exit 127). An environment at a path without a space
  works, wherever the repository lives (``make test-cluster`` runs the smoke profile from a
  copy under a folder with a space).
- **Account** (SLURM): on a cluster that keeps accounts (``AccountingStorageType`` other than
  ``accounting_storage/none`` in ``scontrol show config``) every submitted job names its
  account (the ``slurm_account`` resource), or ``--slurm-no-account`` says none: the plugin
  would otherwise guess one from the user's last job.
- **Job states** (SLURM): on a cluster without accounting ``sacct`` fails, and the plugin, which
  logs that failure at debug level only, would wait for the jobs for ever: its status command
  must be ``squeue``.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable, Iterable

NO_ACCOUNTING = "accounting_storage/none"
SLURM = "slurm"
ENV_FIX = ("make the environment at a path without a space (python -m venv ~/lsa-venv; "
           "~/lsa-venv/bin/pip install -c constraints.txt -e '.[test]') and start its "
           "snakemake: the repository may stay where it is")


def interpreter_problem(executor: str, python: str) -> str | None:
    """Why a non-local executor cannot run jobs with the interpreter at ``python``."""
    if not re.search(r"\s", python):
        return None
    return (f"the interpreter's path holds a space ({python!r}): the {executor} executor puts "
            "it into every job's command unquoted (Snakemake's executor interface and SLURM "
            "jobstep plugin; Snakemake issue 3211), so each job would fail at once with exit "
            f"127; {ENV_FIX}")


def accounting_storage(show_config: str) -> str | None:
    """``AccountingStorageType`` in the text of ``scontrol show config``, else None."""
    match = re.search(r"^AccountingStorageType\s*=\s*(\S+)", show_config, re.MULTILINE)
    return match.group(1) if match else None


def cluster_accounting(run: Callable = subprocess.run) -> bool | None:
    """Whether the cluster keeps accounts; None when ``scontrol`` cannot say."""
    try:
        out = run(["scontrol", "show", "config"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    storage = accounting_storage(out.stdout) if out.returncode == 0 else None
    return None if storage is None else storage != NO_ACCOUNTING


def slurm_problems(accounting: bool | None, unset_account: Iterable[str], no_account: bool,
                   status_command: str | None) -> list[str]:
    """What stops SLURM submission: ``accounting`` as ``cluster_accounting`` gives it,
    ``unset_account`` the rules of the jobs to submit without a ``slurm_account``."""
    problems = []
    unset = sorted(set(unset_account))
    if accounting and unset and not no_account:
        problems.append(
            f"this cluster keeps accounts and {len(unset)} rule(s) name none ({unset[0]}, ...):"
            " set yours in profiles/slurm/config.yaml (default-resources: slurm_account: NAME)"
            " or give --default-resources slurm_account=NAME (--slurm-no-account for none)")
    if accounting is False and status_command == "sacct":
        problems.append(
            f"this cluster keeps no accounting ({NO_ACCOUNTING}), so sacct cannot tell when a"
            " job ends and the jobs would be waited for for ever: add "
            "--slurm-status-command squeue")
    return problems


def submission_problems(workflow, python: str = sys.executable,
                        accounting: Callable[[], bool | None] = cluster_accounting) -> list[str]:
    """Every problem of submitting ``workflow``'s jobs (a Snakemake workflow about to execute)
    from this host; none for local execution, a dry run or a job's own Snakemake."""
    if not workflow.is_main_process or workflow.local_exec or workflow.dryrun:
        return []
    executor = workflow.executor_plugin.name
    problems = [p for p in [interpreter_problem(executor, python)] if p]
    if executor == SLURM:
        settings = workflow.executor_settings
        unset = [job.rule.name for job in workflow.dag.needrun_jobs()
                 if not job.is_local and not job.resources.get("slurm_account")]
        problems += slurm_problems(accounting(), unset, settings.no_account,
                                   settings.status_command)
    return problems


def check_submission(workflow) -> None:
    """Stop before any job is submitted when ``submission_problems`` finds one."""
    from snakemake.exceptions import WorkflowError

    problems = submission_problems(workflow)
    if problems:
        raise WorkflowError("lsa: no job was submitted: " + "; and ".join(problems))
