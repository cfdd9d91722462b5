"""A profile's published results, as a notebook can read them without training.

``make publish`` writes, beside the snapshot's claims, figures and executed notebooks
(``lsa.publish``), what the section notebooks read (``export``):

- ``runs/<run id>/``: for every run a section or a premise gate reads, its ``metrics.json``
  (evaluations, per-probe and per-sample scores) and ``metrics.jsonl`` (the training log),
  gzipped (``lsa.files.write_packed``), and its ``train_summary.json`` (the finished marker);
  never weights;
- ``sections/<section>/``: each section's ``metrics.json`` (gzipped) and ``run_info.json``, what
  the replication report gathers;
- ``MANIFEST.json``: the commit and date of the run, and every file above with its sha256 and
  size.

A notebook run alone whose runs are not made here (``lsa.notebook.Setup.ensure_runs``) reads
that snapshot instead when it holds every run the section reads under the current
configuration's run ids (``load`` checks every file against the manifest first), says so in its
first output and saves nothing: the same readers, gates and sections as the pipeline's, so the
same tables and verdicts (``tests/test_published.py`` re-analyses ``mini`` and compares).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsa import files, paths
from lsa.markers import FINISHED, LOG

if TYPE_CHECKING:
    from lsa.config import PipelineConfig
    from lsa.runs import Run, RunSet

MANIFEST = "MANIFEST.json"
#: a run's files a section or gate reads (gzipped in the snapshot), beside its marker
RUN_FILES = ("metrics.json", LOG)


class SnapshotDamaged(RuntimeError):
    """A published file is missing or differs from the manifest's checksum."""


def folder(profile: str) -> Path:
    """The committed snapshot of ``profile`` (``docs/results/<profile>/``)."""
    return paths.ROOT / "docs" / "results" / profile


def read_runs(pipe: PipelineConfig, plan: RunSet) -> list[Run]:
    """Every run that a section of ``pipe`` or a premise gate reads, each once (the runs a
    snapshot must hold for its notebooks to run alone)."""
    kinds = sorted({k for spec in pipe.sections.values() for k in spec.uses_runs} | {"gates"})
    return plan.used_by(kinds)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def export(pipe: PipelineConfig, plan: RunSet, dest: Path, stamp: dict[str, Any]
           ) -> dict[str, Any]:
    """Write the run and section files of ``pipe``'s finished outputs under ``dest`` (module
    docstring) and its manifest; returns the manifest. ``stamp``: the snapshot's commit and
    date (``lsa.publish``)."""
    written: list[Path] = []
    for run in read_runs(pipe, plan):
        if not run.finished:
            continue
        out = dest / "runs" / run.id
        for name in RUN_FILES:
            if (run.folder / name).exists():
                written.append(files.write_packed(out / name, (run.folder / name).read_bytes()))
        written.append(files.atomic_write_text(out / FINISHED,
                                               (run.folder / FINISHED).read_text()))
    for key in pipe.sections:
        source = paths.section_dir(pipe.profile, key)
        if (source / "metrics.json").exists():
            out = dest / "sections" / key
            written.append(files.write_packed(out / "metrics.json",
                                              (source / "metrics.json").read_bytes()))
            written.append(files.atomic_write_text(out / "run_info.json",
                                                   (source / "run_info.json").read_text()))
    manifest = {"profile": pipe.profile, "commit": stamp.get("commit"),
                "run_finished_utc": stamp.get("reproduce", {}).get("finished_utc"),
                "bytes": sum(p.stat().st_size for p in written),
                "files": {p.relative_to(dest).as_posix(): {"sha256": _sha256(p),
                                                            "bytes": p.stat().st_size}
                          for p in sorted(written)}}
    files.write_json(dest / MANIFEST, manifest)
    return manifest


@dataclass(frozen=True)
class Snapshot:
    """A checked snapshot: its folder and manifest."""

    root: Path
    manifest: dict[str, Any]

    @property
    def runs(self) -> Path:
        return self.root / "runs"

    @property
    def sections(self) -> Path:
        return self.root / "sections"

    def describe(self) -> str:
        commit = (self.manifest.get("commit") or "?")[:7]
        when = (self.manifest.get("run_finished_utc") or "?")[:10]
        where = self.root.relative_to(paths.ROOT) if self.root.is_relative_to(paths.ROOT) \
            else self.root
        return (f"published results of `{self.manifest['profile']}`, commit {commit}, run on "
                f"{when} ({where}/, {len(self.manifest['files'])} files, checksums verified)")


def load(profile: str, root: Path | None = None) -> Snapshot | None:
    """The published snapshot of ``profile`` with every file checked against its manifest, or
    None where none was published with run files; ``SnapshotDamaged`` naming the first file
    that is missing or changed."""
    root = root or folder(profile)
    if not (root / MANIFEST).exists():
        return None
    manifest = files.read_json(root / MANIFEST)
    for name, entry in manifest["files"].items():
        path = root / name
        if not path.exists() or _sha256(path) != entry["sha256"]:
            state = "missing" if not path.exists() else "changed"
            raise SnapshotDamaged(f"{path}: {state} against {root / MANIFEST}; restore the "
                                  f"snapshot with `git checkout -- {root}`")
    return Snapshot(root, manifest)
