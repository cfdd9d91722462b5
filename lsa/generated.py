"""No result typed by hand in the prose docs (issue 74, item 4).

Every number about this project's results in the prose docs (``DOCS``: README.md,
CONTRIBUTING.md, docs/*.md and docs/bench/*.md) is either written by code or a link to a page
that is. A bench page's measured part is written by its bench command; other text that states
a result holds it in a *generated block*, which ``python -m lsa publish`` (and its
``--results-only`` and ``--rerender``) rewrites from the published files::

    <!-- generated: NAME -->
    ...text that BLOCKS[NAME] returns...
    <!-- /generated -->

A bench page's measured part is a block too, named ``bench-<what>``, which its bench command
writes (``lsa.files.write_page``: the page's prose outside it is kept). ``typed_numbers`` finds
a number typed outside such blocks, outside code (commands and file names are quotes) and
outside ``EXEMPT`` files (frozen or dated records). How it tells a result from a setting or a
quote (``RESULT_LIKE``, ``_exempt``): a token looks like a result when it is a number with a
decimal point, a percentage, a ratio (``1.4x``), a size in nats, a ``±``, or a count of runs,
bases, seeds or claims; it is not one when its value is a setting (any numeric value of a
profile of config/config.yaml, the verdicts' confidence and Holm level, the benches' targets),
a value the paper reports (``lsa.claims.PAPER``), or where its words say it is a section, table
or figure number, a version, a date or time, a model size in parameters or an identifier
(arXiv, a licence).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from lsa import files, paths

#: a block whose text publishing writes (``lsa.files.BLOCK``: a bench's too)
BLOCK = files.BLOCK
#: the files held to the rule, as globs under the repository
DOCS = ("README.md", "CONTRIBUTING.md", "docs/*.md", "docs/bench/*.md")
#: files left out, each with its reason
EXEMPT = {
    "docs/preregistration.md": "frozen by the study's lock (docs/study.lock): it may not change",
    "docs/testbed.md": "a dated log of how the testbed was chosen, each entry as measured then",
    "docs/paper.md": "the paper's setup and numbers, graded: no number of this project",
}
#: a token that looks like a result (the module's docstring)
RESULT_LIKE = re.compile(
    r"±|(?<![\w.])(?:\d+(?:\.\d+)?(?:\s?%|x\b|\s+nats\b)"
    r"|\d+\.\d+(?![\d.])|\d+\s+(?:runs|bases|seeds|claims)\b)")
#: words just before a number that make it a label, a version or an identifier
_LABEL = re.compile(r"(?:(?:Sections?|Sec\.|Tables?|Fig\.|Figures?)(?:\s[\d.]+(?:-|,\s|\sand\s))?|"
                    r"Python|torch|transformers|peft|bitsandbytes|numpy|NumPy|scipy|glibc|"
                    r"version|arXiv|CC BY|ICML|==|>=|<=|v)\s*$")


@dataclass(frozen=True)
class Typed:
    """A result-like number typed outside a generated block: where, and its line."""

    path: str
    line: int
    token: str
    text: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.token!r} in: {self.text.strip()[:160]}"


def _numbers(value) -> set[float]:
    out: set[float] = set()
    if isinstance(value, bool):
        return out
    if isinstance(value, int | float):
        out.add(float(value))
    elif isinstance(value, dict):
        for item in value.values():
            out |= _numbers(item)
    elif isinstance(value, list | tuple):
        for item in value:
            out |= _numbers(item)
    return out


@functools.cache
def settings() -> frozenset[float]:
    """Every numeric value a profile sets (config/config.yaml resolved for each profile), the
    verdicts' confidence (and its one-sided level) and Holm level, the power the seeds are
    planned for, the benches' targets."""
    import inspect

    from lsa import bench, claims, stats
    from lsa.config import PROFILES, load_config

    power = inspect.signature(stats.seeds_for_power).parameters["power"].default
    found = {claims.CONFIDENCE, (1 - claims.CONFIDENCE) / 2, claims.ALPHA, power,
             *bench.TARGETS.values()}
    for profile in PROFILES:
        found |= _numbers(load_config(profile=profile).to_dict())
    return frozenset(found)


@functools.cache
def paper_values() -> frozenset[float]:
    """The paper's values (``lsa.claims.PAPER``) and the effects the claims derive from them
    (each published snapshot's ``paper_effect`` column, in absolute value)."""
    import pandas as pd

    from lsa.claims import PAPER

    found: set[float] = set()
    for ref in PAPER.values():
        found |= _numbers(ref.value) | _numbers(ref.other)
    for table in (paths.ROOT / "docs" / "results").glob("*/claims.csv"):
        effects = pd.read_csv(table)
        if "paper_effect" in effects:
            found |= {abs(float(v)) for v in effects["paper_effect"].dropna()}
    return frozenset(found)


def _value(token: str) -> float | None:
    digits = re.search(r"\d+(?:\.\d+)?", token)
    return float(digits.group(0)) if digits else None


def _known(value: float, printed: str) -> bool:
    """Whether ``value`` (printed with ``printed``'s decimals) is a setting or the paper's."""
    decimals = len(printed.split(".")[1]) if "." in printed else 0
    for known in (*settings(), *paper_values()):
        for scale in (1, 100):  # a share printed as a percentage
            if math.isfinite(known) and round(known * scale, decimals) == value:
                return True
    return False


def _exempt(token: str, before: str, after: str) -> bool:
    value = _value(token)
    if value is None:  # ±: always a result
        return False
    printed = re.search(r"\d+(?:\.\d+)?", token).group(0)
    if _LABEL.search(before) or re.match(r"[\d.]*\.\d", after):  # a label; a version x.y.z
        return True
    if re.match(r"\s*(?:M|k)?\s*param", after) or re.match(r"M\b", after):  # a model's size
        return True
    if re.search(r"\d{4}-\d{2}-$", before) or re.match(r":\d{2}", after):  # a date, a time
        return True
    if token.endswith(("runs", "bases", "seeds", "claims")):
        return _known(value, printed)
    return _known(value, printed)


