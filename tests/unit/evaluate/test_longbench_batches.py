"""LongBench-E's answers do not depend on how the prompts are batched (lsa/evaluate/longbench.py,
``lsa.evaluate.pads_safely``): for a tiny scratch model of every context-extension method, built
as ``lsa.models.build_for_run`` builds it (the method's RoPE and attention, CLEX's rotary
module, LongQLoRA's LoRA adapters), the greedy answers in batches of 1, 3 and 8, in two orders
of the prompts, are the same. The prompts differ in length (so a batch is padded) and run past
the base window (so dynamic NTK and CLEX change their scale with the longest row; transformers'
dynamic NTK also keeps the scale of the longest prompt it has seen, which one prompt at a time
in the other order would expose)."""

import json

import pytest
import torch

from lsa.evaluate import longbench as lb
from lsa.evaluate import pads_safely

pytest.importorskip("rouge")
pytest.importorskip("rapidfuzz")

WORDS = "the cat sat on the mat and a dog ran in the park".split()
BASE, TARGET, BUDGET = 32, 64, 48  # base window, extended window, prompt budget (tokens)
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"  # scripts/gpu_check.sh: on the GPU
SAFE = {"pi": True, "yarn": True, "eabf": False, "clex": False, "longqlora": False,
        "dynamic": False}


def method_model(tokenizer, method, folder):
    """A tiny scratch model extended by ``method`` at TARGET, as build_for_run prepares it."""
    from lsa.extend import load_for_method
    from lsa.extend.clex import install_clex
    from lsa.models import scratch_llama
    from lsa.train import LoraSettings, apply_lora

    base = scratch_llama(len(tokenizer), 32, 2, 2, 64, BASE, eos_token_id=tokenizer.eos_token_id,
                         seed=1)
    with torch.no_grad():  # weights far from their small initial ones: answers that vary
        gen = torch.Generator().manual_seed(1)
        for p in base.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * 0.3)
    base.save_pretrained(folder)
    model = load_for_method(str(folder), method, BASE, TARGET)
    if method == "clex":
        install_clex(model, BASE, TARGET, hidden=8)
    if method == "longqlora":
        model = apply_lora(model, LoraSettings(r=4, alpha=16, dropout=0.0))
        with torch.no_grad():  # adapters that change the outputs (peft starts them at zero)
            for name, p in model.named_parameters():
                if "lora_B" in name:
                    p.normal_(0, 0.5, generator=torch.Generator().manual_seed(2))
    return model.to(DEVICE).eval()


def write_data(folder, reverse: bool):
    """One LongBench-format dataset of nine prompts of different lengths (two over the budget,
    cut in the middle), in order or reversed."""
    folder.mkdir()
    (folder / "dataset2prompt.json").write_text(json.dumps({"qasper": "{context} {input}"}))
    (folder / "dataset2maxlen.json").write_text(json.dumps({"qasper": 4}))
    rows = [{"input": "the dog?", "context": " ".join(WORDS[(i + j) % len(WORDS)]
                                                      for j in range(2 + 5 * i)),
             "answers": [f"answer {i}"], "length": 100 * i, "all_classes": None}
            for i in range(9)]
    (folder / "qasper_e.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in (rows[::-1] if reverse else rows)))
    return folder


def answers(model, tokenizer, folder, batch_size, pred):
    lb.evaluate(model, tokenizer, folder, folder, BUDGET, ["qasper"], pred_dir=pred,
                batch_size=batch_size)
    lines = [json.loads(x) for x in (pred / "qasper.jsonl").read_text().splitlines()]
    return {line["answers"][0]: line["pred"] for line in lines}


def test_the_plan_knows_which_methods_are_decoded_alone():
    from lsa.plan import DECODED_ALONE

    assert DECODED_ALONE == {m for m, safe in SAFE.items() if not safe}


@pytest.mark.parametrize("method", list(SAFE))
def test_answers_do_not_depend_on_the_batch_or_the_order(method, tokenizer, tmp_path):
    model = method_model(tokenizer, method, tmp_path / "model")
    assert pads_safely(model) is SAFE[method]
    folders = [write_data(tmp_path / f"data{r}", reverse=r) for r in (0, 1)]
    lengths = {len(lb.truncate_middle(tokenizer(lb.load_tables(folders[0])[0]["qasper"].format(
        **row))["input_ids"], BUDGET)) for row in lb.load_dataset_file(folders[0], "qasper")}
    assert len(lengths) >= 7 and max(lengths) == BUDGET > BASE  # padded, past the base window
    alone = answers(model, tokenizer, folders[0], 1, tmp_path / "pred-1-0")
    assert len(alone) == 9 and len(set(alone.values())) >= 5  # answers that differ
    for batch_size in (1, 3, 8):
        for r, folder in enumerate(folders):
            got = answers(model, tokenizer, folder, batch_size, tmp_path / f"pred-{batch_size}-{r}")
            assert got == alone, (method, batch_size, r)


@pytest.mark.parametrize("method", [m for m, safe in SAFE.items() if not safe])
def test_padding_would_change_the_answers_of_a_model_it_is_not_safe_for(method, tokenizer,
                                                                         tmp_path, monkeypatch):
    """What the rule guards against: such a model decoded in left-padded batches answers some
    prompts otherwise."""
    model = method_model(tokenizer, method, tmp_path / "model")
    folder = write_data(tmp_path / "data", reverse=False)
    alone = answers(model, tokenizer, folder, 1, tmp_path / "alone")
    monkeypatch.setattr(lb, "pads_safely", lambda model: True)
    assert answers(model, tokenizer, folder, 8, tmp_path / "batched") != alone
