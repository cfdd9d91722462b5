"""LongBench-E: local files in the official format, scored as the official ``metrics.py``.

Used by the ``longbench`` job (``lsa.jobs.longbench_evaluate``: every fine-tuning run of the
grid, profiles ``gpu-small`` and ``paper``; ``smoke`` runs it on ``write_fixture``'s tiny
LongBench-format files) and notebook 03's Tables 2-3 layout.

- Data: ``{dataset}_e.jsonl`` files of the user's LongBench download (fields ``input``,
  ``context``, ``answers``, ``length`` (words), ``all_classes``); the prompt and generation-length
  tables (``dataset2prompt.json``, ``dataset2maxlen.json``) from the benchmark's config folder.
- Prompts longer than the model's budget are truncated in the middle (first half + last half of
  the tokens); greedy decoding of ``dataset2maxlen`` tokens; no chat template (base models).
  Prompts are decoded ``batch_size`` at a time, left-padded, where padding is safe for the
  model (``lsa.evaluate.pads_safely``), else one at a time (EABF, LongQLoRA's S2 attention,
  CLEX, dynamic NTK), each from the model's original state (``lsa.evaluate.forget_prompts``),
  so that an answer never depends on the batch or the prompts' order.
- Metrics per dataset as THUDM/LongBench ``LongBench/metrics.py`` and ``eval.py`` compute them,
  with the packages the benchmark uses (optional group ``lsa[longbench]``):

  - token F1 after SQuAD-style normalisation;
  - ROUGE-L F from the ``rouge`` package (``Rouge().get_scores([pred], [truth], avg=True)``):
    summary-level, sentences split on ``.``, words counted as sets, ``F = 2PR / (P + R +
    1e-8)``; 0 wherever the package raises (empty text, or a sentence pair too long for its
    recursive LCS), as the official bare ``except``;
  - classification accuracy: 1/k over the k class names found in the prediction, after the
    official loop that removes proper substrings of the truth *while iterating*, so the name
    after each removed one is not checked (kept);
  - retrieval and count accuracy;
  - code edit similarity: fuzzywuzzy's ``fuzz.ratio`` (an integer percentage, Python's
    half-to-even ``round``) / 100 on the first line without a backtick, ``#`` or ``//``.
    It is computed as ``round(rapidfuzz.fuzz.ratio(a, b)) / 100``, which reproduces
    fuzzywuzzy 0.18 with python-Levenshtein >= 0.14 (its ``ratio`` is rapidfuzz's normalised
    InDel similarity, ``2 LCS / (|a| + |b|)``) bit for bit. fuzzywuzzy with the old C
    python-Levenshtein (0.12: ``(n - d) / n``) gives the same integers except, rarely, at an
    exact half-percent tie (``1 - d/n`` lands a hair above it: ``"x"+"b"*39`` vs ``"x"+"c"*39``
    is 3 here, 2 there). Its pure-``difflib`` fallback differs: greedy Ratcliff/Obershelp
    blocks (never more than the LCS; junk heuristic from 200 characters) score lower, e.g.
    ``"return 1 + x"`` vs ``"return x - 1"``: 67 there, 75 here.
- The official first-line rule: ``trec``, ``triviaqa``, ``samsum`` (and ``lsht``) score only
  the first line of the prediction; a sample's score is its best over the reference answers.
- LongBench-E buckets by word count: 0-4k, 4-8k, 8k+; a dataset's score is the mean over
  samples x 100 per bucket and overall. **Averaging rule (ours; the official script stops at
  per-dataset scores):** the LongBench-E score is the unweighted mean over datasets of their
  overall scores.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
import string
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lsa.config import LONGBENCH_E_DATASETS
from lsa.evaluate import forget_prompts, pads_safely
from lsa.files import atomic_write_text, bad_input

DATASETS = list(LONGBENCH_E_DATASETS)
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


def _package(name: str):
    """An optional dependency of the ``longbench`` group, with an error that says how to get it."""
    try:
        return importlib.import_module(name)
    except ImportError as err:
        raise ImportError(f"LongBench metrics need the {name!r} package: pip install "
                          "'lsa[longbench]'") from err


def rouge_score(prediction: str, truth: str, **_: Any) -> float:
    """ROUGE-L F of the ``rouge`` package, summary-level; 0 where the package raises."""
    scorer = _package("rouge").Rouge()
    try:
        return scorer.get_scores([prediction], [truth], avg=True)["rouge-l"]["f"]
    except Exception:  # the official code's bare except (ValueError, RecursionError)
        return 0.0


def classification_score(prediction: str, truth: str, all_classes: list[str] | None = None,
                         **_: Any) -> float:
    """1/k when the truth is among the k class names left in the prediction, else 0. Names that
    are proper substrings of the truth are dropped as the official loop drops them: removed
    from the list it is iterating over, so the name that slides into the freed slot is skipped
    (never checked, kept)."""
    matches = [c for c in (all_classes or []) if c in prediction]
    i = 0
    while i < len(matches):
        if matches[i] in truth and matches[i] != truth:
            del matches[i]  # the next name slides into slot i and is stepped over
        i += 1
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
    """fuzzywuzzy's ``fuzz.ratio`` / 100 (an integer percentage) of the first line that has no
    backtick, ``#`` or ``//`` ("" when there is none) against the truth."""
    line = ""
    for candidate in prediction.lstrip("\n").split("\n"):
        if "`" not in candidate and "#" not in candidate and "//" not in candidate:
            line = candidate
            break
    return round(_package("rapidfuzz.fuzz").ratio(line, truth)) / 100


