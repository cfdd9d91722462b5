"""Every path the project uses, independent of the working directory.

- ``ROOT``: the repository (``LSA_ROOT`` overrides, for installed copies).
- ``CACHE``: ``ROOT/data``: everything fetched or derived (ignored by git).
- ``output_root()``: where ``results/`` and ``figures/`` go; ``LSA_OUTPUT_ROOT`` overrides it
  (tests use it so that they never touch a real run's outputs).
- ``data_dir()``: ``LSA_DATA_DIR``, a read-only folder of inputs the user already has.
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
