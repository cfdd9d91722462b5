"""Tokenizer for the scratch models and packed token streams.

- ``train_tokenizer``: a byte-level BPE trained with ``tokenizers`` on the *training* books only,
  wrapped as a transformers ``PreTrainedTokenizerFast`` and cached.
- ``TokenStream``: one split as a flat array of token ids (every book followed by EOS), cached
  as ``.npy``; yields batches of exact lengths, deterministic from a seed and a step number, and
  the non-overlapping chunks of the perplexity protocol. Book boundaries are not stored: they
  are the EOS positions (a stream made with ``build`` knows its EOS id; one made from bare ids
  without ``eos_id`` is a single book), so the cache format is unchanged.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import torch

from lsa.files import atomic_write_bytes, atomic_write_text

EOS = "<|endoftext|>"


def _digest(*parts: str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


def train_tokenizer(train_texts: list[str], vocab_size: int, cache_dir: Path):
    """Byte-level BPE with ``vocab_size`` tokens (EOS included), cached by content and size."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    key = _digest(str(vocab_size), *train_texts)
    path = cache_dir / f"bpe-{vocab_size}-{key}" / "tokenizer.json"
    if not path.exists():
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[EOS],
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                      show_progress=False)
        tok.train_from_iterator(train_texts, trainer=trainer)
        atomic_write_text(path, tok.to_str())
    return PreTrainedTokenizerFast(tokenizer_file=str(path), eos_token=EOS, bos_token=EOS,
                                   pad_token=EOS)


def tokenizer_fingerprint(tokenizer) -> str:
    """A short stable id of a tokenizer's vocabulary and merges."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    text = backend.to_str() if backend is not None else json.dumps(tokenizer.get_vocab(),
                                                                      sort_keys=True)
    return _digest(text)


class TokenStream:
    """A split as one flat sequence of token ids; ``eos_id`` closes every book (None: one book)."""

    def __init__(self, ids: np.ndarray, name: str = "", eos_id: int | None = None):
        if ids.ndim != 1:
            raise ValueError("a token stream is one-dimensional")
        self.ids = ids
        self.name = name
        self.eos_id = eos_id

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    @classmethod
    def build(cls, tokenizer, books: dict[str, str], cache_dir: Path, name: str) -> TokenStream:
        """Encode ``books`` (joined by EOS, in name order) once and cache the ids."""
        key = _digest(tokenizer_fingerprint(tokenizer), *[f"{k}\n{books[k]}" for k in
                                                          sorted(books)])
        path = cache_dir / f"{name}-{key}.npy"
        eos = tokenizer.convert_tokens_to_ids(tokenizer.eos_token)
        if path.exists():
            return cls(np.load(path), name, eos)
        pieces = []
        for book in sorted(books):
            pieces.append(np.asarray(tokenizer(books[book])["input_ids"], dtype=np.int64))
            pieces.append(np.asarray([eos], dtype=np.int64))
        ids = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int64)
        dtype = np.uint16 if len(tokenizer) <= np.iinfo(np.uint16).max else np.int32
        ids = ids.astype(dtype)
        import io as _io

        buf = _io.BytesIO()
        np.save(buf, ids)
        atomic_write_bytes(path, buf.getvalue())
        return cls(ids, name, eos)

    def sample(self, n: int, length: int, generator: torch.Generator) -> torch.Tensor:
        """``n`` windows of exactly ``length`` tokens at uniformly random offsets."""
        if length > len(self):
            raise ValueError(f"the {self.name or 'token'} stream has {len(self)} tokens, fewer "
                             f"than one window of {length}")
        starts = torch.randint(0, len(self) - length + 1, (n,), generator=generator)
        idx = starts[:, None] + torch.arange(length)[None, :]
        return torch.from_numpy(self.ids[idx.numpy()].astype(np.int64))

    def book_spans(self) -> np.ndarray:
        """``(n_books, 2)`` half-open ``[start, end)`` of every book: its tokens and the EOS that
        closes it (tokens after the last EOS form a book too)."""
        ends = (np.flatnonzero(self.ids == self.eos_id) + 1 if self.eos_id is not None
                else np.zeros(0, dtype=np.int64))
        if not len(ends) or ends[-1] != len(self):
            ends = np.append(ends, len(self))
        return np.stack([np.concatenate([[0], ends[:-1]]), ends], axis=1)

    def chunks(self, length: int, max_blocks: int | None = None, block: int | None = None
               ) -> torch.Tensor:
        """Non-overlapping chunks of exactly ``length`` tokens, each inside one book: the CLEX
        perplexity protocol. Every book is cut into blocks of ``block`` tokens (default
        ``length``; a multiple of it) from its first token, its remainder dropped; the first
        ``max_blocks`` blocks in stream order (all when None) are each cut into
        ``block // length`` chunks. Every ``length`` dividing the same ``block`` thus covers the
        same tokens. Shape ``(n_chunks, length)``."""
        block = block or length
        if block % length:
            raise ValueError(f"chunks of {length} tokens do not divide blocks of {block}")
        starts = np.concatenate([np.arange(start, end - block + 1, block)
                                 for start, end in self.book_spans()])[:max_blocks]
        if len(starts) == 0:
            raise ValueError(f"the {self.name or 'token'} stream ({len(self)} tokens) has fewer "
                             f"than one chunk of {block} tokens inside a book")
        offsets = np.arange(0, block, length)
        index = (starts[:, None] + offsets[None, :]).reshape(-1, 1) + np.arange(length)
        return torch.from_numpy(self.ids[index].astype(np.int64))