def _prose(text: str) -> list[tuple[int, str]]:
    """``text``'s lines outside fenced code and generated blocks, numbered from 1, with inline
    code spans and link targets blanked (commands and paths are quotes)."""
    blanked = BLOCK.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    out, fenced = [], False
    for number, line in enumerate(blanked.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        line = re.sub(r"`[^`]*`", lambda m: " " * len(m.group(0)), line)
        line = re.sub(r"\]\([^)]*\)", lambda m: " " * len(m.group(0)), line)
        line = re.sub(r"https?://\S+", lambda m: " " * len(m.group(0)), line)
        out.append((number, line))
    return out


def typed_numbers(text: str, path: str = "<text>") -> list[Typed]:
    """Every result-like number typed in ``text`` outside generated blocks and code."""
    found, previous = [], ""
    for number, line in _prose(text):
        for match in RESULT_LIKE.finditer(line):  # a line's words run on from the last one's
            before = previous[-40:] + " " + line[:match.start()]
            if not _exempt(match.group(0), before, line[match.end():]):
                found.append(Typed(path, number, match.group(0), line))
        previous = line
    return found


def doc_files(root: Path | None = None) -> list[Path]:
    root = root or paths.ROOT
    found = {p for pattern in DOCS for p in root.glob(pattern)}
    return sorted(p for p in found if p.relative_to(root).as_posix() not in EXEMPT)


# --- the blocks publishing writes ------------------------------------------------------------

def compare_expectation(profile: str, where: Path) -> str:
    """What ``make reproduce PROFILE=profile`` ends with (``lsa compare``'s summary), from the
    published snapshot and its kernels' measurement: on the snapshot's own kernels, and on
    other ones as measured (docs/bench/kernels-P.md)."""
    import os

    import pandas as pd

    from lsa import compare, files, published

    folder = published.folder(profile)
    stamp = files.read_json(folder / "stamp.json")
    claims = len(pd.read_csv(folder / "claims.csv"))
    kernels = compare.kernels_of_snapshot(stamp)
    text = (f"On a machine that runs the snapshot's kernels ({kernels}), the runs are expected "
            f"to be the published ones bit for bit, and `make reproduce` to end with `compare "
            f"{profile}: {claims} claims against the published snapshot: {claims} identical`.")
    if "(pinned)" not in kernels:
        text += (" Its runs were made before lsa pinned the kernels (`lsa.kernels.PIN`): a "
                 "reproduce now runs the pinned ones on every CPU with AVX2, so until the "
                 "snapshot is made again under the pin its numbers move, by a tolerance not "
                 "yet measured (`LSA_KERNELS=native` on a machine like the publisher's gives "
                 "its runs).")
    measured = compare.kernels_file(profile)
    if measured.exists():
        table = compare.read_claims(measured)
        counts = table["status"].value_counts()
        link = os.path.relpath(measured.with_suffix(".md"), where)
        text += (" On other kernels the runs differ; measured once "
                 f"([{measured.with_suffix('.md').name}]({link})), "
                 + ", ".join(f"{int(counts[s])} {s}" for s in compare.STATUSES if counts.get(s))
                 + f" of {len(table)} claims (each claim's move is the tolerance the snapshot "
                 "states).")
    return text


#: the generated blocks by name: each a function of the folder of the file that holds it
def _jobs_commits(where: Path) -> str:
    from lsa.throughput import commits_markdown

    return commits_markdown(paths.ROOT / "docs" / "bench" / "jobs-commits",
                            {"old": "638bd14", "new": "2740844"})


def _real_lm(what: str) -> Callable[[Path], str]:
    def render(where: Path) -> str:
        from lsa import reallm

        if what == "power":
            return reallm.power_markdown()
        return reallm.costs_markdown(reallm.read_bench(paths.ROOT / "docs" / "bench" /
                                                       "real-lm"))
    return render


BLOCKS: dict[str, Callable[[Path], str]] = {
    "compare-mini": lambda where: compare_expectation("mini", where),
    "jobs-commits": _jobs_commits,
    "real-lm-costs": _real_lm("costs"),
    "real-lm-power": _real_lm("power"),
}


#: the prefix of a block its bench command writes (``lsa.files.write_page``), which ``render``
#: leaves as it is
BENCH = "bench-"


def render(text: str, where: Path) -> str:
    """``text`` with every generated block written again (``where``: its file's folder); a
    bench's block as it is."""
    def body(match: re.Match) -> str:
        name = match.group("name")
        if name.startswith(BENCH):
            return match.group(0)
        if name not in BLOCKS:
            raise KeyError(f"generated block {name!r}: not among {sorted(BLOCKS)}")
        return match.group(1) + BLOCKS[name](where).rstrip("\n") + "\n" + match.group(4)

    return BLOCK.sub(body, text)


def rewrite(root: Path | None = None) -> list[Path]:
    """Write every generated block of the prose docs again, and the article (``lsa.article``,
    generated whole); returns the files that changed."""
    from lsa.files import atomic_write_text

    changed = []
    if root is None:
        from lsa import article

        old = article.OUT.read_text() if article.OUT.exists() else None
        try:
            new = article.article_markdown()
        except FileNotFoundError:  # no snapshot to report (a fork without mini-full)
            new = old
        if new != old:
            changed.append(article.write())
    for path in doc_files(root):
        text = path.read_text()
        new = render(text, path.parent)
        if new != text:
            atomic_write_text(path, new)
            changed.append(path)
    return changed
