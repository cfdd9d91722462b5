"""One seaborn theme and one way to save a figure (PNG for the eye, PDF for papers)."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import seaborn as sns

from lsa import paths
from lsa.files import atomic_write_bytes


def set_theme() -> None:
    sns.set_theme(context="notebook", style="whitegrid", palette="colorblind",
                  rc={"figure.dpi": 100, "savefig.dpi": 150, "savefig.bbox": "tight"})


def savefig(fig, name: str, profile: str) -> list[Path]:
    """Save ``fig`` as ``figures/<profile>/<name>.png`` and ``.pdf``; returns the paths."""
    import io

    out = []
    for ext in ("png", "pdf"):
        buf = io.BytesIO()
        fig.savefig(buf, format=ext)
        out.append(atomic_write_bytes(paths.figures_dir(profile) / f"{name}.{ext}", buf.getvalue()))
    return out


__all__ = ["plt", "sns", "set_theme", "savefig"]


def loss_vs_length(ax, data, hue: str, train_range: tuple[int, int], title: str,
                   y: str = "mse") -> None:
    """Test loss against input length, one line per ``hue`` value, mean and sd over seeds;
    the training lengths are shaded."""
    sns.lineplot(data=data, x="length", y=y, hue=hue, errorbar="sd", ax=ax, marker=".")
    ax.axvspan(train_range[0] - 0.5, train_range[1] + 0.5, color="0.85", zorder=0,
               label="training lengths")
    ax.set(yscale="log", title=title, xlabel="input length", ylabel=f"test {y.upper()}")
    ax.legend(fontsize="small")


__all__ += ["loss_vs_length"]
