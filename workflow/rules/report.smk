# The figures of the profile, gathered for `snakemake --report` (make report): each PNG that the
# section notebooks saved is copied into one folder marked as a report output, so the HTML report
# shows the pipeline's own figures beside its runtimes.


rule report_figures:
    input:
        [section_outputs(key)["metrics"] for key in PIPE.sections],
    output:
        report(
            directory(rel(paths.results_dir(PROFILE) / "report_figures")),
            patterns=["{name}.png"],
            category="Figures",
            caption="../report/figures.rst",
        ),
    params:
        figures=rel(paths.figures_dir(PROFILE)),
    log:
        f"logs/{PROFILE}/report_figures.log",
    threads: LIGHT.threads
    resources:
        **job_resources(LIGHT),
    conda:
        ENV
    shell:
        "(mkdir -p {output:q} && cp {params.figures:q}/*.png {output:q}/) > {log:q} 2>&1"
