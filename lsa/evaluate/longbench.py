"""LongBench-E (for the ``gpu-small`` / ``paper`` profiles): local files in the official format.

- Data: ``{dataset}_e.jsonl`` files of the user's LongBench download (fields ``input``,
  ``context``, ``answers``, ``length`` (words), ``all_classes``); the prompt and generation-length
  tables (``dataset2prompt.json``, ``dataset2maxlen.json``) from the benchmark's config folder.
- Prompts longer than the model's budget are truncated in the middle (first half + last half of
  the tokens); greedy decoding of ``dataset2maxlen`` tokens; no chat template (base models).
- Metrics per dataset as the official ``metrics.py`` defines them: token F1 after SQuAD-style
  normalisation, ROUGE-L F, classification accuracy, retrieval and count accuracy, and edit
  similarity for code (here ``difflib``'s ratio on the first non-comment line; the official
  code uses fuzzywuzzy, which computes the same ratio without python-Levenshtein).
- LongBench-E buckets by word count: 0-4k, 4-8k, 8k+; a dataset's score is the mean over
  samples x 100 per bucket and overall. **Averaging rule (ours; the official script stops at
  per-dataset scores):** the LongBench-E score is the unweighted mean over datasets of their
  overall scores.
"""

from __future__ import annotations

import difflib
import json
import re
import string
from collections import Counter
from pathlib import Path
from typing import Any, Callable

DATASETS = ["qasper", "multifieldqa_en", "hotpotqa", "2wikimqa", "gov_report", "multi_news",
            "trec", "triviaqa", "samsum", "passage_count", "passage_retrieval_en", "lcc",
            "repobench-p"]
BUCKETS = (("0-4k", 0, 4000), ("4-8k", 4000, 8000), ("8k+", 8000, float("inf")))
FIRST_LINE_ONLY = {"trec", "triviaqa", "samsum", "lsht"}


def normalize_answer(text: str) -> str:
    """Lower case, drop punctuation, articles and extra white space (SQuAD)."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def f1_tokens(prediction: list[str], truth: list[str]) -> float:
    common = Counter(prediction) & Counter(truth)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(prediction), same / len(truth)
    return 2 * precision * recall / (precision + recall)


def qa_f1_score(prediction: str, truth: str, **_: Any) -> float:
    return f1_tokens(normalize_answer(prediction).split(), normalize_answer(truth).split())


def _lcs(a: list[str], b: list[str]) -> int:
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def rouge_score(prediction: str, truth: str, **_: Any) -> float:
    """ROUGE-L F-measure on white-space tokens (0 when either side is empty)."""
    p, t = prediction.split(), truth.split()
    if not p or not t:
        return 0.0
    lcs = _lcs(p, t)
    if lcs == 0:
        return 0.0
    precision, recall = lcs / len(p), lcs / len(t)
    return 2 * precision * recall / (precision + recall)


def classification_score(prediction: str, truth: str, all_classes: list[str] | None = None,
                         **_: Any) -> float:
    """1/k when the truth is among the k classes named in the prediction (longest names win
    over their substrings), else 0."""
    matches = [c for c in (all_classes or []) if c in prediction]
    matches = [m for m in matches if not (m in truth and m != truth)]
    return 1.0 / len(matches) if truth in matches else 0.0


def retrieval_score(prediction: str, truth: str, **_: Any) -> float:
    wanted = re.findall(r"Paragraph (\d+)", truth)
    numbers = re.findall(r"\d+", prediction)
    if not wanted or not numbers:
        return 0.0
    return sum(n == wanted[0] for n in numbers) / len(numbers)


def count_score(prediction: str, truth: str, **_: Any) -> float:
    numbers = re.findall(r"\d+", prediction)
    if not numbers:
        return 0.0
    return sum(n == str(truth) for n in numbers) / len(numbers)


def code_sim_score(prediction: str, truth: str, **_: Any) -> float:
    line = ""
    for candidate in prediction.lstrip("\n").split("\n"):
        if "`" not in candidate and "#" not in candidate and "//" not in candidate:
            line = candidate
            break
    return difflib.SequenceMatcher(None, line, truth).ratio()


METRICS: dict[str, Callable[..., float]] = {
    "qasper": qa_f1_score, "multifieldqa_en": qa_f1_score, "hotpotqa": qa_f1_score,
    "2wikimqa": qa_f1_score, "gov_report": rouge_score, "multi_news": rouge_score,
    "trec": classification_score, "triviaqa": qa_f1_score, "samsum": rouge_score,
    "passage_count": count_score, "passage_retrieval_en": retrieval_score,
    "lcc": code_sim_score, "repobench-p": code_sim_score,
}


def sample_score(dataset: str, prediction: str, answers: list[str],
                 all_classes: list[str] | None = None) -> float:
    """The best score over the reference answers, as the official scorer does."""
    if dataset in FIRST_LINE_ONLY:
        prediction = prediction.lstrip("\n").split("\n")[0]
    metric = METRICS[dataset]
    return max((metric(prediction, a, all_classes=all_classes) for a in answers), default=0.0)


def bucket_of(words: int) -> str:
    for name, low, high in BUCKETS:
        if low <= words < high:
            return name
    raise ValueError(f"length {words}")


def score_dataset(dataset: str, rows: list[dict[str, Any]], predictions: list[str]
                  ) -> dict[str, float]:
    """Scores x 100 per bucket and overall (buckets without samples are left out)."""
    per_bucket: dict[str, list[float]] = {}
    everything = []
    for row, pred in zip(rows, predictions):
        value = sample_score(dataset, pred, row["answers"], row.get("all_classes"))
        per_bucket.setdefault(bucket_of(int(row["length"])), []).append(value)
        everything.append(value)
    out = {name: round(100 * sum(v) / len(v), 2) for name, v in per_bucket.items()}
    out["overall"] = round(100 * sum(everything) / len(everything), 2) if everything else 0.0
    return out


def longbench_e_score(per_dataset: dict[str, dict[str, float]]) -> float:
    """Our averaging rule: the unweighted mean of the datasets' overall scores."""
    return sum(d["overall"] for d in per_dataset.values()) / len(per_dataset)


