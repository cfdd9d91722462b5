"""The report's figure gallery: every figure the found sections saved (the report draws
none of its own)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from lsa import paths
from lsa.sections import Result

if TYPE_CHECKING:
    from lsa.notebook import Setup


def gallery(setup: Setup, result: Result) -> list[tuple[str, str, Path]]:
    """(section, figure name, PNG) of every figure the found sections saved (a published
    snapshot's figures where the report reads one, but for a snapshot rendered again: the
    figures just drawn)."""
    from lsa import published

    where = (setup.snapshot.root / "figures"
             if setup.snapshot is not None and not published.rerendering()
             else paths.figures_dir(setup.profile))
    return [(s, name, where / f"{name}.png")
            for s, names in result.section_figures.items() for name in names]
