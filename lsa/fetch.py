"""``python -m lsa fetch longbench babilong [--from DIR]``: the benchmarks' files the GPU
profiles read, put where the jobs look (``data/longbench/``, ``data/babilong/prompts.py``;
``lsa.preflight``), each from a pinned revision and checked against its sha256.

- **LongBench** (THUDM/LongBench, MIT): the configuration tables ``dataset2prompt.json`` and
  ``dataset2maxlen.json`` from the GitHub repository at commit ``LONGBENCH_COMMIT``
  (checksums pinned), and the data, ``data.zip`` of the hub dataset ``THUDM/LongBench``,
  from which the ``*_e.jsonl`` files of LongBench-E are extracted. The hub revision of
  ``data.zip`` and its checksum are not known here (no hub access when this was written):
  ``LONGBENCH_DATA`` leaves them null, the fetch reads the main branch, prints the commit
  and sha256 it got and records them in ``data/longbench/FETCHED.json``; pin them in
  ``LONGBENCH_DATA`` once read. Every file's sha256 is recorded there too, and each
  LongBench-E run records its files' checksums in its metrics.
- **BABILong** (booydar/babilong, Apache-2.0): ``babilong/prompts.py`` at commit
  ``BABILONG_COMMIT`` (checksum pinned), read (parsed, never executed) at run time
  (``lsa.evaluate.babilong_prompts``).

``--from DIR`` (machines without network): the same files from a folder, verified the same
way: ``DIR`` holds ``dataset2prompt.json``, ``dataset2maxlen.json`` and either the
``*_e.jsonl`` files or ``data.zip``, and/or ``prompts.py`` (or LongBench's and BABILong's own
layouts: ``config/``, ``data/``, ``babilong/``). Nothing fetched is committed.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

from lsa import paths
from lsa.files import atomic_write_bytes, atomic_write_text

LONGBENCH_COMMIT = "2e00731f8d0bff23dc4325161044d0ed8af94c1e"
BABILONG_COMMIT = "ffa075fb7aff504275037efc04d3aeaa5b1f65b0"
RECORD = "FETCHED.json"


@dataclass(frozen=True)
class Pinned:
    """A file at a pinned commit of a GitHub repository, with its sha256."""

    name: str
    repo: str
    commit: str
    path: str
    sha256: str

    @property
    def url(self) -> str:
        return f"https://raw.githubusercontent.com/{self.repo}/{self.commit}/{self.path}"


@dataclass(frozen=True)
class HubFile:
    """A file of a hub dataset; ``revision`` and ``sha256`` null until pinned."""

    name: str
    repo: str
    revision: str | None
    sha256: str | None


LONGBENCH_TABLES = [
    Pinned("dataset2prompt.json", "THUDM/LongBench", LONGBENCH_COMMIT,
           "LongBench/config/dataset2prompt.json",
           "56d22ad4f382169c2b8a11ff4c982a4a1bea096c8152b0f0b85b64686b157c30"),
    Pinned("dataset2maxlen.json", "THUDM/LongBench", LONGBENCH_COMMIT,
           "LongBench/config/dataset2maxlen.json",
           "72966b3c0933e214591637fb085798c5e687ebff4ddaab5d99bbc31120532022"),
]
LONGBENCH_DATA = HubFile("data.zip", "THUDM/LongBench", revision=None, sha256=None)
BABILONG_PROMPTS = Pinned("prompts.py", "booydar/babilong", BABILONG_COMMIT,
                          "babilong/prompts.py",
                          "be08d7e466170177e38fddb997e3dd9ffb281d5a830edd240933e069a9c5c2ee")
TARGETS = ("longbench", "babilong")


class FetchError(RuntimeError):
    """A file could not be fetched, or its checksum is not the pinned one."""


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _verified(data: bytes, expected: str | None, what: str) -> bytes:
    got = hashlib.sha256(data).hexdigest()
    if expected is not None and got != expected:
        raise FetchError(f"{what}: sha256 {got}, pinned {expected}: not the pinned file "
                         "(another revision, or damaged): nothing was written")
    return data


def _download(url: str) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=120) as response:  # noqa: S310 - pinned https
            return response.read()
    except OSError as err:
        raise FetchError(f"{url}: {err}; without network, use --from DIR") from None


def _find(source: Path, name: str, *subfolders: str) -> Path | None:
    for folder in ("", *subfolders):
        candidate = source / folder / name
        if candidate.is_file():
            return candidate
    return None


def _pinned(item: Pinned, source: Path | None, target: Path, log: list[str]) -> dict:
    if source is None:
        data, origin = _download(item.url), item.url
    else:
        found = _find(source, item.name, "config", "LongBench/config", "babilong")
        if found is None:
            raise FetchError(f"--from {source}: no {item.name} (nor config/{item.name}, "
                             f"babilong/{item.name}); it is {item.url}")
        data, origin = found.read_bytes(), str(found)
    atomic_write_bytes(target / item.name, _verified(data, item.sha256, origin))
    log.append(f"{item.name}: {origin} (sha256 {item.sha256[:16]}..., as pinned)")
    return {"source": origin, "commit": item.commit, "sha256": item.sha256}


def _extract(archive: Path, datasets: list[str], target: Path) -> dict[str, str]:
    """The ``<dataset>_e.jsonl`` files of ``datasets`` out of LongBench's ``data.zip``."""
    wanted = {f"{d}_e.jsonl" for d in datasets}
    out = {}
    with zipfile.ZipFile(archive) as zf:
        for member in zf.namelist():
            name = Path(member).name
            if name in wanted:
                atomic_write_bytes(target / name, zf.read(member))
                out[name] = sha256(target / name)
    missing = sorted(wanted - set(out))
    if missing:
        raise FetchError(f"{archive}: lacks {', '.join(missing)}")
    return out


