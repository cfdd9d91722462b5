"""A published snapshot of a finished profile, for readers who will not run the pipeline.

``make publish`` (``python -m lsa publish --profile mini``) copies, from the outputs of the last
``make reproduce``, into the committed folder ``docs/results/<profile>/``:

- ``claims.md`` / ``claims.csv``: every claim with the paper's value, ours and the verdict;
- ``figures/*.png``: every figure of the profile;
- ``notebooks/*.ipynb``: the executed notebooks with their outputs (GitHub renders them; the
  cells' timing metadata dropped, so that a republished snapshot differs only where it does);
- ``gates.json``: the premise gates of the run (``lsa.gates``);
- ``STAMP.md`` and ``stamp.json``: the commit, date, machine, package versions and wall time of
  the run the files come from, its makespan beside the floor (the core time the jobs held
  over the cores), and where its time went (``lsa.timings``);
- ``RESULTS.md``: the results page, generated from the files above (``results_markdown``):
  the premise gates, the counts (the paper's claims apart from the project's controls), every
  claim with its numbers and verdict, and what moved since the snapshot it replaces;
- ``runs/``, ``sections/`` and ``MANIFEST.json``: what the notebooks read, so that a notebook
  run alone re-analyses the published results without training (``lsa.published``).

It refuses unless the profile's outputs pass ``python -m lsa check`` and ``make reproduce``
recorded its wall time: only a real run produces a snapshot. The folder is replaced whole, so no
stale file survives from an earlier snapshot.
"""

from __future__ import annotations

import base64
import datetime as _dt
import hashlib
import json
import re
import shutil
from pathlib import Path
from typing import Any

from lsa import compare, files, kept, paths, published, timings
from lsa.published import REPORT, run_commits, run_kernels
from lsa.runs import runs_of


class NotPublishable(RuntimeError):
    """The profile's outputs are missing, failing their checks, or not from ``make reproduce``."""


def destination(profile: str) -> Path:
    return published.folder(profile)


def machine() -> dict[str, Any]:
    """The publishing machine: its device, memory and the kernels its numerical libraries ran
    (``lsa.kernels.report``: NumPy's SIMD targets, OpenBLAS's core, torch's ATen capability,
    and the settings that choose them, unset when nothing pinned them)."""
    from lsa import kernels
    from lsa.preflight import host_memory

    info = files.device_info()
    memory = host_memory()
    if memory is not None:
        info["memory_gib"] = round(memory / 2**30, 1)
    info["kernels"] = kernels.report()
    return info


def publish(profile: str = "mini", dest: Path | None = None) -> Path:
    from lsa.pipeline import check_outputs, pipeline_config

    pipe = pipeline_config(profile)
    if pipe.study.enabled and dest is None:  # published beside its kept blocks
        return publish_study(profile)
    problems = check_outputs(pipe)
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
    report = files.read_json(report_dir / "metrics.json")
    if "gates" in report:
        files.write_json(staging / "gates.json", report["gates"])
    for png in sorted(paths.figures_dir(profile).glob("*.png")):
        shutil.copy2(png, staging / "figures" / png.name)
    notebooks = sorted((paths.results_dir(profile) / "notebooks").glob("*.ipynb"))
    figures = {hashlib.sha256(png.read_bytes()).hexdigest(): png.name
               for png in (staging / "figures").glob("*.png")}
    for nb in notebooks:
        _copy_notebook(nb, staging / "notebooks" / nb.name, figures)
    reproduce = json.loads(record.read_text())
    # the environment `make reproduce` ran in (recorded then); an older record has none, and
    # the environment publishing it stands in, marked so
    packages = reproduce.pop("packages", None)
    plan = runs_of(pipe)
    read = published.read_runs(pipe, plan)
    stamp = {"profile": profile, "commit": _run_commit(profile) or files.git_commit(),
             "run_commits": run_commits(read), "run_kernels": run_kernels(read),
             "published_utc": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
             "reproduce": reproduce, "machine": machine(),
             "packages": packages or files.installed_versions(),
             "packages_recorded_by": "make reproduce" if packages else "make publish",
             "notebooks": [nb.stem for nb in notebooks],
             "notebook_commits": published.notebook_commits(paths.results_dir(profile),
                                                             set(pipe.sections))}
    measured = compare.kernels_file(profile)
    if measured.exists():  # the tolerance, measured between two kernel configurations
        stamp["tolerance"] = compare.tolerance_from(
            compare.read_claims(measured), f"docs/bench/{measured.with_suffix('.md').name}")
    files.write_json(staging / "stamp.json", stamp)
    published.export(pipe, plan, staging, stamp)  # what the notebooks read, run alone
    ids = {r.id for r in plan}  # the profile's own runs, not a sharing profile's
    files.atomic_write_text(staging / "STAMP.md", _stamp_markdown(stamp, profile, ids))
    previous = dest / "claims.csv"
    files.atomic_write_text(staging / "RESULTS.md", results_markdown(
        staging, previous if previous.exists() else None))
    shutil.rmtree(dest, ignore_errors=True)
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging.rename(dest)
    files.atomic_write_text(dest.parent / "README.md", results_index(dest.parent))
    return dest


