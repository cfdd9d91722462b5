"""A published snapshot of a finished profile, for readers who will not run the pipeline.

``make publish`` (``python -m lsa publish --profile mini``) copies, from the outputs of the last
``make reproduce``, into the committed folder ``docs/results/<profile>/``:

- ``claims.md`` / ``claims.csv``: every claim with the paper's value, ours and the verdict;
- ``figures/*.png``: every figure of the profile;
- ``notebooks/*.html``: the executed notebooks rendered by nbconvert;
- ``STAMP.md`` and ``stamp.json``: the commit, date, machine and wall time of the run the files
  come from, and where its time went (``lsa.timings``).

It refuses unless the profile's outputs pass ``python -m lsa check`` and ``make reproduce``
recorded its wall time: only a real run produces a snapshot. The folder is replaced whole, so no
stale file survives from an earlier snapshot.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import shutil
from pathlib import Path
from typing import Any

from lsa import files, paths, timings

REPORT = "06_replication_report"


class NotPublishable(RuntimeError):
    """The profile's outputs are missing, failing their checks, or not from ``make reproduce``."""


def destination(profile: str) -> Path:
    return paths.ROOT / "docs" / "results" / profile


def machine() -> dict[str, Any]:
    info = files.device_info()
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        info["memory_gib"] = round(pages * size / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        pass
    return info


def publish(profile: str = "mini", dest: Path | None = None) -> Path:
    from lsa.pipeline import check_outputs, pipeline_config

    problems = check_outputs(pipeline_config(profile))
    if problems:
        raise NotPublishable(f"profile {profile} fails its checks ({len(problems)} problems, "
                             f"first: {problems[0]}); run `make reproduce PROFILE={profile}`")
    record = timings.reproduce_file(profile)
    if not record.exists():
        raise NotPublishable(f"{record} is missing: publish the outputs of `make reproduce "
                             f"PROFILE={profile}`, which records its wall time there")
    dest = dest or destination(profile)
    staging = dest.with_name(f".{dest.name}.staging")
    shutil.rmtree(staging, ignore_errors=True)
    (staging / "figures").mkdir(parents=True)
    (staging / "notebooks").mkdir()
    report_dir = paths.section_dir(profile, REPORT)
    for ext in ("md", "csv"):
        shutil.copy2(report_dir / f"claims.{ext}", staging / f"claims.{ext}")
    for png in sorted(paths.figures_dir(profile).glob("*.png")):
        shutil.copy2(png, staging / "figures" / png.name)
    notebooks = sorted((paths.results_dir(profile) / "notebooks").glob("*.ipynb"))
    for nb in notebooks:
        _render_html(nb, staging / "notebooks" / f"{nb.stem}.html")
    stamp = {"profile": profile, "commit": _run_commit(profile) or files.git_commit(),
             "published_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
             "reproduce": json.loads(record.read_text()), "machine": machine(),
             "notebooks": [nb.stem for nb in notebooks]}
    files.write_json(staging / "stamp.json", stamp)
    files.atomic_write_text(staging / "STAMP.md", _stamp_markdown(stamp, profile))
    shutil.rmtree(dest, ignore_errors=True)
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging.rename(dest)
    return dest


def _run_commit(profile: str) -> str | None:
    """The commit recorded by the replication report's own run."""
    info = paths.section_dir(profile, REPORT) / "run_info.json"
    try:
        return json.loads(info.read_text()).get("git_commit")
    except (OSError, ValueError):
        return None


def _render_html(notebook: Path, out: Path) -> None:
    import nbformat
    from nbconvert import HTMLExporter

    body, _ = HTMLExporter().from_notebook_node(nbformat.read(notebook, as_version=4))
    files.atomic_write_text(out, body)


def _stamp_markdown(stamp: dict[str, Any], profile: str) -> str:
    rep, mach = stamp["reproduce"], stamp["machine"]
    lines = [f"# Published results: profile `{profile}`", "",
             f"- commit: `{stamp['commit']}`",
             f"- run finished: {rep.get('finished_utc')}; published {stamp['published_utc']}",
             f"- machine: {mach.get('platform')}, {mach.get('cpu_count')} CPUs, "
             f"{mach.get('memory_gib', '?')} GiB, CUDA: {mach.get('cuda')}",
             f"- `make reproduce` wall time: {rep['wall_s'] / 60:.1f} min "
             f"({rep.get('cores', '?')} cores)"
             + (f"; {rep['note']}" if rep.get("note") else ""), "",
             "## Where the time went", "", timings.markdown(profile)]
    return "\n".join(lines) + "\n"
