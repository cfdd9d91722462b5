"""lsa: each paper section is a parameterized notebook run by papermill.

    snakemake --cores all                          # default profile (mini)
    snakemake --cores all --config profile=smoke   # smoke | mini | gpu-small | paper
    snakemake --cores all --config profile=smoke seed=1   # or --configfile mine.yaml

The merged configuration is validated by lsa/config.py before any rule runs and written,
resolved, to results/<profile>/config.yaml by a rule (parsing writes nothing): every job and
notebook reads that file. Where jobs run, with which resources, and which modules are their
inputs: workflow/settings.yaml.
"""


from lsa.cluster import check_submission


configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/setup.smk"
include: "workflow/rules/runs.smk"
include: "workflow/rules/sections.smk"
include: "workflow/rules/report.smk"


# light jobs stay on the submitting host under a cluster executor: those whose resources say
# `local` in workflow/settings.yaml (LOCAL_RULES: the bookkeeping rules, the report notebook)
localrules:
    all,


workflow.localrules(*LOCAL_RULES)


# under a cluster executor, on the submitting host before its first job (never inside a job, never
# on a dry run): an interpreter path the jobs can run, an account where the cluster keeps
# accounts, a status command that sees jobs end (lsa/cluster.py); each problem is one line
onstart:
    check_submission(workflow)


rule all:
    input:
        [section_outputs(key)["metrics"] for key in PIPE.sections],
        [run_output(run) for run in RUNS],
        rules.report_files.output,
        # the stamps of the resolved files: a file from another configuration is rewritten
        # (what the jobs read is the file itself, an ancient input: common.smk)
        [resolved_stamp(path, text) for path, text in RESOLVED_TEXT.items()],
    default_target: True
