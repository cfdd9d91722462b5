"""Files: atomic writes, JSON, provenance (``run_info.json``), metrics and tables.

(Named ``files``, not ``io``, so that it never shadows the standard library's ``io``.)

A file is written to a temporary name in its folder and renamed into place, so a killed run
never leaves a half-written file that looks finished.
"""

from __future__ import annotations

import datetime as _dt
import gzip
import hashlib
import json
import math
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from lsa import paths

TMP_SUFFIX = ".tmp"  # an atomic write's temporary file: `.<name>.<random>.tmp` beside the target
PACKAGES = ("torch", "transformers", "peft", "accelerate", "bitsandbytes", "datasets",
            "tokenizers", "numpy", "pandas", "seaborn", "papermill", "snakemake")


class InputFormatError(ValueError):
    """An input file (books, bAbI, BABILong prompts, LongBench, the configuration) that is
    malformed or empty; the message names the file, the line or key, and what was expected."""


class DamagedFile(RuntimeError):
    """A file that exists but does not hold what it should (cut, changed, unreadable); the
    message names it and the command that makes or restores it (``lsa.__main__`` turns it into
    one line and its exit status)."""


def shell_path(path: str | Path) -> str:
    """``path`` as a command line names it: relative to the repository where it lies inside it
    (commands run there), quoted for the shell (a space, a quote)."""
    import shlex

    path = Path(path)
    if path.is_absolute() and path.is_relative_to(paths.ROOT):
        path = path.relative_to(paths.ROOT)
    return shlex.quote(str(path))


def bad_input(path: str | Path, problem: str, expected: str, line: int | None = None,
              cls: type[InputFormatError] = InputFormatError) -> InputFormatError:
    """The error for ``path`` (``line``): ``<file>, line N: <problem>; expected <expected>``."""
    where = f"{path}, line {line}" if line is not None else str(path)
    return cls(f"{where}: {problem}; expected {expected}")