METRICS: dict[str, Callable[..., float]] = {
    "qasper": qa_f1_score, "multifieldqa_en": qa_f1_score, "hotpotqa": qa_f1_score,
    "2wikimqa": qa_f1_score, "gov_report": rouge_score, "multi_news": rouge_score,
    "trec": classification_score, "triviaqa": qa_f1_score, "samsum": rouge_score,
    "passage_count": count_score, "passage_retrieval_en": retrieval_score,
    "lcc": code_sim_score, "repobench-p": code_sim_score,
}

#: the optional packages (group ``longbench``) each metric imports when it first scores
METRIC_PACKAGES: dict[Callable[..., float], str] = {rouge_score: "rouge",
                                                     code_sim_score: "rapidfuzz"}


def missing_metric_packages(datasets) -> list[str]:
    """The packages the metrics of ``datasets`` need that are not installed here (checked
    before any job: without them the first summary or code dataset fails after generation)."""
    needed = {METRIC_PACKAGES[METRICS[d]] for d in datasets if METRICS.get(d) in METRIC_PACKAGES}
    return sorted(n for n in needed if importlib.util.find_spec(n) is None)


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


TABLES = {"dataset2prompt.json": (str, "a prompt template with {context} and {input}"),
          "dataset2maxlen.json": (int, "the maximum answer length in tokens")}


def _read_json(path: Path, expected: str) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"{path} not found: LongBench's configuration tables "
                                "(dataset2prompt.json, dataset2maxlen.json) belong in "
                                "$LSA_DATA_DIR/longbench/") from None
    if not text.strip():
        raise bad_input(path, "the file is empty", expected)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise bad_input(path, f"not JSON ({exc.msg}, column {exc.colno})", expected,
                        exc.lineno) from None


def load_tables(config_dir: str | Path) -> tuple[dict[str, str], dict[str, int]]:
    """LongBench's ``dataset2prompt.json`` and ``dataset2maxlen.json`` from ``config_dir``,
    checked: one object per file mapping each dataset to its prompt template (a string) or its
    maximum answer length (an integer), the same datasets in both."""
    folder = Path(config_dir)
    tables = []
    for name, (kind, meaning) in TABLES.items():
        expected = f"a JSON object mapping each dataset name to {meaning}"
        table = _read_json(folder / name, expected)
        if not isinstance(table, dict) or not table:
            raise bad_input(folder / name, "not a non-empty JSON object", expected)
        for key, value in table.items():
            if not isinstance(value, kind) or isinstance(value, bool):
                raise bad_input(folder / name, f"key {key!r} holds {value!r}", expected)
        tables.append(table)
    prompts, maxlen = tables
    if set(prompts) != set(maxlen):
        odd = sorted(set(prompts) ^ set(maxlen))[0]
        raise bad_input(folder, f"dataset {odd!r} is in one table only",
                        "dataset2prompt.json and dataset2maxlen.json over the same datasets")
    return prompts, maxlen


def data_folder(lb) -> Path | None:
    """Where the LongBench-E job reads its files (``lb``: ``lsa.config.LongBenchConfig``):
    ``data_dir``, else ``$LSA_DATA_DIR/longbench`` when it exists, else ``data/longbench``
    (where ``python -m lsa fetch longbench`` puts them); None for the fixture or when
    LongBench-E is off."""
    from lsa import paths

    if not lb.enabled or lb.data_dir == "fixture":
        return None
    if lb.data_dir:
        return Path(lb.data_dir).expanduser()
    user = paths.data_dir()
    if user is not None and (user / "longbench").is_dir():
        return user / "longbench"
    return paths.CACHE / "longbench"


def data_files(lb) -> list[Path]:
    """Every file the LongBench-E job reads: the two tables and each dataset's ``*_e.jsonl``
    (empty for the fixture or when LongBench-E is off)."""
    folder = data_folder(lb)
    if folder is None:
        return []
    return [folder / name for name in (*TABLES, *(f"{d}_e.jsonl" for d in lb.datasets))]


