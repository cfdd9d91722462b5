"""A fine-tuning run's stream option (``RunConfig.stream``): ``plain`` trains on the training
books without the inserted copies, ``recurring`` (the default) on the stream the base model saw;
the default keeps every run id, and every run's training-stream CE is measured on the recurring
stream (issue 62's plain-books arms)."""

import dataclasses

import numpy as np
import pytest

from lsa import jobs
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


@pytest.mark.slow  # pretrains the smoke base model
def test_a_plain_run_trains_on_the_books_without_copies_and_is_measured_on_the_recurring(
        out_root, monkeypatch):
    """The stream handed to the trainer is the training books without inserted copies (equal
    to the corpus made with recurrence 0), and lm_metrics gets the recurring corpus."""
    from lsa.data.corpus import load_corpus_for

    pipe = load_config(profile="smoke")
    assert pipe.pretrain.data.recurrence > 0
    run_spec = make_run("pi", 0, 0, stream="plain")
    pipe = dataclasses.replace(pipe, finetune=dataclasses.replace(pipe.finetune,
                                                                  runs=[run_spec]))
    plan = runs_of(pipe)
    jobs.pretrain(pipe, plan.base, progress=False)
    seen = {}

    class Stop(Exception):
        pass

    def fake_train(model, stream, *args, **kwargs):
        seen["train"] = stream.ids
        return {}

    def fake_metrics(pipe, model, corpus, *args):
        seen["measured"] = corpus.streams["train"].ids
        raise Stop

    monkeypatch.setattr("lsa.train.train", fake_train)
    monkeypatch.setattr(jobs, "lm_metrics", fake_metrics)
    with pytest.raises(Stop):
        jobs.finetune(pipe, plan.finetune[run_spec.name], progress=False)
    l_train = pipe.finetune.l_train_of(run_spec)
    plain = load_corpus_for(plan.base.folder, dataclasses.replace(pipe.pretrain.data,
                                                                  recurrence=0.0), l_train)
    recurring = load_corpus_for(plan.base.folder, pipe.pretrain.data, l_train)
    assert np.array_equal(np.asarray(seen["train"]), np.asarray(plain.streams["train"].ids))
    assert np.array_equal(np.asarray(seen["measured"]),
                          np.asarray(recurring.streams["train"].ids))
    assert len(recurring.streams["train"].ids) > len(plain.streams["train"].ids)  # the copies
