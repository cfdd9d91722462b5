"""Which GPUs a run job uses, and how a multi-process run is started (no torch).

Snakemake counts GPUs (the ``gpu`` resource: at most ``--resources gpu=N`` at once) but does
not say *which* device a job gets, so on one machine with several GPUs every job would take
``cuda:0``. A run job therefore claims its GPUs itself before CUDA starts (``claim_gpus``): as
many as its ``gpu`` resource in ``workflow/settings.yaml`` (``python -m lsa finetune ...
--gpus N`` by hand; the rules' commands stay as they were, since a changed command reruns,
i.e. retrains, every run), one lock file per device under ``LOCK_DIR`` (``fcntl.flock``, the
first free ones), and sets ``CUDA_VISIBLE_DEVICES`` to them. With no GPU visible (a CPU
machine) nothing is claimed. The locks are held for the job's life and released by the
kernel when the process ends, however it ends: a killed job frees its GPU for the rerun.
Under a scheduler (``SLURM_JOB_ID`` set) nothing is claimed: SLURM sets
``CUDA_VISIBLE_DEVICES`` to the job's own GPUs.

A run with ``processes`` > 1 (``lsa.config.RunConfig``) is started again through
``accelerate launch --config_file workflow/accelerate/fsdp.yaml --num_processes P``
(``accelerate_command``) by the job, after the claim: each process takes one of the claimed
GPUs, and the job waits for them.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import sys
import time
from pathlib import Path

from lsa import paths

ENV_LOCKS = "LSA_GPU_LOCKS"
LOCK_DIR = Path("/tmp") / f"lsa-gpu-locks-{os.getuid()}"  # per machine: the devices are
ACCELERATE_CONFIG = paths.ROOT / "workflow" / "accelerate" / "fsdp.yaml"
LAUNCHED_ENV = "WORLD_SIZE"  # set by accelerate launch in each process it starts


class GpuClaimError(RuntimeError):
    """Fewer free GPUs than a job asks for."""


def lock_dir() -> Path:
    return Path(os.environ.get(ENV_LOCKS) or LOCK_DIR)


def visible_gpus(env: dict[str, str] | None = None) -> list[str]:
    """The devices a job may claim: ``CUDA_VISIBLE_DEVICES`` when set, else every NVIDIA GPU
    of the machine (``/proc/driver/nvidia/gpus``; none without the driver)."""
    env = os.environ if env is None else env
    if env.get("CUDA_VISIBLE_DEVICES") not in (None, ""):
        return [d.strip() for d in env["CUDA_VISIBLE_DEVICES"].split(",") if d.strip()]
    folder = Path("/proc/driver/nvidia/gpus")
    count = len(list(folder.iterdir())) if folder.is_dir() else 0
    return [str(i) for i in range(count)]


class GpuClaim:
    """Devices held by this process (their locks open) until ``release`` or its end."""

    def __init__(self, devices: list[str], handles: list):
        self.devices, self._handles = devices, handles

    def release(self) -> None:
        for handle in self._handles:
            handle.close()
        self._handles = []


def claim_gpus(n: int, devices: list[str] | None = None, wait_s: float | None = 600.0,
               poll_s: float = 1.0) -> GpuClaim:
    """Lock ``n`` of ``devices`` (default ``visible_gpus()``), the first free ones; waits up
    to ``wait_s`` (None: as long as it takes) for a device another job still holds
    (Snakemake's ``gpu`` count keeps that short when it knows the machine's GPUs), then fails
    with a message naming the devices."""
    devices = visible_gpus() if devices is None else devices
    if n > len(devices):
        raise GpuClaimError(f"the job asks for {n} GPUs, {len(devices)} are visible "
                            f"({','.join(devices) or 'none'}): lower the job's gpu resource "
                            "or the run's processes")
    folder = lock_dir()
    folder.mkdir(parents=True, exist_ok=True)
    deadline = None if wait_s is None else time.monotonic() + wait_s
    told = False
    while True:
        held = []
        for device in devices:
            handle = open(folder / f"gpu{device}.lock", "a+")  # noqa: SIM115 (held open)
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                handle.close()
                continue
            held.append((device, handle))
            if len(held) == n:
                return GpuClaim([d for d, _ in held], [h for _, h in held])
        for _, handle in held:
            handle.close()
        if deadline is not None and time.monotonic() > deadline:
            raise GpuClaimError(f"no {n} free GPUs among {','.join(devices)} after {wait_s:.0f}"
                                f" s (locks in {folder}): another process holds them")
        if not told:
            print(f"lsa: waiting for {n} free GPUs among {','.join(devices)} (other jobs hold "
                  "them; give Snakemake the machine's count: --resources gpu=N)", flush=True)
            told = True
        time.sleep(poll_s)


def scheduler_pins_gpus(env: dict[str, str] | None = None) -> bool:
    """Whether a scheduler chose this job's GPUs already (SLURM: ``CUDA_VISIBLE_DEVICES``)."""
    env = os.environ if env is None else env
    return bool(env.get("SLURM_JOB_ID"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def accelerate_command(processes: int, job_argv: list[str], config: Path = ACCELERATE_CONFIG,
                       port: int | None = None) -> list[str]:
    """``accelerate launch`` of ``python -m lsa JOB_ARGV`` with ``processes`` processes (one
    per claimed GPU) and the sharded full fine-tuning config; a port of its own, so that two
    multi-process jobs on one machine do not meet."""
    return [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(config),
            "--num_processes", str(processes), "--num_machines", "1",
            "--main_process_port", str(port or free_port()), "-m", "lsa", *job_argv]


def per_process_optim(optim, processes: int):
    """``optim`` (``lsa.config.OptimConfig``) for each of ``processes`` processes: the
    configured ``grad_accum`` counts the micro-batches of all of them (a multiple of
    ``processes``: ``lsa.config.FinetuneConfig``), so ``batch_size x grad_accum`` sequences
    make one optimizer step whatever the process count."""
    from dataclasses import replace

    if optim.grad_accum % processes:
        raise ValueError(f"grad_accum = {optim.grad_accum} is not a multiple of {processes} "
                         "processes")
    return replace(optim, grad_accum=optim.grad_accum // processes)


def per_process_pipe(pipe, run):
    """The configuration one process of ``run`` trains with (``per_process_optim`` on the
    fine-tuning optimizer; the run's identity, computed from the whole configuration, is
    untouched). Done here, by the command line, so that ``lsa.jobs`` (an input of every run)
    stays as it is."""
    import copy

    if run.processes == 1:
        return pipe
    finetune = copy.copy(pipe.finetune)  # not re-validated: grad_accum is now per process
    finetune.optim = per_process_optim(pipe.finetune.optim, run.processes)
    each = copy.copy(pipe)
    each.finetune = finetune
    return each


@contextlib.contextmanager
def main_process_writes(run):
    """Inside a multi-process run, only the main process writes the run's metrics and marks it
    finished (``lsa.jobs`` writes them in every process otherwise, and the marker removes the
    checkpoint): the others skip both; all wait for each other at the end, so the marker is
    written once every process is done."""
    if run.processes == 1:
        yield
        return
    import torch
    from accelerate import PartialState

    from lsa import jobs

    # the process group lsa.train's Accelerator joins (a shared state: made here first, it
    # must be made the same way, gloo on a machine without CUDA)
    state = PartialState(cpu=not torch.cuda.is_available())
    saved = jobs.save_metrics, jobs.mark_finished
    if not state.is_main_process:
        jobs.save_metrics = jobs.mark_finished = lambda *args, **kwargs: None
    try:
        yield
    finally:
        jobs.save_metrics, jobs.mark_finished = saved
    state.wait_for_everyone()


def is_launched_worker(env: dict[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    return LAUNCHED_ENV in env
