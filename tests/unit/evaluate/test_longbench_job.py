"""The LongBench-E job (Tables 2-3): its run plan, where it finds the benchmark's files, the
fixture smoke evaluates, and the evaluation end to end on a small model."""

from __future__ import annotations

import json

import pytest

from lsa.config import ConfigError, load_config
from lsa.evaluate import longbench as lb
from lsa.runs import runs_of

pytest.importorskip("rouge")
pytest.importorskip("rapidfuzz")


def test_the_fixture_has_every_bucket_and_reads_as_the_benchmark(tmp_path):
    folder = lb.write_fixture(tmp_path / "lb")
    prompts, maxlen = lb.load_tables(folder)
    assert set(prompts) == set(maxlen) == set(lb.FIXTURE_DATASETS)
    for dataset in lb.FIXTURE_DATASETS:
        rows = lb.load_dataset_file(folder, dataset)
        assert {"0-4k", "8k+"} <= {lb.bucket_of(r["length"]) for r in rows}
        assert all(prompts[dataset].format(**r) for r in rows)


def test_bucket_scores_average_the_datasets_that_have_the_bucket():
    per = {"a": {"0-4k": 10.0, "8k+": 30.0, "overall": 20.0},
           "b": {"0-4k": 50.0, "4-8k": 40.0, "overall": 45.0}}
    assert lb.bucket_scores(per) == {"0-4k": 30.0, "4-8k": 40.0, "8k+": 30.0}
    assert lb.longbench_e_score(per) == 32.5


def test_smoke_plans_one_evaluation_per_named_run_and_mini_none(out_root):
    smoke = runs_of(load_config(profile="smoke"))
    assert list(smoke.longbench) == ["pi_a0_s0", "pi_a0.1_s0"]
    run = smoke.longbench["pi_a0.1_s0"]
    assert run.needs == (smoke.finetune["pi_a0.1_s0"],) and run.id.startswith("longbench_")
    assert run.command == ["longbench", "--run", "pi_a0.1_s0"]
    assert runs_of(load_config(profile="mini")).longbench == {}
    gpu = runs_of(load_config(profile="gpu-small"))
    assert list(gpu.longbench) == gpu.grid  # every grid run
    with pytest.raises(ConfigError, match="longbench.finetune_runs.*no fine-tuning run"):
        runs_of(load_config(profile="smoke", overrides={"profiles": {"smoke": {
            "longbench": {"finetune_runs": ["nope_a0_s0"]}}}}))


def test_a_dataset_the_benchmark_does_not_have_is_refused():
    with pytest.raises(ConfigError, match="longbench.datasets.*'lsht' is not a LongBench-E"):
        load_config(profile="smoke", overrides={"profiles": {"smoke": {
            "longbench": {"datasets": ["lsht"]}}}})


def test_missing_files_are_named_before_any_model_loads(tmp_path, monkeypatch):
    from lsa import paths
    from lsa.jobs import longbench_folder

    monkeypatch.delenv("LSA_DATA_DIR", raising=False)
    monkeypatch.setattr(paths, "CACHE", tmp_path / "cache")  # nothing fetched
    pipe = load_config(profile="gpu-small")
    with pytest.raises(FileNotFoundError, match=r"cache/longbench: .*python -m lsa fetch "
                                                r"longbench"):
        longbench_folder(pipe)
    (tmp_path / "longbench").mkdir()
    (tmp_path / "longbench" / "dataset2prompt.json").write_text("{}")
    monkeypatch.setenv("LSA_DATA_DIR", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="dataset2maxlen.json, qasper_e.jsonl"):
        longbench_folder(pipe)
    fixture = longbench_folder(load_config(profile="smoke"))
    assert (fixture / "qasper_e.jsonl").exists()


def test_a_small_model_is_scored_per_dataset_and_bucket(tmp_path, tokenizer):
    from lsa.models import scratch_llama

    folder = lb.write_fixture(tmp_path / "lb")
    model = scratch_llama(len(tokenizer), 32, 1, 2, 64, 64,
                          eos_token_id=tokenizer.eos_token_id)
    out = lb.evaluate(model, tokenizer, folder, folder, 48, lb.FIXTURE_DATASETS)
    assert set(out["per_dataset"]) == set(lb.FIXTURE_DATASETS)
    for scores in out["per_dataset"].values():
        assert {"0-4k", "8k+", "overall"} <= set(scores)
        assert all(0.0 <= v <= 100.0 for v in scores.values())
    assert out["longbench_e"] == pytest.approx(
        sum(d["overall"] for d in out["per_dataset"].values()) / 3)
    json.dumps(out)  # the job writes it as JSON


