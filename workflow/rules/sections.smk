# One rule per section, all made by this loop: the notebook and the lsa modules it uses are
# inputs (editing either reruns it), its parameters are params (changing the config reruns it),
# the executed notebook and its metrics.json are outputs.

for _key, _spec in PIPE.sections.items():

    rule:
        name:
            f"section_{_key}"
        input:
            notebook=f"notebooks/{_spec.notebook}",
            modules=[f"lsa/{module}" for module in _spec.modules],
            needs=[section_outputs(need)["metrics"] for need in _spec.needs],
            runs=[out for kind in _spec.uses_runs for out in RUN_OUTPUTS[kind].values()],
        output:
            **section_outputs(_key),
        params:
            yaml=yaml.safe_dump(PIPE.notebook_parameters(_key), default_flow_style=True,
                                width=10_000).strip(),
        conda:
            "../../environment.yml"
        log:
            f"logs/{PROFILE}/{_key}.log",
        benchmark:
            f"logs/{PROFILE}/benchmarks/section_{_key}.tsv"
        threads: _spec.threads
        resources:
            mem_mb=_spec.mem_mb,
            gpu=_spec.gpu,
        shell:
            "papermill {input.notebook:q} {output.notebook:q} -k python3 --no-progress-bar "
            "--log-output -y {params.yaml:q} > {log:q} 2>&1"
