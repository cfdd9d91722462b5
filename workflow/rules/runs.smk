# Training runs are jobs of their own (python -m lsa ...); their run folder is named by a digest
# of their configuration, so a changed configuration is a new run and a finished one is reused.


rule base_model:
    input:
        BASE_MODULES,
    output:
        BASE_OUTPUT,
    params:
        profile=PROFILE,
    log:
        f"logs/{PROFILE}/base_model.log",
    benchmark:
        f"logs/{PROFILE}/benchmarks/base_model.tsv"
    threads: PIPE.settings["pretrain"].threads
    resources:
        mem_mb=4000,
        gpu=int(PIPE.settings["pretrain"].gpu),
    conda:
        "../../environment.yml"
    shell:
        "python -m lsa pretrain --profile {params.profile} --threads {threads} --no-progress "
        "> {log:q} 2>&1"


# one rule per training run: fine-tuning (python -m lsa finetune) and BABILong, train design
# (python -m lsa babilong)
for _kind, _outputs in TRAINING_OUTPUTS.items():
    for _name, _output in _outputs.items():

        rule:
            name:
                f"{_kind}_{rule_name(_name)}"
            input:
                RUN_MODULES + (BABILONG_MODULES if _kind == "babilong" else []),
                base=BASE_OUTPUT,
            output:
                _output,
            params:
                profile=PROFILE,
                kind=_kind,
                run=_name,
            log:
                f"logs/{PROFILE}/{_kind}_{_name}.log",
            benchmark:
                f"logs/{PROFILE}/benchmarks/{_kind}_{_name}.tsv"
            threads: PIPE.settings[_kind].threads
            resources:
                mem_mb=4000,
                gpu=int(PIPE.settings[_kind].gpu),
            conda:
                "../../environment.yml"
            shell:
                "python -m lsa {params.kind} --profile {params.profile} --run {params.run:q} "
                "--threads {threads} --no-progress > {log:q} 2>&1"


# BABILong, evaluate design: one rule per evaluated fine-tuning run, whose folder is its input
for _name, _output in BABILONG_EVAL_OUTPUTS.items():

    rule:
        name:
            f"babilong_eval_{rule_name(_name)}"
        input:
            RUN_MODULES + BABILONG_EVAL_MODULES,
            finetuned=FINETUNE_OUTPUTS[_name],
        output:
            _output,
        params:
            profile=PROFILE,
            run=_name,
        log:
            f"logs/{PROFILE}/babilong-eval_{_name}.log",
        benchmark:
            f"logs/{PROFILE}/benchmarks/babilong-eval_{_name}.tsv"
        threads: PIPE.settings["babilong"].threads
        resources:
            mem_mb=4000,
            gpu=int(PIPE.settings["babilong"].gpu),
        conda:
            "../../environment.yml"
        shell:
            "python -m lsa babilong-eval --profile {params.profile} --run {params.run:q} "
            "--threads {threads} --no-progress > {log:q} 2>&1"