def publish_study(profile: str) -> Path:
    """Section 07 of the confirmatory study published beside its kept blocks
    (``docs/results/<profile>/``, ``lsa.kept``), which stay as they are: the section's
    ``metrics.json`` and ``run_info.json`` (``sections/``, what ``lsa.kept.status`` and the
    headline read), its claims, executed notebook and figures, each listed in the manifest; the
    manifest's and ``stamp.json``'s ``commit`` the one the notebook ran at; ``stamp.json``'s
    time summed over the kept bases' own records (``lsa.kept.base_time``: no log of a machine
    that made a block is needed); ``STAMP.md`` and ``RESULTS.md`` generated. It refuses a study
    with nothing kept, or whose section 07 has not run on what is kept."""
    from lsa.pipeline import check_outputs, pipeline_config

    pipe = pipeline_config(profile)
    root = published.folder(profile)
    found = kept.verify(profile)  # every kept file against its checksum
    if found is None:
        raise NotPublishable(f"{files.shell_path(root)} holds no kept block: keep the study's "
                             f"bases first (python -m lsa study keep --profile {profile})")
    problems = check_outputs(pipe)
    if problems:
        raise NotPublishable(f"profile {profile} fails its checks ({len(problems)} problems, "
                             f"first: {problems[0]}); run `make reproduce PROFILE={profile}` "
                             "(every base kept: it runs section 07 alone)")
    (key,) = pipe.sections
    source = paths.section_dir(profile, key)
    out = root / "sections" / key
    written = [files.write_packed(out / "metrics.json", (source / "metrics.json").read_bytes()),
               files.atomic_write_text(out / "run_info.json",
                                       (source / "run_info.json").read_text())]
    for ext in ("md", "csv"):
        target = root / f"claims.{ext}"
        shutil.copy2(source / f"claims.{ext}", target)
        written.append(target)
    (root / "figures").mkdir(exist_ok=True)
    for png in sorted(paths.figures_dir(profile).glob("*.png")):
        shutil.copy2(png, root / "figures" / png.name)
        written.append(root / "figures" / png.name)
    (root / "notebooks").mkdir(exist_ok=True)
    notebook = paths.executed_notebook(profile, key)
    _copy_notebook(notebook, root / "notebooks" / notebook.name)
    written.append(root / "notebooks" / notebook.name)
    commit = files.read_json(source / "run_info.json").get("git_commit") or files.git_commit()
    timed = [b["time"] for b in found.bases.values() if b.get("time")]
    cores = timings.cores_of(None)
    stamp = {**files.read_json(root / "stamp.json"), "profile": profile, "commit": commit,
             "published_utc": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
             "machine": machine(), "packages": files.installed_versions(),
             "packages_recorded_by": "make publish", "notebooks": [key],
             "reproduce": {"wall_s": round(kept.covered_s(timed), 1),
                           "floor_s": round(sum(t["core_s"] for t in timed) / cores, 1),
                           "cores": cores, "bases_timed": len(timed),
                           "bases": len(found.bases)}}
    files.write_json(root / "stamp.json", stamp)
    manifest = published.with_files(files.read_json(root / published.MANIFEST), written, root)
    files.write_json(root / published.MANIFEST, {**manifest, "commit": commit})
    files.atomic_write_text(root / "STAMP.md", study_stamp_markdown(stamp))
    files.atomic_write_text(root / "RESULTS.md", study_results_markdown(root, stamp))
    files.atomic_write_text(root / kept.PAGE, kept.page(pipe, found))  # it has judged
    files.atomic_write_text(root.parent / "README.md", results_index(root.parent))
    return root


def render_again(profile: str) -> Path:
    """The committed snapshot of ``profile``'s pages rendered again from its own files, nothing
    run (``lsa publish --results-only``): the commit each notebook ran at read again from its
    section's ``run_info.json`` into ``stamp.json``, ``MANIFEST.json`` and STAMP.md's
    provenance line, the results page (keeping its part on what moved when it was published)
    and the index. Returns the results page."""
    folder = destination(profile)
    if not (folder / "claims.csv").exists():
        raise NotPublishable(f"{files.shell_path(folder)} holds no snapshot; publish one: "
                             f"python -m lsa publish --profile {profile}")
    stamp = files.read_json(folder / "stamp.json")
    stamp["notebook_commits"] = published.notebook_commits(folder)
    files.write_json(folder / "stamp.json", stamp)
    if (folder / published.MANIFEST).exists():
        manifest = files.read_json(folder / published.MANIFEST)
        files.write_json(folder / published.MANIFEST,
                         {**manifest, "notebook_commits": stamp["notebook_commits"]})
    page = folder / "STAMP.md"
    if page.exists():
        files.atomic_write_text(page, with_provenance_line(page.read_text(), stamp))
    page = folder / "RESULTS.md"
    if not (folder / kept.PAGE).exists() or "bases" not in files.read_json(
            folder / published.MANIFEST):  # the study's page is its own (publish_study)
        new = results_markdown(folder)
        files.atomic_write_text(page, keep_moved(page.read_text(), new) if page.exists()
                                else new)
    files.atomic_write_text(folder.parent / "README.md", results_index(folder.parent))
    return page