def load_tables(config_dir: str | Path) -> tuple[dict[str, str], dict[str, int]]:
    folder = Path(config_dir)
    prompts = json.loads((folder / "dataset2prompt.json").read_text())
    maxlen = json.loads((folder / "dataset2maxlen.json").read_text())
    return prompts, maxlen


def load_dataset_file(data_dir: str | Path, dataset: str, limit: int | None = None
                      ) -> list[dict[str, Any]]:
    path = Path(data_dir) / f"{dataset}_e.jsonl"
    if not path.exists():
        raise FileNotFoundError(f"LongBench-E file {path} not found: download LongBench's data "
                                "(the *_e.jsonl files) and point longbench data_dir at it")
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return rows[:limit] if limit else rows


def truncate_middle(ids: list[int], budget: int) -> list[int]:
    """Keep the first and last ``budget // 2`` tokens when ``ids`` exceeds ``budget``."""
    if len(ids) <= budget:
        return ids
    half = budget // 2
    return ids[:half] + ids[len(ids) - (budget - half):]


def evaluate(model, tokenizer, data_dir: str | Path, config_dir: str | Path, max_length: int,
             datasets: list[str] | None = None, limit: int | None = None) -> dict[str, Any]:
    """Greedy generation on every dataset, scores per bucket, and the averaged score."""
    import torch

    prompts, maxlen = load_tables(config_dir)
    device = next(model.parameters()).device
    model.eval()
    results: dict[str, dict[str, float]] = {}
    for dataset in datasets or DATASETS:
        rows = load_dataset_file(data_dir, dataset, limit)
        predictions = []
        for row in rows:
            prompt = prompts[dataset].format(**row)
            ids = truncate_middle(tokenizer(prompt)["input_ids"], max_length)
            with torch.no_grad():
                out = model.generate(torch.tensor([ids], device=device), do_sample=False,
                                     max_new_tokens=maxlen[dataset],
                                     pad_token_id=tokenizer.eos_token_id)
            predictions.append(tokenizer.decode(out[0, len(ids):], skip_special_tokens=True))
        results[dataset] = score_dataset(dataset, rows, predictions)
    return {"per_dataset": results, "longbench_e": longbench_e_score(results),
            "averaging": "unweighted mean over datasets of their overall scores"}
