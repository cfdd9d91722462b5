"""Every path the project uses, independent of the working directory.

- ``ROOT``: the repository (``LSA_ROOT`` overrides, for installed copies).
- ``CACHE``: ``ROOT/data``: everything fetched or derived (ignored by git).
- ``output_root()``: where ``results/`` and ``figures/`` go; ``LSA_OUTPUT_ROOT`` overrides it
  (tests use it so that they never touch a real run's outputs).
- ``data_dir()``: ``LSA_DATA_DIR``, a read-only folder of inputs the user already has.
- ``last_profile()``: the profile the last finished ``python -m lsa pipeline`` ran (the marker
  ``results/LAST_PROFILE``), which a notebook run alone reads by default.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(os.environ.get("LSA_ROOT", Path(__file__).resolve().parents[1]))
CONFIG_FILE = ROOT / "config" / "config.yaml"
NOTEBOOKS = ROOT / "notebooks"
CACHE = ROOT / "data"


def output_root() -> Path:
    return Path(os.environ.get("LSA_OUTPUT_ROOT", ROOT))


def results_dir(profile: str) -> Path:
    return output_root() / "results" / profile


def figures_dir(profile: str) -> Path:
    return output_root() / "figures" / profile


def section_dir(profile: str, section: str) -> Path:
    """Folder of one section's metrics, tables and run_info.json."""
    return results_dir(profile) / section


def metrics_file(profile: str, section: str) -> Path:
    return section_dir(profile, section) / "metrics.json"


def executed_notebook(profile: str, section: str) -> Path:
    return results_dir(profile) / "notebooks" / f"{section}.ipynb"


def data_dir() -> Path | None:
    """The user's read-only input folder (``LSA_DATA_DIR``), or None when unset."""
    value = os.environ.get("LSA_DATA_DIR")
    return Path(value).expanduser().resolve() if value else None


#: the profile a notebook run alone reads when no pipeline has finished yet (the README's)
DEFAULT_PROFILE = "mini"


def last_profile_file() -> Path:
    """The marker ``results/LAST_PROFILE``: one line, the profile of the last finished pipeline."""
    return output_root() / "results" / "LAST_PROFILE"


def write_last_profile(profile: str) -> Path:
    """Record ``profile`` as the last one ``python -m lsa pipeline`` finished (written whole or
    not at all; ``lsa.files`` imports this module, so not with its writer)."""
    path = last_profile_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(profile + "\n")
    os.replace(tmp, path)
    return path


def last_profile() -> str | None:
    """The profile of the last finished pipeline, or None when none finished (no marker)."""
    try:
        text = last_profile_file().read_text().strip()
    except FileNotFoundError:
        return None
    return text or None


def notebook_profile() -> tuple[str, str]:
    """The profile a notebook run alone with ``profile = None`` reads, and why: the last
    finished pipeline's (``last_profile``), else ``DEFAULT_PROFILE``."""
    last = last_profile()
    if last is not None:
        return last, f"the last finished `python -m lsa pipeline` ({last_profile_file()})"
    return DEFAULT_PROFILE, (f"no pipeline has finished yet ({last_profile_file()} is absent): "
                             f"the default, {DEFAULT_PROFILE}")