def fetch_longbench(datasets: list[str], source: Path | None = None,
                    target: Path | None = None) -> list[str]:
    """LongBench-E into ``target`` (default ``data/longbench``); returns what was done."""
    target = target or paths.CACHE / "longbench"
    log: list[str] = []
    record = {"tables": {t.name: _pinned(t, source, target, log) for t in LONGBENCH_TABLES}}
    local = [_find(source, f"{d}_e.jsonl", "data") for d in datasets] if source else []
    if source is not None and all(local):
        files = {}
        for path in local:
            shutil.copyfile(path, target / path.name)
            files[path.name] = sha256(target / path.name)
        record["data"] = {"source": str(source), "files": files}
        log.append(f"{len(files)} LongBench-E files from {source}")
    else:
        archive = _find(source, "data.zip") if source is not None else None
        if source is not None and archive is None:
            missing = [f"{d}_e.jsonl" for d, p in zip(datasets, local) if p is None]
            raise FetchError(f"--from {source}: neither data.zip nor {', '.join(missing[:3])}"
                             f"{', ...' if len(missing) > 3 else ''}")
        if archive is None:
            from huggingface_hub import hf_hub_download

            archive = Path(hf_hub_download(LONGBENCH_DATA.repo, LONGBENCH_DATA.name,
                                           repo_type="dataset",
                                           revision=LONGBENCH_DATA.revision))
        digest = sha256(archive)
        if LONGBENCH_DATA.sha256 is not None and digest != LONGBENCH_DATA.sha256:
            raise FetchError(f"{archive}: sha256 {digest}, pinned {LONGBENCH_DATA.sha256}")
        commit = archive.parent.name if archive.parent.parent.name == "snapshots" else None
        files = _extract(archive, datasets, target)
        record["data"] = {"source": str(archive), "repo": LONGBENCH_DATA.repo,
                          "revision": commit, "sha256": digest, "files": files}
        pinned = LONGBENCH_DATA.sha256 is not None
        log.append(f"{len(files)} LongBench-E files from {archive} (sha256 {digest}"
                   + (", as pinned)" if pinned else
                      f"; hub commit {commit or 'unknown'}: NOT pinned in lsa/fetch.py yet, "
                      "recorded in FETCHED.json: pin LONGBENCH_DATA with these values)"))
    atomic_write_text(target / RECORD, json.dumps(record, indent=1, sort_keys=True) + "\n")
    return [f"longbench -> {target}: {line}" for line in log]


def fetch_babilong(source: Path | None = None, target: Path | None = None) -> list[str]:
    """BABILong's ``prompts.py`` into ``target`` (default ``data/babilong``)."""
    target = target or paths.CACHE / "babilong"
    log: list[str] = []
    record = {"prompts.py": _pinned(BABILONG_PROMPTS, source, target, log)}
    atomic_write_text(target / RECORD, json.dumps(record, indent=1, sort_keys=True) + "\n")
    return [f"babilong -> {target}: {line}" for line in log]


def fetch(what: list[str], datasets: list[str], source: Path | None = None) -> list[str]:
    lines = []
    for name in what:
        lines += fetch_longbench(datasets, source) if name == "longbench" else \
            fetch_babilong(source)
    return lines
