"""Perplexity, CLEX protocol: every length scores the same token span, chunks stay inside one
book, token-weighted mean NLL (hand-computed on a toy bigram model)."""

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from lsa.config import ConfigError, FinetuneConfig
from lsa.data.tokens import TokenStream, train_tokenizer
from lsa.evaluate.perplexity import perplexity
from lsa.models import scratch_llama


class Bigram(torch.nn.Module):
    """Next token from the current one only: the same token with probability 1/2, each of the
    other ``vocab - 1`` tokens 1 / (2 (vocab - 1)). Records every batch it is fed."""

    def __init__(self, vocab: int):
        super().__init__()
        table = torch.full((vocab, vocab), math.log(1 / (2 * (vocab - 1))))
        table.fill_diagonal_(math.log(1 / 2))
        self.table = torch.nn.Parameter(table, requires_grad=False)
        self.seen: list[torch.Tensor] = []

    def forward(self, input_ids):
        self.seen.append(input_ids.clone())
        return SimpleNamespace(logits=self.table[input_ids])

    def fed(self, length: int) -> torch.Tensor:
        """Every chunk of ``length`` tokens it was fed, in order, ``(n, length)``."""
        return torch.cat([x for x in self.seen if x.shape[1] == length])


def test_every_length_scores_the_same_span():
    ids = np.arange(1, 201, dtype=np.int32)  # distinct tokens: a chunk says where it lies
    model = Bigram(201)
    out = perplexity(model, TokenStream(ids, "t"), [4, 8, 16], max_chunks=3, batch_size=2)
    for length, n in ((4, 12), (8, 6), (16, 3)):
        fed = model.fed(length)
        assert fed.shape == (n, length)  # max_chunks counts chunks of the longest length
        assert torch.equal(fed.flatten(), torch.arange(1, 49))  # the first 3 x 16 tokens
        assert out[length]["chunks"] == n and out[length]["tokens"] == n * (length - 1)


def test_perplexity_by_hand_on_a_toy_model():
    # EOS = 0; book 1: 1 1 2 2 3 3 1 1 EOS, book 2: 1 2 3 1 EOS. Blocks of 4 (the longest
    # length) from each book's start: [1 1 2 2] [3 3 1 1] | [1 2 3 1]; book 1's EOS is a
    # remainder. Same token: -ln(1/2); other: -ln(1/6) (vocab 4).
    ids = np.array([1, 1, 2, 2, 3, 3, 1, 1, 0, 1, 2, 3, 1, 0], dtype=np.uint16)
    stream = TokenStream(ids, "toy", eos_id=0)
    same, other = math.log(2), math.log(6)
    got = perplexity(Bigram(4), stream, [2, 4])
    # L = 4: s o s | s o s | o o o; L = 2: [11][22][33][11][12][31]: s s s s o o
    assert got[4]["nll"] == pytest.approx((4 * same + 5 * other) / 9)
    assert got[2]["nll"] == pytest.approx((4 * same + 2 * other) / 6)
    assert got[4]["ppl"] == pytest.approx(math.exp((4 * same + 5 * other) / 9))
    assert (got[4]["tokens"], got[4]["chunks"], got[2]["tokens"], got[2]["chunks"]) == (9, 3,
                                                                                         6, 6)
    capped = perplexity(Bigram(4), stream, [2, 4], max_chunks=2)  # book 1's two blocks only
    assert capped[4]["nll"] == pytest.approx((4 * same + 2 * other) / 6)
    assert capped[2]["ppl"] == pytest.approx(2.0)
    # beyond 2: the targets at positions 2 and 3 of each 4-chunk (context longer than 2):
    # [1 1 2 2] -> o s, [3 3 1 1] -> o s, [1 2 3 1] -> o o; none at L = 2
    far = perplexity(Bigram(4), stream, [2, 4], beyond=2)
    assert far[4]["nll_beyond"] == pytest.approx((2 * same + 4 * other) / 6)
    assert far[4]["tokens_beyond"] == 6 and "nll_beyond" not in far[2]
    assert far[4]["nll"] == got[4]["nll"]


def test_no_chunk_crosses_a_book(tmp_path):
    tokenizer = train_tokenizer(["the cat sat on the mat. " * 50, "a dog ran in the park! " * 50],
                                300, tmp_path)
    books = {"a": "the cat sat on the mat. " * 9, "b": "a dog ran. " * 3,
             "c": "the park! " * 20}
    stream = TokenStream.build(tokenizer, books, tmp_path, "test")
    eos = tokenizer.convert_tokens_to_ids(tokenizer.eos_token)
    ends = np.flatnonzero(stream.ids == eos) + 1
    sizes = np.diff(np.concatenate([[0], ends]))
    assert len(sizes) == 3 and (sizes < 32).any() and (sizes >= 32).any()
    model = Bigram(len(tokenizer))
    out = perplexity(model, stream, [8, 16, 32])
    fed = {length: model.fed(length) for length in (8, 16, 32)}
    assert out[32]["chunks"] == sum(sizes // 32)
    for chunks in fed.values():
        assert not (chunks[:, :-1] == eos).any()  # an EOS can only close a chunk
        assert torch.equal(chunks.flatten(), fed[32].flatten())
    # a chunk starts where a book starts or where the previous chunk of its book ended
    starts = [int(s) for s in np.concatenate([[0], ends[:-1]])]
    positions = [p for s, n in zip(starts, sizes) for p in range(s, s + n // 32 * 32, 32)]
    expected = torch.stack([torch.from_numpy(stream.ids[p:p + 32].astype(np.int64))
                            for p in positions])
    assert torch.equal(fed[32], expected)
    # the cached stream knows its books too
    again = TokenStream.build(tokenizer, books, tmp_path, "test")
    assert torch.equal(again.chunks(32), expected)


def test_lengths_must_divide_the_longest():
    stream = TokenStream(np.arange(100, dtype=np.int32), "t")
    with pytest.raises(ValueError, match="divide the longest"):
        perplexity(Bigram(100), stream, [16, 40])
    with pytest.raises(ValueError, match="fewer than one chunk of 128 tokens inside a book"):
        perplexity(Bigram(100), stream, [64, 128])
    with pytest.raises(ConfigError, match="eval_multiples"):
        FinetuneConfig.from_dict({"eval_multiples": [1, 3, 4]})


def test_perplexity_equals_direct_loss():
    model = scratch_llama(vocab_size=64, hidden_size=16, n_layers=2, n_heads=2,
                          intermediate_size=32, base_window=32, seed=0).eval()
    stream = TokenStream(np.random.default_rng(0).integers(0, 64, 3000).astype(np.uint16), "t")
    got = perplexity(model, stream, [16, 32], max_chunks=5, batch_size=2)
    for length in (16, 32):
        n = 5 * 32 // length
        chunks = torch.from_numpy(stream.ids[:5 * 32].astype(np.int64)).view(n, length)
        losses = [model(input_ids=c[None], labels=c[None]).loss.item() for c in chunks]
        # every chunk predicts length - 1 tokens, so the token-weighted mean is the plain mean
        assert got[length]["nll"] == pytest.approx(sum(losses) / len(losses), rel=1e-5)
        assert got[length]["ppl"] == pytest.approx(math.exp(got[length]["nll"]))
        assert got[length]["tokens"] == n * (length - 1) and got[length]["chunks"] == n