ROW_FIELDS = {"input": str, "context": str, "answers": list, "length": int}
ROW_FORMAT = ("one JSON object per line with input and context (strings), answers (a list of "
              "strings), length (an integer word count) and all_classes (a list or null)")


def load_dataset_file(data_dir: str | Path, dataset: str, limit: int | None = None
                      ) -> list[dict[str, Any]]:
    """The rows of ``<data_dir>/<dataset>_e.jsonl``, each checked against ``ROW_FORMAT``; a
    malformed line or an empty file stops with an error naming the file and the line."""
    path = Path(data_dir) / f"{dataset}_e.jsonl"
    if not path.exists():
        raise FileNotFoundError(f"LongBench-E file {path} not found: download LongBench's data "
                                "(the *_e.jsonl files) and point longbench data_dir at it")
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise bad_input(path, f"not JSON ({exc.msg})", ROW_FORMAT, number) from None
        if not isinstance(row, dict):
            raise bad_input(path, "not a JSON object", ROW_FORMAT, number)
        for key, kind in ROW_FIELDS.items():
            if not isinstance(row.get(key), kind) or isinstance(row.get(key), bool):
                raise bad_input(path, f"{key} = {row.get(key)!r}", ROW_FORMAT, number)
        if not all(isinstance(a, str) for a in row["answers"]):
            raise bad_input(path, "answers holds a non-string", ROW_FORMAT, number)
        if row.get("all_classes") is not None and not isinstance(row["all_classes"], list):
            raise bad_input(path, f"all_classes = {row['all_classes']!r}", ROW_FORMAT, number)
        rows.append(row)
    if not rows:
        raise bad_input(path, "the file is empty", ROW_FORMAT)
    return rows[:limit] if limit else rows


def truncate_middle(ids: list[int], budget: int) -> list[int]:
    """Keep the first and last ``budget // 2`` tokens when ``ids`` exceeds ``budget``."""
    if len(ids) <= budget:
        return ids
    half = budget // 2
    return ids[:half] + ids[len(ids) - (budget - half):]


PRED_FORMAT = ("LongBench's pred/<dataset>.jsonl: one JSON object per line with pred (a "
               "string), answers, all_classes and length, in the data file's order")


def read_predictions(path: str | Path, rows: list[dict[str, Any]]) -> list[str]:
    """The predictions already in ``path`` (LongBench's ``pred/<dataset>.jsonl``), in order,
    for the first of ``rows``: a line cut by a killed job ends the list (it is made again); a
    line that answers another sample than its row stops with an error naming it."""
    path = Path(path)
    if not path.exists():
        return []
    out = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        try:
            item = json.loads(line)
        except json.JSONDecodeError:
            break  # the last line of an interrupted write
        if number > len(rows) or not isinstance(item, dict) or \
                not isinstance(item.get("pred"), str):
            raise bad_input(path, "not a prediction of this data file", PRED_FORMAT, number)
        if item.get("answers") != rows[number - 1]["answers"]:
            raise bad_input(path, "its answers are not those of the data file's line "
                                  f"{number}", PRED_FORMAT, number)
        out.append(item["pred"])
    return out


def prediction_line(row: dict[str, Any], pred: str) -> str:
    """A line of ``pred/<dataset>.jsonl`` as LongBench's pred.py writes it (its eval.py reads
    pred, answers, all_classes and length)."""
    return json.dumps({"pred": pred, "answers": row["answers"],
                       "all_classes": row.get("all_classes"), "length": row["length"]},
                      ensure_ascii=False)


def generate_batch(model, tokenizer, prompts: list[list[int]], max_new_tokens: int
                   ) -> list[str]:
    """Greedy answers to token-id prompts generated together: left-padded with the end token,
    masked, and decoded after the padded prompt length (one prompt: no padding at all), from
    the model's original state (``forget_prompts``)."""
    import torch

    device = next(model.parameters()).device
    pad = tokenizer.eos_token_id
    width = max(len(ids) for ids in prompts)
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts], device=device)
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=device)
    forget_prompts(model)
    with torch.no_grad():
        out = model.generate(ids, attention_mask=mask, do_sample=False,
                             max_new_tokens=max_new_tokens, pad_token_id=pad)
    return [tokenizer.decode(seq[width:], skip_special_tokens=True) for seq in out]


