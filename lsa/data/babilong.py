"""BABILong assembly: bAbI facts hidden between whole sentences of held-out books.

A sample is built from a bAbI sample and a haystack of book sentences (test books only, never
training books) so that the context, measured in the evaluated model's tokens, fills
``length`` tokens including the question; the facts keep their order and are placed at random
sentence boundaries, optionally restricted to a depth range (fractions of the context:
``(0.5, 0.5)`` puts every fact at the middle). Deterministic from a seed. When the facts and
the question alone exceed the length, ``FactsDoNotFit`` says by how much.

Special tokens: pieces (sentences, facts, question, answer) are measured and encoded without
them (``add_special_tokens=False``); a sequence the model reads starts with the tokenizer's
start tokens (``special_prefix``: one BOS for Llama-2, none for the scratch BPE), once.
"""

from __future__ import annotations

import functools
import random
import re
from dataclasses import dataclass, field

from lsa.data.babi import BabiSample

_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'])")


class FactsDoNotFit(ValueError):
    """The facts and question are longer than the requested context."""


def split_sentences(text: str) -> list[str]:
    """Whole sentences of a book (newlines folded), at ., ! or ? followed by a capital."""
    flat = re.sub(r"\s+", " ", text).strip()
    return [s.strip() for s in _SENTENCE.split(flat) if len(s.strip()) > 1]


@dataclass
class BabilongSample:
    task: str
    context: str
    question: str
    answer: str
    length: int                        # requested length in tokens
    tokens: int                        # context + question tokens, as measured
    fact_positions: list[float] = field(default_factory=list)  # depth of each fact in [0, 1]
    depth: tuple[float, float] | None = None


def assemble(sample: BabiSample, haystack: list[str], length: int, count_tokens,
             seed: int = 0, depth: tuple[float, float] | None = None,
             question_template: str = "\nQuestion: {question}\nAnswer:") -> BabilongSample:
    """Hide ``sample``'s facts in ``haystack`` sentences to fill ``length`` tokens.

    ``count_tokens(text) -> int`` measures text in the evaluated model's tokens. The haystack
    is read from a random start (seeded) and wraps around.
    """
    rng = random.Random(f"{seed}/{sample.question}/{length}/{depth}")
    question = question_template.format(question=sample.question)
    facts = list(sample.facts)
    needed = count_tokens(" ".join(facts) + question)
    if needed > length:
        raise FactsDoNotFit(f"{sample.task}: {len(facts)} facts and the question take {needed} "
                            f"tokens, more than the {length} requested")
    if not haystack:
        raise ValueError("empty haystack")
    start = rng.randrange(len(haystack))
    background: list[str] = []
    total = needed
    i = start
    while True:
        sentence = haystack[i % len(haystack)]
        cost = count_tokens(" " + sentence)
        if total + cost > length:
            break
        background.append(sentence)
        total += cost
        i += 1
        if i - start > 10 * len(haystack):
            break
    n = len(background)
    low, high = depth if depth is not None else (0.0, 1.0)
    if not 0.0 <= low <= high <= 1.0:
        raise ValueError(f"depth = {depth}: must satisfy 0 <= low <= high <= 1")
    # fact slots are sentence boundaries 0..n; draw them within the depth range, keep order
    lo_slot, hi_slot = round(low * n), round(high * n)
    slots = sorted(rng.randint(lo_slot, hi_slot) for _ in facts)
    pieces: list[str] = []
    positions: list[float] = []
    k = 0
    for boundary in range(n + 1):
        while k < len(facts) and slots[k] == boundary:
            positions.append(boundary / n if n else 0.0)
            pieces.append(facts[k])
            k += 1
        if boundary < n:
            pieces.append(background[boundary])
    context = " ".join(pieces)
    return BabilongSample(sample.task, context, sample.question, sample.answer, length,
                          count_tokens(context + question), positions, depth)


