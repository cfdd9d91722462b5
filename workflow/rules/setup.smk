# The files every job reads, made by rules so that parsing the workflow writes nothing (a dry
# run leaves results/ as it was):
# - the resolved configuration, results/<profile>/config.yaml (and, for mini-full, mini's,
#   under which the runs both profiles share are made), with a stamp named by the digest of
#   its text beside it: a changed configuration (another digest, and a changed param) rewrites
#   it, an unchanged one leaves it, and its timestamp, alone; the jobs read it as an `ancient`
#   input, so rewriting it reruns only the jobs whose ids or settings changed;
# - the Jupyter kernel `lsa` of the section notebooks (common.smk, KERNEL).

# the light rules (lsa.pipeline.LIGHT_RULES) but the resolved files' rules this profile lacks
# (one per resolved file: RESOLVED_RULES)
if LIGHT.local:
    LOCAL_RULES += [name for name in LIGHT_RULES
                    if name not in RESOLVED_RULES[len(RESOLVED_TEXT):]]

for _i, (_path, _text) in enumerate(RESOLVED_TEXT.items()):

    rule:
        name:
            RESOLVED_RULES[_i]
        output:
            config=_path,
            # the digest of the text the file holds, the only stamp of its folder: a file
            # written from another configuration (or before this rule existed) lacks it
            stamp=resolved_stamp(_path, _text),
        params:
            text=_text,
            stamps=lambda wildcards, output: os.path.dirname(output.stamp),
        log:
            f"logs/{PROFILE}/{RESOLVED_RULES[_i]}.log",
        threads: LIGHT.threads
        resources:
            **job_resources(LIGHT),
        conda:
            ENV
        shell:
            "(find {params.stamps:q} -name '*.digest' ! -path {output.stamp:q} -delete && "
            "printf '%s' {params.text:q} > {output.config:q}.tmp && "
            "mv {output.config:q}.tmp {output.config:q} && touch {output.stamp:q}) > {log:q} 2>&1"


rule jupyter_kernel:
    output:
        KERNEL_SPEC,
    params:
        # <prefix>/share/jupyter/kernels/<name>/kernel.json
        prefix=lambda wildcards, output: str(Path(output[0]).parents[4]),
        name=KERNEL,
    log:
        f"logs/{PROFILE}/jupyter_kernel.log",
    threads: LIGHT.threads
    resources:
        **job_resources(LIGHT),
    conda:
        ENV
    shell:
        f"{PYTHON} -m ipykernel install --prefix {{params.prefix:q}} --name {{params.name}} "
        "--display-name 'Python (lsa)' > {log:q} 2>&1"