def evaluate(model, tokenizer, data_dir: str | Path, config_dir: str | Path, max_length: int,
             datasets: list[str] | None = None, limit: int | None = None,
             pred_dir: str | Path | None = None, batch_size: int = 1) -> dict[str, Any]:
    """Greedy generation on every dataset, scores per bucket, and the averaged score.
    ``batch_size`` prompts at a time where padding is safe for the model (``pads_safely``), one
    at a time where it is not. With ``pred_dir``, each prediction is appended to
    ``pred_dir/<dataset>.jsonl`` (LongBench's form) as it is made, and the predictions already
    there are reused: a rerun, or a job restarted after a kill, generates only the missing
    ones."""
    prompts, maxlen = load_tables(config_dir)
    model.eval()
    batch_size = batch_size if pads_safely(model) else 1
    results: dict[str, dict[str, float]] = {}
    for dataset in datasets or DATASETS:
        rows = load_dataset_file(data_dir, dataset, limit)
        path = Path(pred_dir) / f"{dataset}.jsonl" if pred_dir is not None else None
        predictions = read_predictions(path, rows) if path is not None else []
        if path is not None:  # the reused lines only (a cut last line is dropped)
            atomic_write_text(path, "".join(prediction_line(r, p) + "\n"
                                            for r, p in zip(rows, predictions)))
        for start in range(len(predictions), len(rows), batch_size):
            chunk = rows[start:start + batch_size]
            ids = [truncate_middle(tokenizer(prompts[dataset].format(**row))["input_ids"],
                                   max_length) for row in chunk]
            answers = generate_batch(model, tokenizer, ids, maxlen[dataset])
            predictions += answers
            if path is not None:
                with path.open("a", encoding="utf-8") as handle:
                    handle.writelines(prediction_line(r, p) + "\n"
                                      for r, p in zip(chunk, answers))
        results[dataset] = score_dataset(dataset, rows, predictions)
    return {"per_dataset": results, "longbench_e": longbench_e_score(results),
            "averaging": "unweighted mean over datasets of their overall scores"}


#: the fixture's rows: (dataset, input, context, answers, length in words, all_classes)
_FIXTURE = {
    "passage_count": [
        ("How many unique paragraphs?", "Paragraph 1: a b. Paragraph 2: c d.", ["2"], 900,
         None),
        ("How many unique paragraphs?", "Paragraph 1: e. Paragraph 2: e.", ["1"], 5200, None),
        ("How many unique paragraphs?", "Paragraph 1: f. Paragraph 2: g. Paragraph 3: h.",
         ["3"], 9100, None)],
    "qasper": [
        ("What is the corpus?", "We train on the books of the test corpus.", ["the books"],
         1200, None),
        ("Which metric?", "We report perplexity on held-out text.", ["perplexity"], 4500,
         None),
        ("How many layers?", "The model has four layers.", ["four", "4"], 8800, None)],
    "trec": [
        ("What city is the capital?", "Type: LOC. Type: NUM.", ["Location"], 700,
         ["Location", "Number", "Human"]),
        ("How many people?", "Type: NUM.", ["Number"], 8500, ["Location", "Number", "Human"])],
}
_FIXTURE_PROMPTS = {
    "passage_count": "{context}\n\n{input} Answer: ",
    "qasper": "Article: {context}\n\nQuestion: {input}\nAnswer:",
    "trec": "{context}\nQuestion: {input}\nType:",
}


def write_fixture(folder: str | Path) -> Path:
    """A tiny LongBench-format folder (three datasets, every length bucket, the two config
    tables): what ``smoke`` evaluates and the tests read, so the job's path is tested end to
    end without the benchmark's data. Its scores mean nothing."""
    folder = Path(folder)
    for dataset, rows in _FIXTURE.items():
        lines = [json.dumps({"input": q, "context": c, "answers": a, "length": n,
                             "all_classes": k, "dataset": dataset, "language": "en",
                             "_id": f"{dataset}-{i}"})
                 for i, (q, c, a, n, k) in enumerate(rows)]
        atomic_write_text(folder / f"{dataset}_e.jsonl", "\n".join(lines) + "\n")
    atomic_write_text(folder / "dataset2prompt.json", json.dumps(_FIXTURE_PROMPTS, indent=1))
    atomic_write_text(folder / "dataset2maxlen.json",
                      json.dumps({d: 4 for d in _FIXTURE_PROMPTS}, indent=1))
    return folder


FIXTURE_DATASETS = list(_FIXTURE)


def bucket_scores(per_dataset: dict[str, dict[str, float]]) -> dict[str, float]:
    """Per length bucket, the unweighted mean over the datasets that have samples in it (the
    Tables 2-3 layout by length; our rule, as ``longbench_e_score``)."""
    out = {}
    for name, _, _ in BUCKETS:
        values = [d[name] for d in per_dataset.values() if name in d]
        if values:
            out[name] = sum(values) / len(values)
    return out
