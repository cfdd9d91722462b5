# Training runs are jobs of their own (python -m lsa ...); their run folder is named by a digest
# of their configuration, so a changed configuration is a new run and a finished one is reused.


rule base_model:
    input:
        RUN_MODULES,
    output:
        BASE_OUTPUT,
    params:
        profile=PROFILE,
    log:
        f"logs/{PROFILE}/base_model.log",
    threads: PIPE.settings["pretrain"].threads
    resources:
        mem_mb=4000,
        gpu=int(PIPE.settings["pretrain"].gpu),
    conda:
        "../../environment.yml"
    shell:
        "python -m lsa pretrain --profile {params.profile} --threads {threads} --no-progress "
        "> {log:q} 2>&1"


for _name, _output in FINETUNE_OUTPUTS.items():

    rule:
        name:
            f"finetune_{rule_name(_name)}"
        input:
            RUN_MODULES,
            base=BASE_OUTPUT,
        output:
            _output,
        params:
            profile=PROFILE,
            run=_name,
        log:
            f"logs/{PROFILE}/finetune_{_name}.log",
        threads: PIPE.settings["finetune"].threads
        resources:
            mem_mb=4000,
            gpu=int(PIPE.settings["finetune"].gpu),
        conda:
            "../../environment.yml"
        shell:
            "python -m lsa finetune --profile {params.profile} --run {params.run:q} "
            "--threads {threads} --no-progress > {log:q} 2>&1"
