# One rule per run (lsa.runs): the base model (python -m lsa pretrain), each fine-tuning run
# (finetune), each BABILong run of the train design (babilong) and each evaluation of the
# evaluate design (babilong-eval). A run's folder is named by a digest of its configuration, so a
# changed configuration is a new run and a finished one is reused. Its inputs are the lsa modules
# that determine its numbers (workflow/settings.yaml) and the folders of the runs it reads; its
# resources (threads, host memory, GPUs, runtime, SLURM partition) come from the same file.
# The data files it reads are inputs too (lsa.preflight.data_files).

for _run in RUNS:
    _resources = SETTINGS.run_job(PROFILE, _run)

    rule:
        name:
            rule_name(_run)
        input:
            modules(SETTINGS.modules_of(_run.kind)),
            config=ancient(run_config(_run)),
            needs=[run_output(need) for need in _run.needs],
            # the benchmark files the job reads (LongBench-E, BABILong's prompts.py): a
            # missing one stops Snakemake when it builds the DAG (python -m lsa fetch ...)
            data=data_files(PIPE, _run.kind),
        output:
            run_output(_run),
        params:
            command=_run.command,
            run_id=_run.id,
        log:
            f"logs/{PROFILE}/{_run.job}.log",
        benchmark:
            f"logs/{PROFILE}/benchmarks/{_run.job}.tsv"
        threads: _resources.threads
        # a base model is the job its profile's runs wait for: started first (settings.yaml)
        priority: 1 if _run.kind == "base" else 0
        resources:
            **job_resources(_resources),
        conda:
            ENV
        shell:
            # unchanged on purpose (a changed command reruns, i.e. retrains, every run): the
            # job claims the GPUs its resources give it (lsa.devices; workflow/settings.yaml)
            # and starts a run of several processes through `accelerate launch` itself
            f"{PYTHON} -m lsa {{params.command}} --config-file {{input.config:q}} "
            "--expect-id {params.run_id} --threads {threads} --no-progress > {log:q} 2>&1"
