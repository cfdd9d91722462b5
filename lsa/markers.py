"""The files of a run's folder that say how far its job got, below both the planner
(``lsa.runs``) and the trainer (``lsa.train``), which import them from here:

- ``metrics.jsonl`` (``LOG``): one line per optimizer step (``read_log``);
- ``train_summary.json`` (``FINISHED``), written last by ``mark_finished`` once the files of
  the folder are whole (every JSON parses, every ``.safetensors`` file holds what its header
  announces): a folder with it is finished (``is_finished``) and reused; anything else is
  (re)started. Beside the job's summary it records the sha256 of every file the run wrote
  (``files``: weights, model and generation configs, tokenizer, ``config.json``, the log,
  ``metrics.json``, ``run_info.json``, by their paths in the folder), of a model it read from
  outside its folder (``inputs``: SmolLM2's cached copy), and its own (``sha256``, over the
  rest), so a file deleted or changed after the job, one byte of the weights included, and a
  changed marker are found (``output_problems``) by reading a run's own files alone: a few MB
  for the CPU profiles, the weights' size elsewhere. A run a job reads (a fine-tune's base
  model) is verified by its own record. ``inputs`` are recorded, not verified again: they
  say what the numbers were made from, and a cache damaged later does not damage the run.
- A finished run that does not verify is never used: ``python -m lsa pipeline`` takes its
  marker away (``lsa.pipeline.unmark_broken_runs``), so it is made again; a job run by hand
  does the same for its run and stops on a run it reads (``lsa.launch.verify_job``); ``python
  -m lsa check`` names each file. A run finished before markers recorded checksums has no
  ``files``: it is not verified, so it is made again like a damaged one. A published
  snapshot's or the study's kept runs (gzipped, no weights) are verified by their
  snapshot's manifest instead (``lsa.published``, ``lsa.kept``; ``lsa.runs.Run.problems``).

No torch; nothing from lsa but ``lsa.files``' reader, writer and checksum. No number depends
on this module (the workflow's run inputs leave it out: workflow/settings.yaml).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from lsa.files import jsonable, read_text, sha256, shell_path, write_json

FINISHED = "train_summary.json"  # written last: the run is finished
LOG = "metrics.jsonl"            # one line per optimizer step
RECORD = ("files", "inputs", "sha256")  # what mark_finished adds to the job's summary
CHECKPOINT = "checkpoint"        # removed once the run is marked: not recorded


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


def _checksum(record: dict[str, Any]) -> str:
    """The marker's own checksum: the sha256 of its content without it, in one canonical
    form (a change of layout alone changes nothing it says)."""
    rest = {k: v for k, v in record.items() if k != "sha256"}
    text = json.dumps(rest, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _own_files(folder: Path) -> list[str]:
    """Every file of a run's folder, by its path in it, but the marker and the checkpoint."""
    return sorted(rel for path in folder.rglob("*") if path.is_file()
                  and (rel := path.relative_to(folder).as_posix()) != FINISHED
                  and not rel.startswith(f"{CHECKPOINT}/"))


