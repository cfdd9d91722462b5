"""The documentation points into the repository.

- Every relative link and image of a tracked Markdown file (README.md, docs/**/*.md, ...) names
  a file or folder tracked by git, and a link to a section names a heading of its page.
- Code, configuration, tests, scripts, the workflow and the notebooks cite the project's own
  notes (docs/methods.md, docs/paper.md), never notes outside the repository.
- docs/paper.md repeats the reference values of lsa/claims.py: key, value and grade agree.

One ``git ls-files`` lists the tracked files; outside a git checkout the tests that need it skip.
"""

import re
import shutil
import subprocess
from pathlib import PurePosixPath
from urllib.parse import unquote

import pytest
from support import ROOT

#: folders (and top-level files) whose tracked files must cite the repository's own notes
CODE_DIRS = ("lsa", "config", "tests", "scripts", "workflow", "notebooks")
CODE_FILES = ("Snakefile", "Makefile")
DOCS = "docs"
NOTES = ("methods", "paper")  # docs/<name>.md
# built from parts, so that this file does not cite what it forbids
OUTSIDE_NOTES = "/".join(("shared", DOCS))
NOTE_NAME = re.compile(r"(?<![\w-])(?:" + "|".join(NOTES) + r")\.md(?![\w-])")
NOTE_SECTION = re.compile(DOCS + r"/(?:" + "|".join(NOTES) + r")\.md#([\w-]+)")

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,}).*?^ {0,3}\1[ \t]*$", re.M | re.S)
CODE_SPAN = re.compile(r"(`+)(?!`)(?:(?!\n[ \t]*\n).)+?(?<!`)\1(?!`)", re.S)  # within a paragraph
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>\n]*>|[^\s)]+)"
                         r"(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)")
REFERENCE_DEF = re.compile(r"^ {0,3}\[[^\]\n]+\]:[ \t]*(<[^>\n]*>|\S+)", re.M)
HTML_LINK = re.compile(r"<(?:a|img|source)\b[^>]*?\b(?:href|src)\s*=\s*[\"']([^\"']+)[\"']",
                       re.I)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")  # http:, https:, mailto:, ...
HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.+?)[ \t#]*$", re.M)


# ---------------------------------------------------------------------------------------------
# helpers


def _blank(match: re.Match) -> str:
    """Code replaced by a word, its line breaks kept (so that line numbers stay right)."""
    return "code" + "\n" * match.group(0).count("\n")


def links(text: str) -> list[tuple[int, str]]:
    """``(line, target)`` of every inline link or image, reference definition and HTML
    ``href``/``src`` of a Markdown text, outside code blocks and code spans."""
    text = CODE_SPAN.sub(_blank, FENCE.sub(_blank, text))
    found = []
    for pattern in (INLINE_LINK, REFERENCE_DEF, HTML_LINK):
        for m in pattern.finditer(text):
            target = m.group(1)
            if target.startswith("<") and target.endswith(">"):
                target = target[1:-1]
            found.append((text.count("\n", 0, m.start()) + 1, target.strip()))
    return sorted(found)


def resolve(page: str, target: str) -> tuple[str, str] | None:
    """``(repository path, anchor)`` a link of ``page`` names (path "" for the repository root),
    or None for a link that leaves the repository (a URL scheme, or above its root). A link to
    a section of the same page has the page's own path."""
    if SCHEME.match(target) or target.startswith("//"):
        return None
    path, _, anchor = target.partition("#")
    path = unquote(path.partition("?")[0])
    if not path:
        return page, anchor
    joined = PurePosixPath(path.lstrip("/")) if path.startswith("/") else \
        PurePosixPath(page).parent / path
    parts: list[str] = []
    for part in joined.parts:
        if part == "..":
            if not parts:
                return None
            parts.pop()
        elif part != ".":
            parts.append(part)
    return "/".join(parts), anchor


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation but ``-`` and ``_`` dropped,
    spaces to ``-``."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """The anchors of a Markdown page's headings (repeated headings get ``-1``, ``-2``, ...)."""
    seen: dict[str, int] = {}
    out = set()
    for m in HEADING.finditer(FENCE.sub(_blank, text)):
        base = slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def read_text(path: str) -> str | None:
    """A repository file as text; None for a binary or missing file."""
    try:
        data = (ROOT / path).read_bytes()
    except OSError:
        return None
    return None if b"\0" in data else data.decode("utf-8", errors="replace")


@pytest.fixture(scope="module")
def tracked() -> frozenset[str]:
    """The files git tracks, as paths relative to the repository root."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the tracked files cannot be listed")
    if shutil.which("git") is None:
        pytest.skip("git is not installed: the tracked files cannot be listed")
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip(f"git ls-files failed: {out.stderr.strip()}")
    return frozenset(name for name in out.stdout.split("\0") if name)


def folders(files: frozenset[str]) -> set[str]:
    """Every folder that holds a tracked file ("" for the root)."""
    out = {""}
    for name in files:
        out.update(str(parent) for parent in PurePosixPath(name).parents if str(parent) != ".")
    return out


def code_files(files: frozenset[str]) -> list[str]:
    return sorted(name for name in files
                  if name.split("/", 1)[0] in CODE_DIRS or name in CODE_FILES)


# ---------------------------------------------------------------------------------------------
# the helpers themselves


def test_links_finds_every_kind_and_ignores_code():
    text = "\n".join([
        "See [the notes](docs/methods.md#l_extra-settings) and ![a figure](figures/a.png).",
        '[titled](docs/paper.md "the paper") and [angled](<docs/a b.md>)',
        "`[not a link](in/a/span.md)` but [`code` text](real.md)",
        "```",
        "[not a link](in/a/fence.md)",
        "```",
        '[ref]: docs/ref.md "title"',
        '<img src="figures/b.png" alt="b"> and [web](https://example.org/x)',
    ])
    assert links(text) == [
        (1, "docs/methods.md#l_extra-settings"), (1, "figures/a.png"), (2, "docs/a b.md"),
        (2, "docs/paper.md"), (3, "real.md"), (7, "docs/ref.md"), (8, "figures/b.png"),
        (8, "https://example.org/x")]


def test_resolve_is_relative_to_the_page():
    assert resolve("docs/paper.md", "other.md#notation") == ("docs/other.md", "notation")
    assert resolve("docs/paper.md", "../README.md") == ("README.md", "")
    assert resolve("README.md", "/lsa/claims.py") == ("lsa/claims.py", "")
    assert resolve("README.md", "docs/a%20b.md?plain=1") == ("docs/a b.md", "")
    assert resolve("README.md", "#results") == ("README.md", "results")
    assert resolve("README.md", "../outside.md") is None
    for url in ("https://arxiv.org/abs/2506.11769", "http://x.org", "mailto:a@b.c"):
        assert resolve("README.md", url) is None


def test_anchors_follow_github():
    text = "# Methods\n## l_extra settings\n## `PI` (position interpolation)\n## Methods\n"
    assert anchors(text) == {"methods", "l_extra-settings", "pi-position-interpolation",
                             "methods-1"}


# ---------------------------------------------------------------------------------------------
# the repository


def test_markdown_links_name_tracked_files(tracked):
    """Relative links and images of every tracked Markdown file resolve to tracked files or
    folders; a link to a section of a Markdown page names one of its headings."""
    dirs = folders(tracked)
    broken, headings = [], {}
    for page in sorted(name for name in tracked if name.endswith(".md")):
        text = read_text(page)
        if text is None:
            continue
        for line, target in links(text):
            where = resolve(page, target)
            if where is None:
                continue
            path, anchor = where
            if path not in tracked and path not in dirs:
                broken.append(f"{page}:{line}: {target} (not a tracked file)")
                continue
            if anchor and path.endswith(".md") and path in tracked:
                if path not in headings:
                    headings[path] = anchors(read_text(path) or "")
                if anchor not in headings[path]:
                    broken.append(f"{page}:{line}: {target} (no such heading in {path})")
    assert not broken, "links that do not resolve in the repository:\n" + "\n".join(broken)


def test_code_cites_the_repository_notes(tracked):
    """Code and configuration cite docs/methods.md and docs/paper.md by their repository path,
    never notes that are not in the repository, and a cited section exists."""
    bad = []
    sections: dict[str, set[str]] = {}
    for name in code_files(tracked):
        text = read_text(name)
        if text is None:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if OUTSIDE_NOTES in line:
                bad.append(f"{name}:{number}: cites {OUTSIDE_NOTES} (outside the repository)")
            for m in NOTE_NAME.finditer(line):
                if line[max(0, m.start() - len(DOCS) - 1):m.start()] != DOCS + "/":
                    bad.append(f"{name}:{number}: cites {m.group(0)} without its folder "
                               f"({DOCS}/{m.group(0)})")
            for m in NOTE_SECTION.finditer(line):
                page = m.group(0).partition("#")[0]
                if page not in sections:
                    sections[page] = anchors(read_text(page) or "")
                if m.group(1) not in sections[page]:
                    bad.append(f"{name}:{number}: {m.group(0)} names no heading of {page}")
    assert not bad, "citations that do not point into the repository:\n" + "\n".join(bad)


def test_paper_page_repeats_the_reference_values():
    """Every entry of lsa.claims.PAPER appears once in docs/paper.md's tables (a row
    ``| `key` | value | grade | ... |``) with the same value and grade, and no other key does."""
    from lsa.claims import PAPER

    text = read_text("docs/paper.md")
    assert text is not None, "docs/paper.md is missing"
    rows: dict[str, list[str]] = {}
    repeated = []
    for line in text.splitlines():
        if not re.match(r"^\|\s*`[^`]+/[^`]+`\s*\|", line):
            continue
        cells = [c.strip().replace("\\|", "|")
                 for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
        key = cells[0].strip("`")
        if key in rows:
            repeated.append(key)
        rows[key] = cells[1:]
    assert not repeated, f"keys listed twice in docs/paper.md: {repeated}"
    assert set(rows) == set(PAPER), (f"missing: {sorted(set(PAPER) - set(rows))}; "
                                     f"unknown: {sorted(set(rows) - set(PAPER))}")

    def same(cell: str, value) -> bool:
        if isinstance(value, bool):
            return cell == str(value)
        if isinstance(value, int | float):
            try:
                return float(cell) == float(value)
            except ValueError:
                return False
        return cell == str(value)

    wrong = []
    for key, ref in PAPER.items():
        value, grade = rows[key][:2]
        if not (same(value, ref.value) and grade == ref.grade):
            wrong.append(f"{key}: {value} [{grade}] in the page, {ref.value!r} [{ref.grade}] in "
                         "lsa/claims.py")
    assert not wrong, "values that differ from lsa/claims.py:\n" + "\n".join(wrong)


def test_the_kernel_belongs_to_its_environment():
    """make install registers the Jupyter kernel in .venv only; a user-level kernel comes on
    request (make kernel-user), named after its clone, so that a second clone never takes the
    first one's over (issue 58)."""
    import subprocess

    text = (ROOT / "Makefile").read_text()
    install = text.split("$(VENV)/.installed:")[1].split("touch $@")[0]
    assert "--sys-prefix" in install and "--user" not in install
    out = subprocess.run(["make", "-n", "kernel-user"], cwd=ROOT, capture_output=True,
                         text=True).stdout
    assert '--user --name "lsa-' in out and '--name "lsa"' not in out
