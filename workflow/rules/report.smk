# What `snakemake --report` (make report) shows beside the runtimes: each PNG that the section
# notebooks saved, the replication report's claims table and every executed notebook as HTML,
# copied into folders marked as report outputs.


rule report_files:
    input:
        metrics=[section_outputs(key)["metrics"] for key in PIPE.sections],
        notebooks=[section_outputs(key)["notebook"] for key in PIPE.sections],
    output:
        figures=report(
            directory(rel(paths.results_dir(PROFILE) / "report_figures")),
            patterns=["{name}.png"],
            category="Figures",
            caption="../report/figures.rst",
        ),
        claims=report(
            rel(paths.results_dir(PROFILE) / "report_claims" / "claims.csv"),
            category="Claims",
            caption="../report/claims.rst",
        ),
        notebooks=report(
            directory(rel(paths.results_dir(PROFILE) / "report_notebooks")),
            patterns=["{name}.html"],
            category="Notebooks",
            caption="../report/notebooks.rst",
        ),
    params:
        figures=rel(paths.figures_dir(PROFILE)),
        # the report section's claims table (the section whose settings part is `report`; a
        # study profile has none: its one section's)
        claims=rel(paths.section_dir(PROFILE, next(
            (k for k, s in PIPE.sections.items() if s.config == "report"),
            next(iter(PIPE.sections)))) / "claims.csv"),
    log:
        f"logs/{PROFILE}/report_files.log",
    threads: LIGHT.threads
    resources:
        **job_resources(LIGHT),
    conda:
        ENV
    shell:
        "(mkdir -p {output.figures:q} {output.notebooks:q}"
        " && cp {params.figures:q}/*.png {output.figures:q}/"
        " && cp {params.claims:q} {output.claims:q}"
        f" && {PYTHON} -m nbconvert --to html --output-dir {{output.notebooks:q}}"
        " {input.notebooks:q}) > {log:q} 2>&1"