def rerender(profile: str, dest: Path | None = None) -> Path:
    """The committed snapshot of ``profile`` rendered again from its own run files, nothing
    trained (``lsa publish --rerender``): each section notebook runs again as a reader's does on
    the snapshot (``lsa.published.RERENDER``: it saves what it computes, into a scratch output
    root), then the snapshot takes the new claims, gates, figures, executed notebooks and
    section files, its notebooks' commits, STAMP.md's provenance line, a results page that
    lists what moved against the claims it had, and its manifest's checksums; its runs and
    their record stay. ``dest``: a copy of the snapshot to write instead (the tests')."""
    import os
    import tempfile
    from unittest import mock

    import papermill as pm
    from tqdm.auto import tqdm

    from lsa.config import load_config

    source = destination(profile)
    snapshot = published.load(profile)  # every file against its checksum
    if snapshot is None:
        raise NotPublishable(f"{files.shell_path(source)} holds no snapshot with run files: "
                             f"publish one (make reproduce PROFILE={profile}, make publish)")
    if "bases" in snapshot.manifest:
        raise NotPublishable(f"{profile}: the study's snapshot is published from its kept "
                             "blocks (make reproduce PROFILE=study, then make publish)")
    dest = dest or source
    pipe = load_config(profile=profile)
    with tempfile.TemporaryDirectory(prefix=f"lsa-rerender-{profile}-") as tmp:
        root = Path(tmp)
        scratch = {"LSA_OUTPUT_ROOT": str(root), published.RERENDER: "1"}
        with mock.patch.dict(os.environ, scratch):  # the kernels inherit it; undone after
            for key, spec in tqdm(pipe.sections.items(), desc=f"rerender {profile}"):
                out = paths.executed_notebook(profile, key)  # config order: the report last
                out.parent.mkdir(parents=True, exist_ok=True)
                try:
                    pm.execute_notebook(str(paths.NOTEBOOKS / spec.notebook), str(out),
                                        parameters={"profile": profile}, kernel_name="python3",
                                        progress_bar=False, cwd=str(paths.NOTEBOOKS))
                except pm.PapermillExecutionError as exc:
                    raise NotPublishable(
                        f"{spec.notebook} stopped ({exc.ename}: {exc.evalue.splitlines()[0]}); "
                        "nothing of the snapshot changed (a section whose runs the snapshot "
                        "lacks under this configuration: other input files, such as "
                        "$LSA_DATA_DIR's bAbI, give other run ids)") from exc
        staging = dest.with_name(f".{dest.name}.rerender")  # the snapshot changes whole
        shutil.rmtree(staging, ignore_errors=True)
        shutil.copytree(dest, staging)
        previous = root / "claims.previous.csv"
        shutil.copy2(dest / "claims.csv", previous)
        _take_rendered(pipe, root, staging)
        shutil.rmtree(dest)
        staging.rename(dest)
        # the results page where it lies (it reads the profiles published beside it)
        files.atomic_write_text(dest / "RESULTS.md", results_markdown(dest, previous))
    files.atomic_write_text(dest.parent / "README.md", results_index(dest.parent))
    return dest


