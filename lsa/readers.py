"""``python -m lsa bench notebooks``: how long a reader waits for each notebook.

Each section notebook runs alone as JupyterLab's Run All runs it: papermill with no parameters
(the notebook's own defaults), its working folder ``notebooks/``, into a fresh temporary output
root, so that no result made on this machine is read (what a fresh clone has; the book corpus
in ``data/`` is the one thing shared, and whether it was there is recorded). Its time is split
where the notebook's "Try it" part begins (the markdown cell headed ``## Try it``):

- ``published_s``: the wall time from the kernel's start to the end of the last cell before
  it: what a reader waits for the section's results, read from the published snapshot of the
  profile the notebook opens when the repository has one (``reads_published``: its output says
  so, ``lsa.published.Snapshot.describe``);
- ``try_it_s``: papermill's durations of the cells from there on (the Try it part trains its
  runs on ``smoke``, or re-analyses the notebook's own);
- ``trained``: how many runs the notebook trained, from the lines that say so.

Each Try it text states the last measurement ("**11 runs in about 15 s**", ``STATED``, the time
rounded by ``about``); tests/unit/test_readers.py holds the texts to the committed record.

Times are measured, never asserted (a busy machine would fail it): the table is a record of one
run on one machine, which ``device`` names.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from lsa import paths

#: the first words of the markdown cell that opens a section notebook's "Try it" part
TRY_IT_HEADING = "## Try it"
#: what a notebook prints when it reads a published snapshot (``Snapshot.describe``)
READS_PUBLISHED = "published results of `"
_TRAINED = re.compile(r"training (\d+) runs of profile")
#: how a Try it text states what the bench measured for it: "**11 runs in about 15 s**"
STATED = re.compile(r"\*\*(\d+) runs? in about (\d+) s\*\*")


def about(seconds: float) -> int:
    """A measured time as a Try it text states it: to the nearest 5 s, at least 5."""
    return max(5, 5 * round(seconds / 5))


def _stream_text(cells) -> str:
    return "".join(o.get("text", "") for c in cells if c.cell_type == "code"
                   for o in c.get("outputs", []) if o.get("output_type") == "stream")


def _duration(cell) -> float:
    return float((cell.metadata.get("papermill") or {}).get("duration") or 0.0)


def split_times(nb, wall_s: float) -> dict[str, Any]:
    """The times of an executed notebook ``nb`` (papermill's per-cell ``duration``) that took
    ``wall_s`` in all, split at its "Try it" heading (see the module's docstring); a notebook
    without one (the report) is all published part, ``try_it_s`` None."""
    cells = nb.cells
    start = next((i for i, c in enumerate(cells)
                  if c.cell_type == "markdown" and c.source.startswith(TRY_IT_HEADING)), None)
    tried = cells[start:] if start is not None else []
    try_it = sum(_duration(c) for c in tried if c.cell_type == "code")
    before = cells[:start] if start is not None else cells
    text = _stream_text(before)
    return {"published_s": round(wall_s - try_it, 1),
            "try_it_s": round(try_it, 1) if start is not None else None,
            "reads_published": READS_PUBLISHED in text,
            "trained": sum(int(n) for n in _TRAINED.findall(text)),
            "try_it_trained": sum(int(n) for n in _TRAINED.findall(_stream_text(tried)))}


def time_notebook(path: Path, out_root: Path) -> dict[str, Any]:
    """Run the notebook at ``path`` alone into ``out_root`` (``LSA_OUTPUT_ROOT`` for its
    kernel) and return its times (``split_times``) and its name."""
    import nbformat
    import papermill as pm

    executed = out_root / path.name
    out_root.mkdir(parents=True, exist_ok=True)
    saved = os.environ.get("LSA_OUTPUT_ROOT")
    os.environ["LSA_OUTPUT_ROOT"] = str(out_root)  # the kernel inherits it
    try:
        start = time.perf_counter()
        pm.execute_notebook(str(path), str(executed), kernel_name="python3", progress_bar=False,
                            cwd=str(paths.NOTEBOOKS))
        wall = time.perf_counter() - start
    finally:
        if saved is None:
            os.environ.pop("LSA_OUTPUT_ROOT", None)
        else:
            os.environ["LSA_OUTPUT_ROOT"] = saved
    return {"notebook": path.name, "wall_s": round(wall, 1),
            **split_times(nbformat.read(executed, as_version=4), wall)}


def notebooks(only: list[str] | None = None) -> list[Path]:
    """The section notebooks of the default profile (01-06), or those whose names start with
    one of ``only`` (``["01", "03"]``); an unknown one is an error that lists them."""
    from lsa.config import load_config

    names = [spec.notebook for spec in load_config(profile="mini").sections.values()]
    if only:
        unknown = [o for o in only if not any(n.startswith(o) for n in names)]
        if unknown:
            raise ValueError(f"--only {','.join(unknown)}: no such notebook; one of "
                             f"{', '.join(n.split('_')[0] for n in names)}")
        names = [n for n in names if any(n.startswith(o) for o in only)]
    return [paths.NOTEBOOKS / n for n in names]


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| notebook | published part (s) | reads published | runs trained | Try it (s) "
             "| Try it runs |", "|---|---|---|---|---|---|"]
    for r in rows:
        tried = "-" if r["try_it_s"] is None else f"{r['try_it_s']:.0f}"
        lines.append(f"| {r['notebook']} | {r['published_s']:.0f} | "
                     f"{'yes' if r['reads_published'] else 'no'} | {r['trained']} | {tried} | "
                     f"{r['try_it_trained']} |")
    return "\n".join(lines)


def markdown(rows: list[dict[str, Any]], books: bool, commit: str | None) -> str:
    """The page ``main`` writes beside its JSON: how it was measured, then ``table``."""
    corpus = "in `data/` already" if books else "fetched by the first notebook that reads it"
    return (f"# How long a reader waits for each notebook\n\nMeasured in one run by `python -m "
            f"lsa bench notebooks` at `{(commit or '?')[:7]}` ({os.cpu_count()} CPUs): each "
            "notebook run alone with its own defaults into a fresh output root (nothing made on "
            "the machine is read; lsa/readers.py says what each column is). The book corpus "
            f"was {corpus}.\n\n" + table(rows) + "\n")


def main(args) -> int:
    from tqdm.auto import tqdm

    from lsa.files import device_info, git_commit, write_json

    books = (paths.CACHE / "books").is_dir()
    rows = []
    with tempfile.TemporaryDirectory(prefix="lsa-readers-") as tmp:
        for path in tqdm(notebooks(args.only.split(",") if args.only else None),
                         desc="notebooks", unit="notebook"):
            rows.append(time_notebook(path, Path(tmp) / path.stem))
    out = Path(args.out) if args.out else paths.output_root() / "results" / "bench" / \
        "notebooks.json"
    commit = git_commit()
    write_json(out, {"notebooks": rows, "books_present": books, "commit": commit,
                     "device": device_info(), "cpu_count": os.cpu_count()})
    text = markdown(rows, books, commit)
    from lsa.files import write_page

    write_page(out.with_suffix(".md"), "bench-notebooks", text)  # its prose kept
    print(text)
    print(f"written to {out} and {out.with_suffix('.md')}")
    return 0
