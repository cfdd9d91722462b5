"""lsa: each paper section is a parameterized notebook run by papermill.

    snakemake --cores all                          # default profile (mini)
    snakemake --cores all --config profile=smoke   # smoke | mini | gpu-small | paper

The configuration is validated by lsa/config.py before any rule runs.
"""


configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/runs.smk"
include: "workflow/rules/sections.smk"
include: "workflow/rules/report.smk"


rule all:
    input:
        [section_outputs(key)["metrics"] for key in PIPE.sections],
        BASE_OUTPUT,
        [out for outputs in RUN_OUTPUTS.values() for out in outputs.values()],
        rules.report_figures.output,
    default_target: True
