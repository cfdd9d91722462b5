"""The byte-level BPE tokenizer and token streams (lsa/data/tokens.py)."""

import numpy as np
import pytest
import torch

from lsa.data.tokens import TokenStream


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
