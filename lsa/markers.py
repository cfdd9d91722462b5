"""The files of a run's folder that say how far its job got, below both the planner
(``lsa.runs``) and the trainer (``lsa.train``), which import them from here:

- ``metrics.jsonl`` (``LOG``): one line per optimizer step (``read_log``);
- ``train_summary.json`` (``FINISHED``), written last by ``mark_finished`` once the files of
  the folder verify (``output_problems``): a folder with it is finished (``is_finished``) and
  reused; anything else is (re)started. ``python -m lsa pipeline`` takes the marker away from a
  run whose files no longer verify (``lsa.pipeline.unmark_broken_runs``).

No torch; nothing from lsa but ``lsa.files``' reader and writer. No number depends on this
module (the workflow's run inputs leave it out: workflow/settings.yaml).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from lsa.files import read_text, write_json

FINISHED = "train_summary.json"  # written last: the run is finished
LOG = "metrics.jsonl"            # one line per optimizer step


def is_finished(folder: Path) -> bool:
    return (Path(folder) / FINISHED).exists()


def _safetensors_problem(path: Path) -> str | None:
    """Why a ``.safetensors`` file is unreadable (a cut header or data), or None."""
    size = path.stat().st_size
    try:
        with open(path, "rb") as fh:
            n = int.from_bytes(fh.read(8), "little")
            if size < 8 + n:
                return f"{path.name}: cut inside its header ({size} bytes)"
            header = json.loads(fh.read(n))
    except (OSError, ValueError) as exc:
        return f"{path.name}: unreadable header ({exc})"
    end = max((v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"),
              default=0)
    if size < 8 + n + end:
        return f"{path.name}: {size} bytes, its header describes {8 + n + end}"
    return None


def output_problems(folder: str | Path, finished: bool = True) -> list[str]:
    """What is wrong with the files a run wrote: every JSON file parses (``metrics.json`` and
    ``run_info.json`` always, ``config.json``, each line of the log and a base model's
    ``tokenizer/*.json`` where they exist, the marker when ``finished``), and every
    ``.safetensors`` file under ``model/`` holds what its header announces. An empty list:
    the outputs are whole. The job checks this before it writes the marker; the pipeline, and
    a job run by hand, before they take a marked run as finished."""
    folder = Path(folder)
    problems: list[str] = []
    names = ["metrics.json", "run_info.json", *(["config.json"] if (folder / "config.json")
                                                .exists() else [])]
    for name in names + ([FINISHED] if finished else []):
        try:
            value = json.loads((folder / name).read_text())
        except FileNotFoundError:
            problems.append(f"{name} missing")
            continue
        except (OSError, ValueError) as exc:
            problems.append(f"{name} unreadable ({exc})")
            continue
        if not isinstance(value, dict):
            problems.append(f"{name}: not a JSON object")
    if (folder / LOG).exists():
        for i, line in enumerate((folder / LOG).read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                json.loads(line)
            except ValueError:
                problems.append(f"{LOG}, line {i}: not JSON ({line[:40]!r})")
                break
    for path in sorted((folder / "tokenizer").glob("*.json")):  # a base model's tokenizer
        try:
            json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            problems.append(f"tokenizer/{path.name} unreadable ({exc})")
    for path in sorted((folder / "model").glob("*.safetensors")):
        problem = _safetensors_problem(path)
        if problem:
            problems.append(f"model/{problem}")
    return problems


class IncompleteOutputs(RuntimeError):
    """A job's outputs did not verify: the run is not marked finished."""


def mark_finished(folder: str | Path, summary: dict[str, Any]) -> None:
    """Mark a run finished, after its evaluation and once its outputs verify
    (``output_problems``), so a half-done or half-written run is never reused; its checkpoint
    is no longer needed."""
    folder = Path(folder)
    problems = output_problems(folder, finished=False)
    if problems:
        raise IncompleteOutputs(f"{folder}: not marked finished: " + "; ".join(problems))
    write_json(folder / FINISHED, summary)
    ckpt = folder / "checkpoint"
    if ckpt.exists():
        shutil.rmtree(ckpt)


def read_log(folder: str | Path) -> list[dict[str, Any]]:
    """The training log: one record per optimizer step."""
    text = read_text(Path(folder) / LOG)  # or its gzip copy (a published snapshot's)
    return [json.loads(line) for line in text.splitlines() if line.strip()]