class Scripted:
    """A stand-in model whose greedy answer to a prompt is a fixed function of its tokens: the
    number of prompt tokens, as text (so a batched answer is checkable by hand); counts the
    prompts it answered."""

    config = None  # a plain model: padding is safe for it (lsa.evaluate.pads_safely)

    def __init__(self, tokenizer):
        import torch

        self.tokenizer, self.answered = tokenizer, 0
        self.weight = torch.nn.Parameter(torch.zeros(1))

    def parameters(self):
        return iter([self.weight])

    def modules(self):
        return iter([])

    def eval(self):
        return self

    def generate(self, ids, attention_mask, max_new_tokens, **kw):
        import torch

        self.answered += len(ids)
        rows = []
        for mask in attention_mask:
            answer = self.tokenizer(f" {int(mask.sum())}")["input_ids"][:max_new_tokens]
            rows.append(answer + [self.tokenizer.eos_token_id] * (max_new_tokens - len(answer)))
        return torch.cat([ids, torch.tensor(rows)], dim=1)


def test_predictions_are_saved_in_longbench_form_and_reused(tmp_path, tokenizer):
    folder = lb.write_fixture(tmp_path / "lb")
    prompts, _ = lb.load_tables(folder)
    model = Scripted(tokenizer)
    pred = tmp_path / "run" / "pred"
    out = lb.evaluate(model, tokenizer, folder, folder, 48, lb.FIXTURE_DATASETS,
                      pred_dir=pred, batch_size=2)
    assert model.answered == 8  # every sample once, in batches of 2 (left-padded)
    lines = [json.loads(x) for x in (pred / "qasper.jsonl").read_text().splitlines()]
    rows = lb.load_dataset_file(folder, "qasper")
    assert [set(x) for x in lines] == [{"pred", "answers", "all_classes", "length"}] * 3
    assert [x["answers"] for x in lines] == [r["answers"] for r in rows]
    for row, line in zip(rows, lines):  # each answer is its own prompt's length, unpadded
        ids = lb.truncate_middle(tokenizer(prompts["qasper"].format(**row))["input_ids"], 48)
        assert line["pred"].strip() == str(len(ids))  # (fewer tokens than maxlen)
    # a rerun reads them back and generates nothing; a cut last line is made again
    again = lb.evaluate(model, tokenizer, folder, folder, 48, lb.FIXTURE_DATASETS,
                        pred_dir=pred, batch_size=2)
    assert model.answered == 8 and again == out
    text = (pred / "trec.jsonl").read_text()
    (pred / "trec.jsonl").write_text(text[:text.index("\n") + 5])  # line 2 cut mid-way
    cut = lb.evaluate(model, tokenizer, folder, folder, 48, lb.FIXTURE_DATASETS,
                      pred_dir=pred, batch_size=2)
    assert model.answered == 9 and cut == out
    # predictions of another data file are refused, naming the line
    (pred / "qasper.jsonl").write_text(json.dumps({"pred": "x", "answers": ["no"]}) + "\n")
    from lsa.files import InputFormatError

    with pytest.raises(InputFormatError, match="qasper.jsonl.*line 1"):
        lb.evaluate(model, tokenizer, folder, folder, 48, ["qasper"], pred_dir=pred)


def test_batched_greedy_answers_equal_one_at_a_time(tmp_path, tokenizer):
    from lsa.models import scratch_llama

    folder = lb.write_fixture(tmp_path / "lb")
    model = scratch_llama(len(tokenizer), 32, 1, 2, 64, 64,
                          eos_token_id=tokenizer.eos_token_id)
    one = lb.evaluate(model, tokenizer, folder, folder, 48, lb.FIXTURE_DATASETS,
                      pred_dir=tmp_path / "one")
    four = lb.evaluate(model, tokenizer, folder, folder, 48, lb.FIXTURE_DATASETS,
                       pred_dir=tmp_path / "four", batch_size=4)
    assert one == four
    for d in lb.FIXTURE_DATASETS:
        assert (tmp_path / "one" / f"{d}.jsonl").read_text() == \
            (tmp_path / "four" / f"{d}.jsonl").read_text()
