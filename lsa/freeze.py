"""The study's freeze (issue 62; ``docs/preregistration.md``, section 8): ``docs/study.lock``
records the commit that froze the pre-registration and the sha256 of everything that decides
the study's numbers, so that one version of the code makes all of its runs.

What it holds:

- ``commit``: the commit that froze ``docs/preregistration.md`` (its first commit under that
  name); every commit that makes a study run descends from it
  (``tests/workflow/test_study_lock.py``);
- ``files``: the sha256 of the document, of the analysis (``lsa/study.py`` and the section's
  ``__init__``, ``claims`` and ``tables``: its figures draw, they compute nothing), and of the
  run modules of the study's kinds of run (``workflow/settings.yaml``'s ``run_modules`` of
  ``base``, ``finetune`` and ``probe``);
- ``config``: the sha256 of the study profile's settings that decide its runs and verdicts
  (``seed``, ``pretrain``, ``finetune``, ``gates``, ``population`` and ``study`` but its
  ``stages``, which the interim look may raise to 2: no run id changes with it);
- ``status``: ``open`` until the study closes (then ``closed``, and the test stops holding the
  hashes).

``python -m lsa study lock`` writes it; ``changed`` lists what differs from it. A fix to a
locked file during the study waits until it closes, or restarts the study as a deviation
listed in the pre-registration (a new lock).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsa import files, paths

if TYPE_CHECKING:
    from lsa.config import PipelineConfig

LOCK = paths.ROOT / "docs" / "study.lock"
PREREGISTRATION = "docs/preregistration.md"
ANALYSIS = ("lsa/study.py", "lsa/sections/study/__init__.py", "lsa/sections/study/claims.py",
            "lsa/sections/study/tables.py")
RUN_KINDS = ("base", "finetune", "probe")
CONFIG_KEYS = ("seed", "pretrain", "finetune", "gates", "population", "study")


@dataclass(frozen=True)
class Freeze:
    """One pre-registration's freeze: its lock file, its document, the analysis that decides
    its verdicts, the kinds of run whose modules decide its runs, the profile whose settings
    it fixes (``config_keys``, less ``left_out``: settings a planned look may change), all
    under ``root``. ``STUDY`` is the confirmatory study's; another pre-registration (issue
    75's real-LM design) freezes with its own."""

    lock: Path
    document: str
    analysis: tuple[str, ...]
    run_kinds: tuple[str, ...]
    profile: str
    config_keys: tuple[str, ...]
    left_out: dict[str, tuple[str, ...]] = field(default_factory=dict)
    root: Path = paths.ROOT


STUDY = Freeze(LOCK, PREREGISTRATION, ANALYSIS, RUN_KINDS, "study", CONFIG_KEYS,
               {"study": ("stages",)})


def locked_files(freeze: Freeze = STUDY) -> list[str]:
    """The document, the analysis and the run modules of the freeze's kinds of run, as paths
    under its root."""
    from lsa.pipeline import workflow_settings

    settings = workflow_settings()
    modules = dict.fromkeys(m for kind in freeze.run_kinds for m in settings.modules_of(kind))
    return [freeze.document, *freeze.analysis, *(f"lsa/{m}" for m in modules)]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def config_digest(pipe: PipelineConfig, freeze: Freeze = STUDY) -> str:
    """The sha256 of the settings that decide the freeze's runs and verdicts (its
    ``config_keys``, less its ``left_out``)."""
    data = pipe.to_dict()
    chosen: dict[str, Any] = {k: data[k] for k in freeze.config_keys}
    for key, names in freeze.left_out.items():
        chosen[key] = {k: v for k, v in chosen[key].items() if k not in names}
    return hashlib.sha256(json.dumps(chosen, sort_keys=True).encode()).hexdigest()


def current(pipe: PipelineConfig, commit: str, freeze: Freeze = STUDY) -> dict[str, Any]:
    """The lock of the working tree as it is, for the freeze at ``commit``."""
    return {"commit": commit, "status": "open",
            "files": {p: _sha256(freeze.root / p) for p in locked_files(freeze)},
            "config": config_digest(pipe, freeze)}


def read(path: Path = LOCK) -> dict[str, Any] | None:
    """The committed lock, or None before the freeze."""
    return files.read_json(path) if path.exists() else None


def changed(pipe: PipelineConfig, lock: dict[str, Any], freeze: Freeze = STUDY) -> list[str]:
    """What differs from ``lock``: a locked file changed, gone or added, or the settings."""
    now = current(pipe, lock["commit"], freeze)
    out = [p for p in sorted({*lock["files"], *now["files"]})
           if lock["files"].get(p) != now["files"].get(p)]
    if now["config"] != lock["config"]:
        out.append(f"config/config.yaml (the {freeze.profile} profile's settings)")
    return out


def write(pipe: PipelineConfig, commit: str, path: Path | None = None,
          freeze: Freeze = STUDY) -> dict[str, Any]:
    """Write the lock for the freeze at ``commit`` (its document's commit) to ``path`` (the
    freeze's lock file by default)."""
    lock = current(pipe, commit, freeze)
    files.write_json(path or freeze.lock, lock)
    return lock