def umask() -> int:
    """The process's umask: from ``/proc/self/status`` (Linux), else by setting it and setting
    it back (which another thread could see for an instant)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """``data`` into ``path`` through a temporary file renamed into place, with the mode any
    new file gets (0666 less the umask: 0644 under 022, 0664 under 002, so a group that shares
    a results folder reads it), not ``mkstemp``'s 0600."""
    from lsa import faults

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TMP_SUFFIX)
    try:
        os.fchmod(fd, 0o666 & ~umask())
        with os.fdopen(fd, "wb") as fh:
            fh.write(data[:len(data) // 2])
            fh.flush()
            faults.point(f"write:{path.parent.name}/{path.name}")
            fh.write(data[len(data) // 2:])
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def remove_partial_writes(folder: str | Path) -> list[Path]:
    """Delete the temporary files that killed atomic writes left in ``folder`` (not below it);
    returns them."""
    stale = [p for p in Path(folder).glob(f".*{TMP_SUFFIX}") if p.is_file()]
    for p in stale:
        p.unlink(missing_ok=True)
    return stale


def atomic_write_text(path: str | Path, text: str) -> Path:
    return atomic_write_bytes(path, text.encode())


def jsonable(obj: Any) -> Any:
    """``obj`` as ``write_json`` writes it: string keys, lists, plain numbers (a non-finite
    one as None or "inf"), paths as text."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if hasattr(obj, "item") and callable(obj.item) and getattr(obj, "ndim", 0) == 0:
        obj = obj.item()  # numpy / torch scalars
    if isinstance(obj, float) and not math.isfinite(obj):
        return None if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    if isinstance(obj, Path):
        return str(obj)
    return obj


def write_json(path: str | Path, obj: Any) -> Path:
    return atomic_write_text(path, json.dumps(jsonable(obj), indent=2, sort_keys=False) + "\n")


def read_json(path: str | Path) -> Any:
    return json.loads(Path(path).read_text())


def sha256(path: str | Path) -> str:
    """The sha256 of a file, read a block at a time (a model's weights may be gigabytes)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=paths.ROOT, capture_output=True,
                             text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=paths.ROOT, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode:
        return None
    return out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def package_versions() -> dict[str, str | None]:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def installed_versions() -> dict[str, str]:
    """Every distribution installed in this environment, name -> version (sorted by name):
    what a snapshot's ``stamp.json`` records, and what ``constraints.txt`` pins."""
    found = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            found[name.lower().replace("_", "-")] = dist.version
    return dict(sorted(found.items()))


def device_info() -> dict[str, Any]:
    info: dict[str, Any] = {"platform": platform.platform(), "python": sys.version.split()[0],
                            "cpu_count": os.cpu_count()}
    try:
        import torch

        info["torch_threads"] = torch.get_num_threads()
        # the vector instructions torch's CPU kernels use: float results differ between them,
        # and the difference grows over thousands of training steps
        info["cpu_capability"] = torch.backends.cpu.get_cpu_capability()
        info["cuda"] = torch.cuda.is_available()
        from lsa import kernels

        info["kernel_pin"] = kernels.pins()
        if info["cuda"]:
            info["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    except ImportError:
        pass
    return info


def run_info(config: Any, seed: int | None = None, started: float | None = None,
             **extra: Any) -> dict[str, Any]:
    """Provenance of one run: config, seed, commit, package versions, device, wall time."""
    cfg = config.to_dict() if hasattr(config, "to_dict") else config
    info = {
        "config": cfg,
        "seed": seed if seed is not None else (cfg or {}).get("seed"),
        "git_commit": git_commit(),
        "packages": package_versions(),
        "device": device_info(),
        "finished_utc": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    }
    if started is not None:
        info["wall_time_s"] = round(time.time() - started, 2)
    info.update(extra)
    return info


def save_metrics(folder: str | Path, metrics: dict[str, Any], config: Any,
                 started: float | None = None, **extra: Any) -> Path:
    """Write ``metrics.json`` and ``run_info.json`` into ``folder``; metrics last (the marker)."""
    folder = Path(folder)
    write_json(folder / "run_info.json", run_info(config, started=started, **extra))
    return write_json(folder / "metrics.json", metrics)


def packed(path: str | Path) -> Path:
    """The gzip copy of ``path`` (``<path>.gz``), as a published snapshot keeps a run's JSON."""
    path = Path(path)
    return path.with_name(path.name + ".gz")


def exists(path: str | Path) -> bool:
    """``path`` or its gzip copy (``packed``) exists."""
    return Path(path).exists() or packed(path).exists()


def read_text(path: str | Path) -> str:
    """The text of ``path``, or of its gzip copy where only that exists (``packed``)."""
    path = Path(path)
    if not path.exists() and packed(path).exists():
        return gzip.decompress(packed(path).read_bytes()).decode()
    return path.read_text()


def write_packed(path: str | Path, data: bytes) -> Path:
    """``data`` gzipped to ``packed(path)``, byte for byte the same for the same data (no
    name or time in the header), written atomically."""
    out = packed(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_bytes(gzip.compress(data, compresslevel=9, mtime=0))
    os.replace(tmp, out)
    return out


def save_table(df, path: str | Path, floatfmt: str = ".4g") -> tuple[Path, Path]:
    """Write a pandas DataFrame as CSV and Markdown (same stem)."""
    path = Path(path).with_suffix("")
    csv = atomic_write_text(path.with_suffix(".csv"), df.to_csv(index=False))
    md = atomic_write_text(path.with_suffix(".md"),
                           df.to_markdown(index=False, floatfmt=floatfmt) + "\n")
    return csv, md


#: a block of a page whose text code writes (``lsa.generated``: the prose docs' blocks, which
#: publishing writes; a bench page's, named ``bench-<what>``, which its command writes)
BLOCK = re.compile(r"(<!-- generated: (?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /generated -->)",
                   re.S)


def write_page(path: Path, name: str, text: str) -> Path:
    """Write a bench's page ``text`` (its ``# title``, then what it measured) at ``path``: as
    the block ``name`` in place of the page's own where the page has it (the page's title and
    prose outside it kept), else as a new page, its title above the block."""
    title, body = "", text.strip("\n")
    if body.startswith("# "):
        title, _, body = body.partition("\n")
    block = f"<!-- generated: {name} -->\n{body.strip(chr(10))}\n<!-- /generated -->"
    old = path.read_text() if path.exists() else ""
    found = [m for m in BLOCK.finditer(old) if m.group("name") == name]
    if found:
        new = old[:found[0].start()] + block + old[found[0].end():]
    else:
        new = (f"{title}\n\n" if title else "") + block + "\n"
    return atomic_write_text(path, new)