def token_counter(tokenizer):
    """``count(text) -> int``: the length of ``text`` in ``tokenizer``'s tokens, special tokens
    left out, memoised (assembly measures the same haystack sentences over and over)."""

    @functools.cache
    def count(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    return count


def special_prefix(tokenizer) -> list[int]:
    """The ids ``tokenizer`` puts before a text by default: ``[bos]`` where it adds a BOS
    (Llama-2), ``[]`` where it adds none (the scratch BPE)."""
    bare = tokenizer("a", add_special_tokens=False)["input_ids"]
    full = tokenizer("a")["input_ids"]
    start = next(i for i in range(len(full) - len(bare) + 1) if full[i:i + len(bare)] == bare)
    return full[:start]


def fitting(samples: list[BabiSample], count_tokens, budget: int,
            question_template: str = "\nQuestion: {question}\nAnswer:") -> list[BabiSample]:
    """The samples whose facts, question and answer take at most ``budget`` tokens (long
    stories, e.g. most of qa3, do not fit short windows)."""
    return [s for s in samples
            if count_tokens(" ".join(s.facts) + question_template.format(question=s.question)
                            + " " + s.answer) <= budget]


class BabilongStream:
    """BABILong training rows for the trainer: ``length = l_train + l_extra`` tokens whose last
    ``l_train`` tokens (window B, where ``lsa.train`` puts the LM CE and the answer CE) hold
    everything the answer needs, and a mask marking the answer tokens.

    A row is, in order: the tokenizer's start tokens (``special_prefix``), running book text
    (``filler``, a TokenStream of the same books), then one assembled sample (facts in haystack
    sentences, question, answer) of at most ``l_train`` tokens (at most ``length`` minus the
    start tokens when that is less). So window B holds the whole sample, after a few filler
    tokens where the sentences do not fill it exactly; window A (the first ``l_train`` tokens)
    holds the start tokens, filler and the sample's beginning. Deterministic from the generator
    passed in.
    """

    def __init__(self, samples: list[BabiSample], haystack: list[str], filler, tokenizer,
                 l_train: int, question_template: str = "\nQuestion: {question}\nAnswer:"):
        self.haystack, self.filler, self.l_train = haystack, filler, l_train
        self.tokenizer, self.question_template = tokenizer, question_template
        self.count_tokens = token_counter(tokenizer)
        self.start = special_prefix(tokenizer)
        self.samples = samples
        if not samples:
            raise ValueError("no bAbI samples to train on")

    def keep_fitting(self, budget: int) -> BabilongStream:
        """Keep only the samples that fit ``budget`` tokens (the shortest window, with room
        for some haystack); returns self."""
        self.samples = fitting(self.samples, self.count_tokens, budget, self.question_template)
        if not self.samples:
            raise ValueError(f"no bAbI sample fits in {budget} tokens: lengthen l_train or "
                             "choose shorter tasks")
        return self

    def _encode(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def _assembled(self, sample: BabiSample, budget: int, seed: int) -> tuple[list[int], int]:
        """``(prompt + answer ids, number of answer ids)``, at most ``budget`` tokens."""
        answer = self._encode(" " + sample.answer)
        question = self.question_template.format(question=sample.question)
        room = budget - len(answer)
        while True:
            built = assemble(sample, self.haystack, room, self.count_tokens, seed=seed,
                             question_template=self.question_template)
            prompt = self._encode(built.context + question)
            over = len(prompt) + len(answer) - budget
            if over <= 0:
                return prompt + answer, len(answer)
            room -= over  # the joined text counts more tokens than its pieces did

    def sample_with_answers(self, n: int, length: int, generator):
        import torch

        if length < self.l_train:
            raise ValueError(f"length {length} is shorter than l_train = {self.l_train}")
        budget = min(self.l_train, length - len(self.start))
        rows, masks = [], []
        for _ in range(n):
            k = int(torch.randint(len(self.samples), (1,), generator=generator))
            seed = int(torch.randint(2**31 - 1, (1,), generator=generator))
            content, n_answer = self._assembled(self.samples[k], budget, seed)
            missing = length - len(self.start) - len(content)
            filler = self.filler.sample(1, missing, generator)[0].tolist() if missing else []
            rows.append(self.start + filler + content)
            masks.append([False] * (length - n_answer) + [True] * n_answer)
        return torch.tensor(rows, dtype=torch.long), torch.tensor(masks, dtype=torch.bool)

    def sample(self, n: int, length: int, generator):
        return self.sample_with_answers(n, length, generator)[0]
