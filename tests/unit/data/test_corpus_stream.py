"""A fine-tuning run's stream option (``RunConfig.stream``): ``plain`` trains on the training
books without the inserted copies, ``recurring`` (the default) on the stream the base model
saw; the default keeps every run id (a plain run end to end:
tests/e2e/test_stream_plain_run.py)."""

import dataclasses

import pytest

from lsa.config import ConfigError, RunConfig, load_config
from lsa.runs import make_run, runs_of


def test_the_default_stream_keeps_the_identity_and_plain_is_a_run_of_its_own():
    recurring, plain = make_run("eabf", 0, 3, ce_on="both"), make_run("eabf", 0, 3,
                                                                        ce_on="both",
                                                                        stream="plain")
    assert recurring.name == "eabf_a0_s3_ceboth" and plain.name == "eabf_a0_s3_ceboth_plain"
    assert make_run("eabf", 1.0, 3, divergence="jeffreys", stream="plain",
                    base_seed=4).name == "eabf_a1_s3_jeffreys_plain_b4"
    pipe = load_config(profile="smoke")
    runs = [dataclasses.replace(recurring, name=n) for n in ("r",)] + [plain]
    pipe = dataclasses.replace(pipe, finetune=dataclasses.replace(pipe.finetune, runs=runs))
    plan = runs_of(pipe)
    assert "stream" not in plan.finetune["r"].identity["run"]  # ids from before the option
    assert plan.finetune[plain.name].identity["run"]["stream"] == "plain"
    with pytest.raises(ConfigError, match="stream"):
        RunConfig.from_dict({"name": "x", "stream": "copies"})


