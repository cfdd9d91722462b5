"""BABILong evaluation: prompt, greedy decoding of a few tokens, the benchmark's scoring rule.

Scorers (``BabilongConfig.scorer``):

- ``"official"`` (default): the benchmark's definition, ``compare_answers`` of
  ``babilong/metrics.py`` (booydar/babilong), quirks included. The output is lower-cased and
  cut before its first ``.``, then before ``<context>`` and ``<example>`` (the code's further
  cut before ``Question`` never fires, the text being lower-case by then: it is left out).
  Task labels are matched as *substrings*, in that text and in the lower-cased question; the
  labels found in the question are set aside. Correct when the target is the only label left;
  a comma-separated target longer than 3 characters (qa8) needs every part and nothing else,
  parts split at ``,`` and not stripped.
- ``"word"``: ours, kept for comparison: the first sentence ends at ``.``, ``!``, ``?`` or a
  newline and labels match whole words only (``office`` is not in ``officeroom``).

Prompts start with the tokenizer's start tokens (one BOS where the model's tokenizer adds one)
and fit ``length`` tokens with them. Decoding is batched (left padding, attention mask) where
padding is safe for the model (``lsa.evaluate.pads_safely``), one prompt at a time where it
is not, each from the model's original state (``lsa.evaluate.forget_prompts``); the outputs
equal the unbatched ones, in any order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch

from lsa.data.babi import TASK_LABELS
from lsa.data.babilong import BabilongSample
from lsa.evaluate import forget_prompts, pads_safely


@dataclass
class PromptTemplate:
    """Instruction, examples and post-prompt are configurable parts (empty by default: the
    small models here are fine-tuned on the bare format)."""

    instruction: str = ""
    examples: str = ""
    post_prompt: str = ""
    template: str = "{instruction}{examples}{context}\nQuestion: {question}{post_prompt}\nAnswer:"

    def render(self, sample: BabilongSample) -> str:
        return self.template.format(instruction=self.instruction, examples=self.examples,
                                    context=sample.context, question=sample.question,
                                    post_prompt=self.post_prompt)


def preprocess_output(output: str) -> str:
    """The text the official rule searches: lower-cased, before the first ``.``, before
    ``<context>`` and ``<example>``."""
    text = output.lower().split(".")[0]
    return text.split("<context>")[0].split("<example>")[0]


def official_match(output: str, target: str, question: str, labels: list[str]) -> bool:
    """``compare_answers`` of babilong/metrics.py: labels as substrings, see the module doc."""
    text, target, question = preprocess_output(output), target.lower(), question.lower()
    labels_lower = {label.lower() for label in labels}
    in_question = {label for label in labels_lower if label in question}
    found = {label for label in labels_lower if label in text} - in_question
    if "," in target and len(target) > 3:
        parts = target.split(",")
        return all(part in found for part in parts) and len(found) == len(parts)
    return found == {target}


def first_sentence(output: str) -> str:
    text = output.strip().lower()
    return re.split(r"[.\n!?]", text, maxsplit=1)[0] if text else ""


def word_match(output: str, target: str, question: str, labels: list[str]) -> bool:
    """Ours: the target is the only task label in the output's first sentence (ending at
    ``.``, ``!``, ``?`` or a newline), whole words only, labels of the question set aside."""
    sentence = first_sentence(output)
    labels = [label.lower() for label in labels]
    in_question = {label for label in labels if re.search(rf"\b{label}\b", question.lower())}
    found = {label for label in labels if label not in in_question and
             re.search(rf"\b{label}\b", sentence)}
    return found == {target.lower()}


SCORERS = {"official": official_match, "word": word_match}


def is_correct(output: str, target: str, question: str, labels: list[str],
               scorer: str = "official") -> bool:
    if scorer not in SCORERS:
        raise ValueError(f"scorer = {scorer!r}: must be one of {', '.join(SCORERS)}")
    return SCORERS[scorer](output, target, question, labels)


@torch.no_grad()
def generate_answers(model, tokenizer, prompts: list[str], max_new_tokens: int = 4,
                     batch_size: int = 1) -> list[str]:
    """Greedy decoding (with the KV cache) of a few tokens for each prompt, ``batch_size``
    prompts at a time (one at a time where padding is not safe, see ``pads_safely``): prompts
    of similar length go together, left-padded, with an attention mask."""
    from lsa.data.babilong import special_prefix

    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    start = special_prefix(tokenizer)
    encoded = [start + tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else \
        tokenizer.eos_token_id
    size = batch_size if pads_safely(model) else 1
    order = sorted(range(len(prompts)), key=lambda i: len(encoded[i]))
    outputs = [""] * len(prompts)
    for first in range(0, len(order), size):
        chunk = order[first:first + size]
        width = max(len(encoded[i]) for i in chunk)
        ids = torch.full((len(chunk), width), pad, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for row, i in enumerate(chunk):
            ids[row, width - len(encoded[i]):] = torch.tensor(encoded[i])
            mask[row, width - len(encoded[i]):] = 1
        forget_prompts(model)
        out = model.generate(input_ids=ids.to(device), attention_mask=mask.to(device),
                             max_new_tokens=max_new_tokens, do_sample=False, use_cache=True,
                             pad_token_id=pad)
        for row, i in enumerate(chunk):
            outputs[i] = tokenizer.decode(out[row, width:], skip_special_tokens=True)
    model.train(was_training)
    return outputs


def score(samples: list[BabilongSample], outputs: list[str], scorer: str = "official"
          ) -> list[bool]:
    return [is_correct(out, s.answer, s.question, TASK_LABELS[s.task], scorer)
            for s, out in zip(samples, outputs)]


def evaluate_grid(model, tokenizer, samples: dict[str, list], haystack: list[str],
                  lengths: list[int], n: int, seed: int = 0,
                  depths: list[float | None] | None = None, max_new_tokens: int = 4,
                  template: PromptTemplate | None = None, progress: bool = False,
                  scorer: str = "official", batch_size: int = 1) -> list[dict]:
    """Rows (task, length, depth, index, correct, output, answer, question, scorer) for ``n``
    test samples per task x length (x depth), each assembled from the test-book ``haystack``
    in the model's tokens so that the prompt, start tokens included, fits the length.
    ``index`` numbers a task's samples: with the same ``seed`` two models answer the same
    prompts, row for row (a paired comparison)."""
    from tqdm.auto import tqdm

    from lsa.data.babilong import assemble, fitting, special_prefix, token_counter

    template = template or PromptTemplate()
    count = token_counter(tokenizer)
    n_start = len(special_prefix(tokenizer))

    rows = []
    # the same samples at every length: those that fit in the shortest one with room to spare
    usable = {task: fitting(s, count, int(0.8 * min(lengths)))[:n] for task, s in samples.items()}
    cells = [(t, L, d) for t in usable if usable[t] for L in lengths for d in (depths or [None])]
    for task, length, depth in tqdm(cells, desc="babilong eval", disable=not progress):
        built = [assemble(s, haystack, length - n_start, count, seed=seed + i,
                          depth=None if depth is None else (depth, depth))
                 for i, s in enumerate(usable[task])]
        outputs = generate_answers(model, tokenizer, [template.render(b) for b in built],
                                   max_new_tokens, batch_size)
        for i, (b, out, ok) in enumerate(zip(built, outputs, score(built, outputs, scorer))):
            rows.append({"task": task, "length": length, "depth": depth, "index": i,
                         "correct": ok, "output": out, "answer": b.answer,
                         "question": b.question, "scorer": scorer,
                         "tokens": n_start + b.tokens})
    return rows