def _whole_problems(folder: Path, finished: bool) -> dict[str, str]:
    """What is wrong with a run's files, read as what they are (``output_problems``), by path."""
    found: dict[str, str] = {}
    names = ["metrics.json", "run_info.json", *(["config.json"] if (folder / "config.json")
                                                .exists() else [])]
    for name in names + ([FINISHED] if finished else []):
        try:
            value = json.loads((folder / name).read_text())
        except FileNotFoundError:
            found[name] = f"{name} missing"
            continue
        except (OSError, ValueError) as exc:
            found[name] = f"{name} unreadable ({exc})"
            continue
        if not isinstance(value, dict):
            found[name] = f"{name}: not a JSON object"
    if (folder / LOG).exists():
        for i, line in enumerate((folder / LOG).read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                json.loads(line)
            except ValueError:
                found[LOG] = f"{LOG}, line {i}: not JSON ({line[:40]!r})"
                break
    for path in sorted((folder / "tokenizer").glob("*.json")):  # a base model's tokenizer
        try:
            json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            found[f"tokenizer/{path.name}"] = f"tokenizer/{path.name} unreadable ({exc})"
    for path in sorted((folder / "model").glob("*.safetensors")):
        problem = _safetensors_problem(path)
        if problem:
            found[f"model/{path.name}"] = f"model/{problem}"
    return found


def _record_problems(folder: Path, found: dict[str, str]) -> None:
    """Add to ``found`` what the marker's record says is wrong: no record (a run finished
    before markers recorded checksums), the marker changed since it was written (its record is
    then not gone by), or a recorded file missing or changed (each hashed once, unless already
    found wrong)."""
    if FINISHED in found:  # unreadable: no record to read
        return
    marker = json.loads((folder / FINISHED).read_text())
    if not isinstance(marker.get("files"), dict):
        found[FINISHED] = (f"{FINISHED} records no checksums of the run's files (the run was "
                           "finished before runs recorded them): not verified")
        return
    if marker.get("sha256") != _checksum(marker):  # a record not to go by
        found[FINISHED] = f"{FINISHED}: changed since the run was finished (its own checksum)"
        return
    for name, recorded in marker["files"].items():
        if name in found:
            continue
        if not (folder / name).is_file():
            found[name] = f"{name} missing"
        elif sha256(folder / name) != recorded:
            found[name] = f"{name}: changed since the run was finished (its sha256)"


def output_problems(folder: str | Path, finished: bool = True) -> list[str]:
    """What is wrong with the files a run wrote, one line each, naming the file by its path in
    the folder: every JSON file parses (``metrics.json`` and ``run_info.json`` always,
    ``config.json``, each line of the log and a base model's ``tokenizer/*.json`` where they
    exist) and every ``.safetensors`` file under ``model/`` holds what its header announces;
    and, for a ``finished`` run, the marker parses and every file it records is there with its
    recorded sha256 (the module's docstring). An empty list: the outputs are whole. The job
    checks the first before it writes the marker; the pipeline, ``python -m lsa check`` and a
    job run by hand check both before they take a marked run as finished."""
    folder = Path(folder)
    found = _whole_problems(folder, finished)
    if finished:
        _record_problems(folder, found)
    return list(found.values())


class IncompleteOutputs(RuntimeError):
    """A job's outputs did not verify: the run is not marked finished."""


def mark_finished(folder: str | Path, summary: dict[str, Any],
                  inputs: Iterable[Path] = ()) -> None:
    """Mark a run finished, after its evaluation and once its outputs are whole
    (``output_problems``), so a half-done or half-written run is never reused: the marker is
    ``summary`` with the sha256 of every file of the folder, of ``inputs`` (files outside it
    the run read: a cached model) and its own (the module's docstring). Its checkpoint is no
    longer needed."""
    folder = Path(folder)
    problems = output_problems(folder, finished=False)
    if problems:
        raise IncompleteOutputs(f"{folder}: not marked finished: " + "; ".join(problems))
    marker = {**summary, "files": {name: sha256(folder / name) for name in _own_files(folder)}}
    read = {shell_path(path): sha256(path) for path in inputs}
    marker = jsonable({**marker, **({"inputs": read} if read else {})})
    write_json(folder / FINISHED, {**marker, "sha256": _checksum(marker)})
    ckpt = folder / CHECKPOINT
    if ckpt.exists():
        shutil.rmtree(ckpt)


def read_summary(folder: str | Path) -> dict[str, Any]:
    """The job's summary in a finished run's marker (or its gzip copy), without the record."""
    marker = json.loads(read_text(Path(folder) / FINISHED))
    return {k: v for k, v in marker.items() if k not in RECORD}


def read_log(folder: str | Path) -> list[dict[str, Any]]:
    """The training log: one record per optimizer step."""
    text = read_text(Path(folder) / LOG)  # or its gzip copy (a published snapshot's)
    return [json.loads(line) for line in text.splitlines() if line.strip()]
