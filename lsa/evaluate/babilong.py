"""BABILong evaluation: prompt, greedy decoding of a few tokens, the official scoring rule.

Scoring (as the BABILong code does): the output is lower-cased and cut to its first sentence;
the task labels mentioned in the question are set aside; the answer is correct when the
expected label is the only remaining task label found in that sentence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch

from lsa.data.babi import TASK_LABELS
from lsa.data.babilong import BabilongSample


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


def first_sentence(output: str) -> str:
    text = output.strip().lower()
    return re.split(r"[.\n!?]", text, maxsplit=1)[0] if text else ""


def is_correct(output: str, target: str, question: str, labels: list[str]) -> bool:
    """The official rule: the target is the only task label in the output's first sentence,
    labels mentioned in the question excluded."""
    sentence = first_sentence(output)
    labels = [label.lower() for label in labels]
    in_question = {label for label in labels if re.search(rf"\b{label}\b", question.lower())}
    found = {label for label in labels if label not in in_question and
             re.search(rf"\b{label}\b", sentence)}
    return found == {target.lower()}


@torch.no_grad()
def generate_answers(model, tokenizer, prompts: list[str], max_new_tokens: int = 4
                     ) -> list[str]:
    """Greedy decoding (with the KV cache) of a few tokens for each prompt, one prompt at a
    time so that no padding is involved."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    outputs = []
    for prompt in prompts:
        ids = tokenizer(prompt, return_tensors="pt")["input_ids"].to(device)
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                             max_new_tokens=max_new_tokens, do_sample=False, use_cache=True,
                             pad_token_id=tokenizer.eos_token_id)
        outputs.append(tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True))
    model.train(was_training)
    return outputs


def score(samples: list[BabilongSample], outputs: list[str]) -> list[bool]:
    return [is_correct(out, s.answer, s.question, TASK_LABELS[s.task])
            for s, out in zip(samples, outputs)]


def evaluate_grid(model, tokenizer, samples: dict[str, list], haystack: list[str],
                  lengths: list[int], n: int, seed: int = 0,
                  depths: list[float | None] | None = None, max_new_tokens: int = 4,
                  template: PromptTemplate | None = None, progress: bool = False
                  ) -> list[dict]:
    """Accuracy rows (task, length, depth, correct, output) for ``n`` test samples per task x
    length (x depth), each assembled from the test-book ``haystack`` in the model's tokens."""
    from tqdm.auto import tqdm

    from lsa.data.babilong import assemble, fitting, token_counter

    template = template or PromptTemplate()
    count = token_counter(tokenizer)

    rows = []
    # the same samples at every length: those that fit in the shortest one with room to spare
    usable = {task: fitting(s, count, int(0.8 * min(lengths)))[:n] for task, s in samples.items()}
    cells = [(t, L, d) for t in usable if usable[t] for L in lengths for d in (depths or [None])]
    for task, length, depth in tqdm(cells, desc="babilong eval", disable=not progress):
        built = [assemble(s, haystack, length, count, seed=seed + i,
                          depth=None if depth is None else (depth, depth))
                 for i, s in enumerate(usable[task])]
        outputs = generate_answers(model, tokenizer, [template.render(b) for b in built],
                                   max_new_tokens)
        for b, out, ok in zip(built, outputs, score(built, outputs)):
            rows.append({"task": task, "length": length, "depth": depth, "correct": ok,
                         "output": out, "answer": b.answer, "tokens": b.tokens})
    return rows
