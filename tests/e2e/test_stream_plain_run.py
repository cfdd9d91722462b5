"""A plain-stream fine-tuning run end to end: it trains on the training books without the
inserted copies and is measured on the recurring stream (issue 62's plain-books arms)."""

import dataclasses

import numpy as np
import pytest
from support import copy_made_runs

from lsa import jobs
from lsa.config import load_config
from lsa.runs import make_run, runs_of


def test_a_plain_run_trains_on_the_books_without_copies_and_is_measured_on_the_recurring(
        smoke_pipeline, out_root, monkeypatch):
    """The stream handed to the trainer is the training books without inserted copies (equal
    to the corpus made with recurrence 0), and lm_metrics gets the recurring corpus; the base
    model is the smoke pipeline's."""
    from lsa.data.corpus import load_corpus_for

    pipe = load_config(profile="smoke")
    assert pipe.pretrain.data.recurrence > 0
    run_spec = make_run("pi", 0, 0, stream="plain")
    pipe = dataclasses.replace(pipe, finetune=dataclasses.replace(pipe.finetune,
                                                                  runs=[run_spec]))
    plan = runs_of(pipe)
    assert copy_made_runs(only={"base"}) == [plan.base.id]
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