def _take_rendered(pipe, root: Path, dest: Path) -> None:
    """Move what ``rerender`` rendered under the scratch output ``root`` into the (staged copy
    of the) snapshot at ``dest`` (see ``rerender``), all but its results page."""
    profile = pipe.profile
    results, figures_dir = root / "results" / profile, root / "figures" / profile
    for ext in ("md", "csv"):
        shutil.copy2(results / REPORT / f"claims.{ext}", dest / f"claims.{ext}")
    report = files.read_json(results / REPORT / "metrics.json")
    if "gates" in report:
        files.write_json(dest / "gates.json", report["gates"])
    for png in (dest / "figures").glob("*.png"):
        png.unlink()
    for png in sorted(figures_dir.glob("*.png")):
        shutil.copy2(png, dest / "figures" / png.name)
    by_hash = {hashlib.sha256(png.read_bytes()).hexdigest(): png.name
               for png in (dest / "figures").glob("*.png")}
    for nb in sorted((results / "notebooks").glob("*.ipynb")):
        _copy_notebook(nb, dest / "notebooks" / nb.name, by_hash, roots=(root,))
    written = []
    for key in pipe.sections:
        out = dest / "sections" / key
        written.append(files.write_packed(out / "metrics.json",
                                          (results / key / "metrics.json").read_bytes()))
        written.append(files.atomic_write_text(out / "run_info.json",
                                               (results / key / "run_info.json").read_text()))
    commit = files.read_json(results / REPORT / "run_info.json").get("git_commit")
    stamp = files.read_json(dest / "stamp.json")
    stamp.update(commit=commit, notebook_commits=published.notebook_commits(dest),
                 rendered_again_utc=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"))
    files.write_json(dest / "stamp.json", stamp)
    manifest = published.with_files(files.read_json(dest / published.MANIFEST), written, dest)
    files.write_json(dest / published.MANIFEST, {
        **manifest, "commit": commit, "notebook_commits": stamp["notebook_commits"]})
    page = dest / "STAMP.md"
    text = with_provenance_line(page.read_text(), stamp)
    note = (f"- rendered again from its run files on {stamp['rendered_again_utc'][:10]} "
            f"(`lsa publish --rerender`, nothing trained)")
    text = re.sub(r"^- rendered again from its run files .*$\n?", "", text, flags=re.M)
    files.atomic_write_text(page, text.replace("\n- run finished:",
                                               f"\n{note}\n- run finished:", 1))


def study_stamp_markdown(stamp: dict[str, Any]) -> str:
    """The study's STAMP.md: its commits, machine and time summed over its kept bases."""
    rep, mach = stamp["reproduce"], stamp["machine"]
    return "\n".join([
        f"# Published results: profile `{stamp['profile']}` (the confirmatory study)", "",
        f"- {provenance(stamp)} (`{stamp['commit']}`); published {stamp['published_utc']}",
        f"- the notebook's machine: {mach.get('platform')}, {mach.get('cpu_count')} CPUs, "
        f"{mach.get('memory_gib', '?')} GiB; each block's machine: its runs' `run_info.json`",
        f"- time, over the {rep['bases_timed']} of {rep['bases']} kept bases with a record "
        f"(each base from its first job's start to its last one's end, `lsa.kept.base_time`; "
        f"summed over the blocks, overlaps counted once): {rep['wall_s'] / 60:.1f} min; floor "
        f"{rep['floor_s'] / 60:.1f} min (the core time their jobs held over {rep['cores']} "
        "cores)", ""]) + "\n"


def study_results_markdown(root: Path, stamp: dict[str, Any]) -> str:
    """The study's RESULTS.md: its part of the headline (``lsa.headline.study_lines``, from
    section 07's published metrics) and its claims table; the kept blocks' page says how its
    bases were made."""
    from lsa.headline import study_lines
    from lsa.sections.study.figures import exploratory_markdown

    lines = study_lines(kept.status(stamp["profile"]))
    metrics = next(iter(sorted((root / "sections").glob("*/metrics.json.gz"))), None)
    found = (json.loads(files.read_text(metrics.with_suffix(""))).get("exploratory")
             if metrics is not None else None)
    return "\n".join([
        f"# Results: profile `{stamp['profile']}` (the confirmatory study)", "",
        f"Generated by `make publish PROFILE={stamp['profile']}` ({provenance(stamp)}; how it "
        "ran: [STAMP.md](STAMP.md); its bases, gates and times: [README.md](README.md)). Its "
        "plan: [`docs/preregistration.md`](../../preregistration.md).", "",
        *lines, "", "## Claims", "",
        (root / "claims.md").read_text().strip(), "",
        *(["## Exploratory, as pre-registered", "", exploratory_markdown(found)] if found
          else [])]) + "\n"


#: STAMP.md's first line (``provenance`` and the full commit), as ``with_provenance_line`` finds it
_PROVENANCE_LINE = re.compile(r"^- runs made by .*?\(`[0-9a-f]+(?:-dirty)?`\)", flags=re.M)


def with_provenance_line(text: str, stamp: dict[str, Any]) -> str:
    """A STAMP.md's ``text`` with its provenance line written again from ``stamp`` (its
    notebooks' commits may have been read again, or rendered again)."""
    return _PROVENANCE_LINE.sub(lambda _: f"- {provenance(stamp)} (`{stamp['commit']}`)", text,
                                count=1)


def provenance(stamp: dict[str, Any]) -> str:
    """``runs made by `c65a6c7` (200 runs), `d6b6015` (51 runs); notebooks ran at `465d62f```:
    every commit that made the snapshot's runs beside the one its notebooks ran at."""
    made = ", ".join(f"`{r['commit'][:7]}`" + "".join(
        f" ({part})" for part in (r.get("runs") and f"{r['runs']} run{'s' * (r['runs'] != 1)}",
                                  r.get("note")) if part)
        for r in stamp.get("run_commits") or [])
    return (f"runs made by {made or 'commits not recorded'}; notebooks ran at "
            f"{published.notebooks_ran_at(stamp)}")


def _run_commit(profile: str) -> str | None:
    """The commit recorded by the replication report's own run."""
    info = paths.section_dir(profile, REPORT) / "run_info.json"
    try:
        return json.loads(info.read_text()).get("git_commit")
    except (OSError, ValueError):
        return None


def _copy_notebook(notebook: Path, out: Path, figures: dict[str, str] | None = None,
                   roots: tuple[Path, ...] = ()) -> None:
    """An executed notebook as published: its cells and outputs, without the per-cell timing
    metadata that papermill writes (it changes at every run and says nothing to a reader). An
    image output that is byte for byte one of the snapshot's ``figures`` (sha256 -> file name:
    the report's gallery) becomes a Markdown link to ``../figures/`` instead of a second copy."""
    import nbformat

    node = nbformat.read(notebook, as_version=4)
    for cell in node.cells:
        for key in ("execution", "papermill"):
            cell.metadata.pop(key, None)
        for output in cell.get("outputs", []):
            output.get("metadata", {}).pop("papermill", None)
            data = output.get("data", {})
            png = data.get("image/png")
            name = figures and png and figures.get(
                hashlib.sha256(base64.b64decode("".join(png.split()))).hexdigest())
            if name:
                del data["image/png"]
                data["text/markdown"] = f"![{name}](../figures/{name})"
                data["text/plain"] = f"figure {name}"
    files.atomic_write_text(out, portable_paths(nbformat.writes(node),
                                                [paths.output_root(), paths.ROOT, *roots]))


#: the repository's folders a path of the publishing machine leads to (``machine_roots``)
REPO_FOLDERS = ("results", "figures", "logs", "lsa", "scripts", "data", "docs", "notebooks",
                "config", "workflow", "tests")
_ROOT_BEFORE = re.compile(r"(?<![\w.~+-])((?:/[\w.+-]+)+?)/(?=(?:"
                          + "|".join(REPO_FOLDERS) + ")/)")


def portable_paths(text: str, roots) -> str:
    """``text`` without the absolute paths of the machine that wrote it: a path under one of
    ``roots`` (the clone, the output root) relative to it, as the repository names it; one
    under the user's home as ``~/...``."""
    for root in sorted({str(r).rstrip("/") for r in roots}, key=len, reverse=True):
        if root:
            text = re.sub(re.escape(root) + r"/", "", text)
    home = str(Path.home()).rstrip("/")
    return re.sub(re.escape(home) + r"/", "~/", text) if home else text


def machine_roots(text: str) -> set[str]:
    """The clones and output roots of other machines a published text names: each absolute
    path's part before a folder of the repository (``REPO_FOLDERS``), e.g. ``/work/main`` of
    ``/work/main/lsa/jobs.py`` (what ``scrub_published`` takes away)."""
    return set(_ROOT_BEFORE.findall(text))


def scrub_published(root: Path | None = None) -> list[Path]:
    """Rewrite the published files that carry the absolute paths of the machine that made
    them (the executed notebooks, ``gpu_check/``'s records and plan) with ``portable_paths``
    (every ``machine_roots`` root); byte for byte the same elsewhere, so no number moves and
    a notebook stays valid JSON. A file a snapshot's ``MANIFEST.json`` lists gets its new
    checksum there. Returns the files rewritten."""
    root = root or paths.ROOT / "docs" / "results"
    changed = []
    for path in sorted([*root.glob("*/notebooks/*.ipynb"), *root.glob("gpu_check/*.json"),
                        *root.glob("gpu_check/*.md")]):
        text = path.read_text()
        new = portable_paths(text, machine_roots(text))
        if new == text:
            continue
        if path.suffix in (".json", ".ipynb"):
            json.loads(new)  # still valid
        files.atomic_write_text(path, new)
        changed.append(path)
        manifest = path.parent.parent / published.MANIFEST
        listed = files.read_json(manifest) if manifest.exists() else {"files": {}}
        name = path.relative_to(manifest.parent).as_posix()
        if name in listed["files"]:
            listed["files"][name] = {"sha256": published.sha256(path),
                                     "bytes": path.stat().st_size}
            listed["bytes"] = sum(entry["bytes"] for entry in listed["files"].values())
            files.write_json(manifest, listed)
    return changed


def _stamp_markdown(stamp: dict[str, Any], profile: str, run_ids: set[str] | None = None
                    ) -> str:
    rep, mach, packages = stamp["reproduce"], stamp["machine"], stamp.get("packages") or {}
    bound = timings.floor(profile, rep.get("cores"))
    lines = [f"# Published results: profile `{profile}`", "",
             f"- {provenance(stamp)} (`{stamp['commit']}`)",
             f"- run finished: {rep.get('finished_utc')}; published {stamp['published_utc']}",
             f"- machine: {mach.get('platform')}, {mach.get('cpu_count')} CPUs, "
             f"{mach.get('memory_gib', '?')} GiB, CPU kernels: "
             f"{mach.get('cpu_capability', '?')}, CUDA: {mach.get('cuda')}",
             "- the runs' CPU kernels (torch's capability and the kernel pin, lsa.kernels): "
             + (", ".join(f"{r['kernels']}: {r['runs']} runs" for r in stamp["run_kernels"])
                if stamp.get("run_kernels") else "not recorded"),
             f"- `make reproduce` wall time (the makespan): {rep['wall_s'] / 60:.1f} min "
             f"({rep.get('cores', '?')} cores)"
             + (f"; floor {bound['floor_s'] / 60:.1f} min (the core time the jobs held over "
                f"the cores), makespan / floor {rep['wall_s'] / bound['floor_s']:.2f}"
                if bound else "")
             + (f"; {rep['note']}" if rep.get("note") else ""), "",
             "- tolerance on another machine: "
             + (f"each claim's move measured between two kernel configurations "
                f"([{Path(stamp['tolerance']['measured']).name}]"
                f"(../../../{stamp['tolerance']['measured']}); `python -m lsa compare` holds a "
                "reproduce to it)" if stamp.get("tolerance") else "none stated"), "",
             "## Environment", "",
             f"Python {mach.get('python', '?')}; "
             + ", ".join(f"{name} {packages.get(name, '-')}" for name in files.PACKAGES)
             + f". Every installed package with its version: `stamp.json` (`packages`, recorded "
               f"by `{stamp.get('packages_recorded_by', '?')}`); `pip install -c` a file of "
               "its `name==version` lines rebuilds the environment.", "",
             "## Where the time went", "", timings.markdown(profile, run_ids)]
    return "\n".join(lines) + "\n"


#: the heading of the results page's comparison with the snapshot it replaced
MOVED = "## What moved since the previous snapshot"


def results_markdown(snapshot: Path, previous_claims: Path | None = None) -> str:
    """The results page of a published snapshot, from its own files (``claims.csv``,
    ``stamp.json``, ``gates.json`` where the run had gates): the premise gates, the counts by
    verdict (the paper's claims apart from the project's controls), every claim with the
    paper's value, ours and the verdict, and, given the ``claims.csv`` of the snapshot it
    replaces, what moved (verdicts that changed, claims added, gone or redefined)."""
    import pandas as pd

    from lsa.claims import (
        by_kind,
        claims_table,
        counts_sentence,
        holm_sentence,
        verdict_counts,
        verdicts_by_method,
    )
    from lsa.gates import Gate, gates_table
    from lsa.headline import headline

    claims = claims_table(pd.read_csv(snapshot / "claims.csv").to_dict(orient="records"))
    stamp = json.loads((snapshot / "stamp.json").read_text())
    gates_file = snapshot / "gates.json"
    gates = json.loads(gates_file.read_text()) if gates_file.exists() else None
    out = [f"# Results: profile `{stamp['profile']}`", "",
           f"Generated by `make publish` ({provenance(stamp)}; finished "
           f"{stamp['reproduce'].get('finished_utc')}; how it ran: [STAMP.md](STAMP.md)). "
           "Every number below comes from those runs; the executed notebooks are under "
           "[notebooks/](notebooks/).", "",
           headline(claims, [Gate(**g) for g in gates or []], stamp["profile"],
                    *_report_answers(snapshot), kept.status()), ""]
    out += superseded(snapshot, claims)
    out += ["## The premise gates", ""]
    if gates is None:
        out += ["This snapshot predates the premise gates (`lsa.gates`): its verdicts were given "
                "without checking that the testbed shows the phenomenon the paper is about.", ""]
    else:
        table = gates_table([Gate(**g) for g in gates])
        out += [table.drop(columns="detail").to_markdown(index=False), "",
                *[f"- **{g}**: {d}" for g, d in zip(table["gate"], table["detail"])], ""]
    out += ["## Counts", "", counts_sentence(*verdict_counts(claims))]
    if holm := holm_sentence(claims):
        out += ["", holm + "."]
    by_method = verdicts_by_method(claims)
    if len(by_method):
        out += ["", "The paper's claims about each fine-tuning method, by verdict (each rests on "
                "G1, G2 and the method's own G3):", "", by_method.to_markdown(index=False)]
    if stamp.get("tolerance"):
        sensitive = compare.machine_sensitive(claims, stamp["tolerance"])
        out += ["", "## Machine-sensitive verdicts", "",
                f"A reproduce on another machine draws other runs; how far each claim moved "
                f"between two kernel configurations is measured "
                f"([{Path(stamp['tolerance']['measured']).name}]"
                f"(../../../{stamp['tolerance']['measured']})). {len(sensitive)} verdicts a move "
                "that large could change" + (":" if len(sensitive) else "."), ""]
        if len(sensitive):
            out += [sensitive.to_markdown(index=False, floatfmt=".3g")]
    out += ["", MOVED, ""]
    if previous_claims is None:
        out += ["No previous snapshot.", ""]
    else:
        old = pd.read_csv(previous_claims).set_index("id")
        new = claims.set_index("id")
        # an id names a slot (Section 5.3 numbers the comparisons a profile runs): where its
        # claim text changed, it is another comparison, listed apart and not compared
        redefined = [i for i in new.index if i in old.index and "claim" in old
                     and old.loc[i, "claim"] != new.loc[i, "claim"]]
        same = [i for i in new.index if i in old.index and i not in redefined]
        changed = [(i, old.loc[i, "verdict"], new.loc[i, "verdict"]) for i in same
                   if old.loc[i, "verdict"] != new.loc[i, "verdict"]]
        old_kind = old["kind"] if "kind" in old else pd.Series("paper", index=old.index)
        kinds = [(i, old_kind[i], new.loc[i, "kind"]) for i in same
                 if old_kind[i] != new.loc[i, "kind"]]
        added = [i for i in new.index if i not in old.index]
        gone = [i for i in old.index if i not in new.index]
        out += [f"- verdicts changed ({len(changed)}): "
                + (", ".join(f"{i} {a} -> {b}" for i, a, b in changed) or "none"),
                f"- kinds changed ({len(kinds)}): "
                + (", ".join(f"{i} {a} -> {b}" for i, a, b in kinds) or "none"),
                f"- claims added ({len(added)}): " + (", ".join(added) or "none"),
                f"- claims gone ({len(gone)}): " + (", ".join(gone) or "none"),
                f"- claims redefined ({len(redefined)}; the same id, another claim, verdicts "
                "not compared): " + (", ".join(redefined) or "none"), ""]
    for title, rows in by_kind(claims):  # the paper's claims as it ran them, then the rest
        out += [f"## {title}", ""]
        for section, sub in rows.groupby("section", sort=False):
            table = sub.drop(columns=["section"]).fillna("")
            out += [f"### {section}", "", table.to_markdown(index=False), ""]
    return "\n".join(out)


def keep_moved(old: str, new: str) -> str:
    """``new``, a results page rendered again from a snapshot's own files (``lsa publish
    --results-only``), with ``old``'s part on what moved since the previous snapshot: that
    comparison was made at publishing against files no longer in the tree, so a page rendered
    again keeps it as it was."""
    def part(text: str) -> tuple[int, int] | None:
        start = text.find(MOVED)
        if start < 0:
            return None
        end = text.find("\n## ", start + len(MOVED))
        return start, len(text) if end < 0 else end + 1

    was, now = part(old), part(new)
    if was is None or now is None:
        return new
    return new[:now[0]] + old[was[0]:was[1]] + new[now[1]:]


def superseded(snapshot: Path, claims) -> list[str]:
    """The verdicts of ``snapshot`` that a published profile running its runs and more
    (``lsa.runs.SHARED_RUNS``: ``mini-full`` holds ``mini``'s settings on more seeds and base
    models) reads otherwise, each claim matched by what it says and its method (ids differ
    between profiles): a part of the page to read before this one's verdicts; none where no
    such profile is published beside it."""
    import pandas as pd

    from lsa.runs import SHARED_RUNS

    out = []
    for other in sorted(p for p, base in SHARED_RUNS.items() if base == snapshot.name):
        path = snapshot.parent / other / "claims.csv"
        if not path.exists():
            continue
        theirs = pd.read_csv(path, keep_default_na=False, dtype=str)
        key = ["claim", "method"] if "method" in theirs else ["claim"]
        mine = claims.astype({k: str for k in key}).fillna({k: "" for k in key})
        both = mine.merge(theirs[[*key, "id", "verdict"]].drop_duplicates(key), on=key,
                          suffixes=("", "_other"))
        moved = both[both["verdict"] != both["verdict_other"]]
        out += [f"## What `{other}` reads otherwise", "",
                f"[`{other}`](../{other}/RESULTS.md) runs this profile's settings on more "
                f"seeds and base models: read it first. Of the {len(both)} claims both make "
                f"(matched by what they say and their method: the ids differ), {len(moved)} "
                f"read otherwise there" + (":" if len(moved) else "."), "",
                *[f"- {r['id']} {r['claim']}: **{r['verdict']}** here, **{r['verdict_other']}** "
                  f"in `{other}` ({r['id_other']})" for r in moved.to_dict(orient="records")],
                ""]
    return out


def _report_answers(snapshot: Path) -> tuple[dict[str, str], dict[str, Any] | None]:
    """The report's sentences that answer the paper's objections and the base models its
    fine-tuning claims rest on (its ``metrics.json`` in the snapshot's ``sections/``; none in
    a snapshot without them)."""
    from lsa import files

    path = snapshot / "sections" / REPORT / "metrics.json"
    if not files.exists(path):
        return {}, None
    metrics = json.loads(files.read_text(path))
    return metrics.get("answers", {}), metrics.get("bases")


def results_index(root: Path) -> str:
    """The index of every published snapshot under ``root`` (``docs/results/README.md``,
    rewritten by each ``make publish``): per profile, its commit and date, the counts of the
    paper's claims by verdict (its headline), and links to its results page, notebooks,
    figures, tables and run files."""
    import pandas as pd

    from lsa.claims import claims_table, counts_sentence, verdict_counts

    out = ["# Published results", "",
           "Each folder is a fresh-clone `make reproduce` of one profile, copied by `make "
           "publish` (generated: this page too). A notebook run alone on a profile whose runs "
           "are not made on your machine re-analyses the snapshot's run files (`runs/`, "
           "`MANIFEST.json`) instead of training: `make lab`, then open a notebook.", ""]
    # the fullest snapshot first (the most claims: mini-full before mini), the study's last
    snapshots = sorted((p for p in root.iterdir() if (p / "stamp.json").exists()),
                       key=lambda p: (-len(pd.read_csv(p / "claims.csv"))
                                      if (p / "claims.csv").exists() else 0, p.name))
    studies = [p for p in snapshots if (p / published.MANIFEST).exists()
               and "bases" in files.read_json(p / published.MANIFEST)]  # lsa.kept's blocks
    for snapshot in snapshots:
        if snapshot in studies:  # below
            continue
        stamp = json.loads((snapshot / "stamp.json").read_text())
        raw = pd.read_csv(snapshot / "claims.csv")
        claims = claims_table(raw.to_dict(orient="records"))
        name = snapshot.name
        older = ("" if "origin" in raw else
                 " Its verdicts predate the current rules (claims' origins, the verdict words "
                 "of `docs/methods.md`, \"Verdicts\"): every claim of kind `paper` is counted "
                 "as the paper's, in its own words; a republish judges it anew.")
        run_files = ("run files for the notebooks ([`MANIFEST.json`]"
                     f"({name}/MANIFEST.json))" if (snapshot / published.MANIFEST).exists()
                     else "no run files (notebooks need `make reproduce`)")
        out += [f"## `{name}`", "",
                f"{provenance(stamp).capitalize()}, run finished "
                f"{(stamp['reproduce'].get('finished_utc') or '?')[:10]}; {run_files}.", "",
                counts_sentence(*verdict_counts(claims)) + "." + older, "",
                f"- [RESULTS.md]({name}/RESULTS.md): the premise gates, every claim with the "
                f"paper's value, ours and the verdict, what moved; [STAMP.md]({name}/STAMP.md): "
                "machine, packages, time",
                f"- tables: [claims.csv]({name}/claims.csv), [gates.json]({name}/gates.json)"
                if (snapshot / "gates.json").exists()
                else f"- tables: [claims.csv]({name}/claims.csv)",
                "- notebooks: " + ", ".join(
                    f"[{nb.stem}]({name}/notebooks/{nb.name})"
                    for nb in sorted((snapshot / "notebooks").glob("*.ipynb"))),
                "- figures: " + ", ".join(
                    f"[{png.stem}]({name}/figures/{png.name})"
                    for png in sorted((snapshot / "figures").glob("*.png"))), ""]
    for blocks in studies:
        name = blocks.name
        out += [f"## `{name}`: the confirmatory study's kept blocks", "",
                f"[`{name}/`]({name}/README.md) (`python -m lsa study keep`): how far each "
                "stage is and each kept base's premise gates, its runs' files with their "
                "checksums; no outcome before a stage is in (issue 62).", ""]
        if (blocks / "RESULTS.md").exists():
            out += [f"- [RESULTS.md]({name}/RESULTS.md): section 07's outcome, one line per "
                    f"test from its claims, and its claims table; [STAMP.md]({name}/STAMP.md): "
                    "the commits that made its runs and ran its notebook, its time", ""]
    if (root / "gpu_check" / "README.md").exists():
        out += ["## The GPU check", "",
                "[`gpu_check/`](gpu_check/README.md): `scripts/gpu_check.sh` on a lent GPU, "
                "its JSON records and what they measured (not a profile's results).", ""]
    return "\n".join(out)
