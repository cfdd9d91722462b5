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
same tables and verdicts (``tests/e2e/test_published_snapshots.py`` re-analyses ``mini``
and compares).
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


class SnapshotDamaged(files.DamagedFile):
    """A published file is missing or differs from the manifest's checksum."""


#: the replication report's section: its claims table is a snapshot's (``claims.csv``)
REPORT = "06_replication_report"

#: set (to 1) while ``lsa publish --rerender`` runs a snapshot's notebooks again: a notebook
#: reads the snapshot's runs as a reader's does, and saves its results, which become the
#: snapshot's (``rerendering``)
RERENDER = "LSA_RERENDER"


def rerendering() -> bool:
    """Whether this process renders a published snapshot again (``RERENDER``): its notebooks
    save what they compute from the snapshot's runs, and the report gathers those."""
    import os

    return os.environ.get(RERENDER) == "1"


def folder(profile: str) -> Path:
    """The committed snapshot of ``profile`` (``docs/results/<profile>/``)."""
    from lsa import runs

    return runs.snapshot_folder(profile)


def read_runs(pipe: PipelineConfig, plan: RunSet) -> list[Run]:
    """Every run that a section of ``pipe`` or a premise gate reads, each once (the runs a
    snapshot must hold for its notebooks to run alone)."""
    kinds = sorted({k for spec in pipe.sections.values() for k in spec.uses_runs} | {"gates"})
    return plan.used_by(kinds)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _export_run(run: Run, dest: Path) -> list[Path]:
    """A finished run's files as a snapshot keeps them (gzipped, beside its marker)."""
    out, written = dest / "runs" / run.id, []
    for name in RUN_FILES:
        if (run.folder / name).exists():
            written.append(files.write_packed(out / name, (run.folder / name).read_bytes()))
    written.append(files.atomic_write_text(out / FINISHED, (run.folder / FINISHED).read_text()))
    return written


def _listed(paths_: list[Path], dest: Path) -> dict[str, dict[str, Any]]:
    return {p.relative_to(dest).as_posix(): {"sha256": sha256(p), "bytes": p.stat().st_size}
            for p in sorted(paths_)}


def export(pipe: PipelineConfig, plan: RunSet, dest: Path, stamp: dict[str, Any]
           ) -> dict[str, Any]:
    """Write the run and section files of ``pipe``'s finished outputs under ``dest`` (module
    docstring) and its manifest; returns the manifest. ``stamp``: the snapshot's commit and
    date (``lsa.publish``)."""
    written: list[Path] = []
    for run in read_runs(pipe, plan):
        if run.finished:
            written += _export_run(run, dest)
    for key in pipe.sections:
        source = paths.section_dir(pipe.profile, key)
        if (source / "metrics.json").exists():
            out = dest / "sections" / key
            written.append(files.write_packed(out / "metrics.json",
                                              (source / "metrics.json").read_bytes()))
            written.append(files.atomic_write_text(out / "run_info.json",
                                                   (source / "run_info.json").read_text()))
    manifest = {"profile": pipe.profile, "commit": stamp.get("commit"),
                "notebook_commits": notebook_commits(dest),
                "run_commits": stamp.get("run_commits", []),
                "run_finished_utc": stamp.get("reproduce", {}).get("finished_utc"),
                "bytes": sum(p.stat().st_size for p in written),
                "files": _listed(written, dest)}
    files.write_json(dest / MANIFEST, manifest)
    return manifest


def _counted(runs, read) -> list[tuple[str, int]]:
    """``read(run_info)`` of each finished run ('unknown' where unreadable or unrecorded), with
    how many runs gave it, most first."""
    counts: dict[str, int] = {}
    for run in runs:
        try:
            value = read(files.read_json(run.folder / "run_info.json"))
        except (OSError, ValueError):
            value = None
        counts[value or "unknown"] = counts.get(value or "unknown", 0) + 1
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))


def run_commits(runs) -> list[dict[str, Any]]:
    """The commits that made ``runs`` (each finished run's ``run_info.json``), with how many
    runs each made, most first: a snapshot's runs can come from several (a resumed
    ``make reproduce``, runs reused from an earlier one), and its notebooks from another."""
    return [{"commit": c, "runs": n} for c, n in _counted(runs, lambda i: i.get("git_commit"))]


def run_kernels(runs) -> list[dict[str, Any]]:
    """The CPU kernels torch ran ``runs`` on (each run's ``run_info.json``: its ATen capability
    and the kernel pin, ``lsa.kernels.pins``), with how many runs each, most first; a run made
    before the pin was recorded counts as ``native`` (nothing pinned it then)."""
    def read(info: dict[str, Any]) -> str | None:
        device = info.get("device") or {}
        if not device.get("cpu_capability"):
            return None
        return (f"{device['cpu_capability']} "
                f"({(device.get('kernel_pin') or {}).get('state', 'native')})")

    return [{"kernels": k, "runs": n} for k, n in _counted(runs, read)]


