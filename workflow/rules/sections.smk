# One rule per section, all made by this loop: the notebook and the lsa modules it reads are
# inputs (editing either reruns it), its settings are params (changing one reruns it),
# the folders of the runs it reads are inputs, the executed notebook and its metrics.json are
# outputs. A notebook receives the resolved configuration (config_file) and the ids of its runs
# (run_ids): it fails when they disagree instead of training inside its own job. papermill gives
# its kernel kernel_start_timeout to start and each cell the job's runtime (workflow/settings.yaml:
# a hung kernel fails the job instead of holding the pipeline); a failed notebook is retried
# once (a kernel that died or did not start in time), then the pipeline stops.

for _key, _spec in PIPE.sections.items():
    _job = SETTINGS.section_job(_key)
    _timeouts = SETTINGS.notebook_timeouts(_key)
    if _job.local:
        LOCAL_RULES.append(f"section_{_key}")

    rule:
        name:
            f"section_{_key}"
        input:
            notebook=f"notebooks/{_spec.notebook}",
            modules=modules(notebook_inputs(paths.NOTEBOOKS / _spec.notebook)),
            config=ancient(RESOLVED),
            kernel=ancient(KERNEL_SPEC),
            needs=[section_outputs(need)["metrics"] for need in _spec.needs],
            runs=[run_output(run) for run in RUNS.used_by(_spec.uses_runs)],
        output:
            **section_outputs(_key),
        params:
            yaml=yaml.safe_dump(notebook_parameters(PIPE, _key), default_flow_style=True,
                                width=10_000).strip(),
            # not passed: the notebook reads them from the resolved file; tracked, so that a
            # changed setting reruns the notebook
            settings=section_settings(PIPE, _key),
        conda:
            ENV
        log:
            f"logs/{PROFILE}/{_key}.log",
        benchmark:
            f"logs/{PROFILE}/benchmarks/section_{_key}.tsv"
        threads: _job.threads
        resources:
            **job_resources(_job),
        retries: 1
        shell:
            f"JUPYTER_PATH={KERNEL_DIR}/share/jupyter "
            f"{PYTHON} -m papermill {{input.notebook:q}} {{output.notebook:q}} -k {KERNEL} "
            f"--start-timeout {_timeouts['start']} "
            f"--execution-timeout {_timeouts['execution']} --no-progress-bar "
            "--log-output -y {params.yaml:q} > {log:q} 2>&1"