def notebook_commits(root: Path, keys=None) -> list[dict[str, Any]]:
    """The commit each notebook of the snapshot (or results folder) at ``root`` ran at, read
    from its section's own ``sections/<key>/run_info.json`` (a results folder's
    ``<key>/run_info.json``; ``keys``: those sections only), grouped by commit, most notebooks
    first: ``[{"commit": ..., "notebooks": [key, ...]}]``."""
    found: dict[str, list[str]] = {}
    base = root / "sections" if (root / "sections").is_dir() else root
    for info in sorted(base.glob("*/run_info.json")):
        if keys is not None and info.parent.name not in keys:
            continue
        try:
            commit = files.read_json(info).get("git_commit") or "unknown"
        except (OSError, ValueError):
            commit = "unknown"
        found.setdefault(commit, []).append(info.parent.name)
    return [{"commit": c, "notebooks": names}
            for c, names in sorted(found.items(), key=lambda item: (-len(item[1]), item[0]))]


def notebooks_ran_at(record: dict[str, Any]) -> str:
    """``a1b2c3d`` where every notebook of a snapshot (its stamp or manifest) ran at one commit,
    else each commit with its notebooks' numbers (``a1b2c3d (01, 02, 04, 06), e4f5a6b (03,
    05)``); a record older than ``notebook_commits`` names its one ``commit``."""
    groups = record.get("notebook_commits") or []
    if len(groups) <= 1:
        return f"`{(groups[0]['commit'] if groups else record.get('commit') or '?')[:7]}`"
    return ", ".join(f"`{g['commit'][:7]}` ({', '.join(k.split('_')[0] for k in g['notebooks'])})"
                     for g in groups)


def with_files(manifest: dict[str, Any], written: list[Path], root: Path) -> dict[str, Any]:
    """``manifest`` (of the snapshot at ``root``) listing ``written`` (files under ``root``)
    with their checksums, replacing the entries of the same names, and its ``bytes`` summed
    again; changed in place and returned (the caller writes it)."""
    manifest["files"] = dict(sorted({**manifest["files"], **_listed(written, root)}.items()))
    manifest["bytes"] = sum(entry["bytes"] for entry in manifest["files"].values())
    return manifest


def add_runs(root: Path, runs: list[Run], commit: dict[str, Any]) -> dict[str, Any]:
    """Add finished ``runs`` to the published snapshot at ``root`` without republishing it:
    their files as ``export`` writes them, listed in its manifest, and ``commit`` (``{"commit":
    ..., "note": ...}``, the commit that made them) among its ``run_commits`` in the manifest
    and ``stamp.json``. For a run kind the snapshot predates whose numbers the snapshot already
    shows (Section 3's grid): a run already listed is refused."""
    manifest = files.read_json(root / MANIFEST)
    for run in runs:
        if not run.finished:
            raise ValueError(f"{run.describe()} is not finished: nothing to add")
        if any(name.startswith(f"runs/{run.id}/") for name in manifest["files"]):
            raise ValueError(f"{root / 'runs' / run.id} is in the snapshot already")
    with_files(manifest, [p for run in runs for p in _export_run(run, root)], root)
    for record in (manifest, stamp := files.read_json(root / "stamp.json")):
        record["run_commits"] = [*record.get("run_commits", []), {**commit, "runs": len(runs)}]
    files.write_json(root / MANIFEST, manifest)
    files.write_json(root / "stamp.json", stamp)
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
        made = ", ".join(f"`{r['commit'][:7]}`" for r in self.manifest.get("run_commits") or [])
        when = (self.manifest.get("run_finished_utc") or "?")[:10]
        where = self.root.relative_to(paths.ROOT) if self.root.is_relative_to(paths.ROOT) \
            else self.root
        return (f"published results of `{self.manifest['profile']}`, notebooks at "
                f"{notebooks_ran_at(self.manifest)}"
                + (f", runs made by {made}" if made else "")
                + f", run on {when} ({where}/, {len(self.manifest['files'])} files, checksums "
                "verified)")


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
        if not path.exists() or sha256(path) != entry["sha256"]:
            state = "missing" if not path.exists() else "changed"
            raise SnapshotDamaged(f"{files.shell_path(path)}: {state} against "
                                  f"{files.shell_path(root / MANIFEST)}; restore the snapshot: "
                                  f"git checkout -- {files.shell_path(root)}")
    return Snapshot(root, manifest)
