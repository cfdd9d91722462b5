"""One seaborn theme and one way to save a figure (PNG for the eye, PDF for papers)."""

from __future__ import annotations

import itertools
import os
import re
import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns

from lsa import paths
from lsa.files import atomic_write_bytes


def set_theme() -> None:
    sns.set_theme(context="notebook", style="whitegrid", palette="colorblind",
                  rc={"figure.dpi": 100, "savefig.dpi": 150, "savefig.bbox": "tight",
                      # ticks below 1e-3 or from 1e4 up take an offset (x 1e-4): a row of
                      # '0.000125' labels runs together (smoke's L2 distances did)
                      "axes.formatter.limits": (-3, 4)})


def savefig(fig, name: str, profile: str) -> list[Path]:
    """Save ``fig`` as ``figures/<profile>/<name>.png`` and ``.pdf``; returns the paths."""
    import io

    out = []
    for ext in ("png", "pdf"):
        buf = io.BytesIO()
        fig.savefig(buf, format=ext, bbox_inches="tight")  # the legend right of the panels
        out.append(atomic_write_bytes(paths.figures_dir(profile) / f"{name}.{ext}", buf.getvalue()))
    return out


__all__ = ["plt", "sns", "set_theme", "savefig"]


def loss_vs_length(ax, data, hue: str, train_range: tuple[int, int], title: str,
                   y: str = "mse") -> None:
    """Test loss against input length, one line per ``hue`` value, mean and sd over seeds;
    the training lengths are shaded. No legend: the figure's one (``figure_legend``)."""
    sns.lineplot(data=data, x="length", y=y, hue=hue, errorbar="sd", ax=ax, marker=".",
                 legend="brief")
    ax.axvspan(train_range[0] - 0.5, train_range[1] + 0.5, color="0.85", zorder=0,
               label="training lengths")
    ax.set(yscale="log", title=title, xlabel="input length (binary tokens)",
           ylabel=f"test {y.upper()} (log scale)")
    if ax.get_legend() is not None:
        ax.get_legend().remove()


def interval_lines(data, x: str, y: str, low: str, high: str, hue: str, ax=None,
                   style: str | None = None, palette: dict | None = None,
                   style_order: list | None = None, **_grid) -> None:
    """``y`` per ``hue`` group of ``data`` against ``x``, its interval ``[low, high]`` (computed
    beforehand: a t or Wilson interval seaborn cannot draw) as error bars; a
    ``FacetGrid.map_dataframe`` function. ``palette`` (``hue_palette``) gives each ``hue``
    value one colour in every panel; ``style`` a column whose values ``style_order`` gives
    markers and line styles (the label then reads "<style>, <hue>")."""
    ax = ax or plt.gca()
    order = list(style_order or (dict.fromkeys(data[style]) if style else []))
    keys = [hue, style] if style else [hue]
    for key, sub in data.groupby(keys, sort=False):
        name, kind = key if style else (key[0] if isinstance(key, tuple) else key, None)
        i = order.index(kind) if style else 0
        ax.errorbar(sub[x], sub[y], yerr=[sub[y] - sub[low], sub[high] - sub[y]],
                    marker=MARKERS[i % len(MARKERS)], linestyle=LINES[i % len(LINES)],
                    capsize=3, color=(palette or {}).get(name),
                    label=f"{kind}, {name}" if style else str(name))


MARKERS = ("o", "s", "^", "D", "v")
LINES = ("-", "--", ":", "-.", (0, (5, 1)))


def hue_palette(values) -> dict:
    """One colour per distinct value, in order of appearance (seaborn's palette): the same
    colour means the same thing in every panel of a figure."""
    distinct = list(dict.fromkeys(values))
    return dict(zip(distinct, sns.color_palette(n_colors=len(distinct))))


__all__ += ["loss_vs_length", "interval_lines", "hue_palette"]


# --- labels: what a column measures, in words, with its window in tokens ----------------------

_WINDOWED = re.compile(r"^(ppl|nll|nll_beyond|nll_copy|score|score_beyond|score_copy|retrieval)"
                       r"_(\d+)x$")
_WINDOWED_WORDS = {
    "ppl": "perplexity at {w}",
    "nll": "NLL at {w} (nats)",
    "nll_beyond": "NLL beyond l_train, {w} windows (nats)",
    "nll_copy": "copy-probe NLL at {w} (nats)",
    "score": "score: -NLL at {w} (nats)",
    "score_beyond": "score: -NLL beyond l_train, {w} windows (nats)",
    "score_copy": "score: -copy-probe NLL at {w} (nats)",
    "retrieval": "copy-probe retrieval at {w}",
}
_WORDS = {
    "misalignment": "misalignment L_misalign (SCE, nats)",
    "misalign": "misalignment L_misalign (SCE, nats)",
    "jeffreys": "Jeffreys divergence, the alignment part (nats)",
    "entropy": "entropy H(p) + H(q), the sharpness part (nats)",
    "mean_entropy": "mean next-token entropy (nats)",
    "train_loss": "CE on the training books at l_train (nats)",
    "ce": "cross-entropy CE (nats)",
    "l2": "L2 distance ||p - q||",
    "ppl_long": "perplexity beyond l_train (2x and longer)",
    "ppl_growth": "perplexity growth (longest window / 1x)",
}


def window_text(mult: int, l_train: int | None) -> str:
    """``4x l_train (512 tokens)``, or ``4x l_train`` without ``l_train``."""
    return f"{mult}x l_train" + (f" ({mult * l_train} tokens)" if l_train else "")


def column_label(column: str, l_train: int | None = None) -> str:
    """An axis label for a table column: ``ppl_4x`` -> ``perplexity at 4x l_train (512
    tokens)``, ``misalignment`` -> ``misalignment L_misalign (SCE, nats)``."""
    match = _WINDOWED.match(column)
    if match:
        return _WINDOWED_WORDS[match[1]].format(w=window_text(int(match[2]), l_train))
    return _WORDS.get(column, column.replace("_", " "))


WINDOW_AXIS = "window (x l_train; tokens)"


def window_ticks(columns: list[str], l_train: int | None) -> list[str]:
    """Tick labels of windows (``ppl_2x`` -> ``2x\\n256``: the multiple, then its tokens; the
    axis label says "tokens", ``WINDOW_AXIS``)."""
    out = []
    for column in columns:
        mult = int(_WINDOWED.match(column)[2])
        out.append(f"{mult}x" + (f"\n{mult * l_train}" if l_train else ""))
    return out


def figure_legend(fig, axes, title: str | None = None, **kw) -> None:
    """One legend for the figure, right of its panels (never over the data), from the handles
    of every axes in ``axes`` (each label once); the axes' own legends are removed."""
    handles, labels = {}, []
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            if label not in handles and not label.startswith("_"):
                handles[label] = handle
                labels.append(label)
        if ax.get_legend() is not None:
            ax.get_legend().remove()
    if labels:
        fig.legend([handles[label] for label in labels], labels, title=title,
                   loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False, **kw)


def axes_legend_outside(ax, title: str | None = None) -> None:
    """The axes' legend right of it, outside the plot area (it never hides a point)."""
    if ax.get_legend_handles_labels()[1]:
        ax.legend(title=title, loc="center left", bbox_to_anchor=(1.02, 0.5), frameon=False)


__all__ += ["column_label", "window_ticks", "figure_legend", "axes_legend_outside"]


# --- what every figure must have: labels, one legend, nothing over the data -------------------

#: label texts that name a table column instead of saying what is shown
RAW_LABEL = re.compile(r"^value$|[a-z]_\d+x\b")


def _texts_of(ax, renderer) -> list:
    """The axes' labels, title and the tick labels drawn (those of ticks inside its view)."""
    box = ax.get_window_extent(renderer)
    out = [ax.xaxis.label, ax.yaxis.label, ax.title]
    for labels, lo, hi, coord in ((ax.get_xticklabels(), box.x0, box.x1, 0),
                                  (ax.get_yticklabels(), box.y0, box.y1, 1)):
        for t in labels:
            if t.get_text() and t.get_visible():
                at = t.get_window_extent(renderer)
                middle = (at.x0 + at.x1) / 2 if coord == 0 else (at.y0 + at.y1) / 2
                if lo - 1 <= middle <= hi + 1:
                    out.append(t)
    return [t for t in out if t.get_visible() and t.get_text()]


def _points(ax) -> np.ndarray:
    """Display coordinates of the axes' data points (line vertices, scatter offsets)."""
    from matplotlib.collections import PathCollection

    chunks = []
    for line in ax.lines:
        xy = np.asarray(line.get_xydata(), dtype=float)
        if len(xy):
            chunks.append(line.get_transform().transform(xy))
    for coll in ax.collections:
        if isinstance(coll, PathCollection) and len(coll.get_offsets()):
            chunks.append(coll.get_offset_transform().transform(
                np.asarray(coll.get_offsets(), dtype=float)))
    points = np.concatenate(chunks) if chunks else np.empty((0, 2))
    return points[np.isfinite(points).all(axis=1)]


def _inset(box):
    """``box`` shrunk by a pixel each side: touching is no overlap."""
    from matplotlib.transforms import Bbox

    x0, y0, x1, y1 = box.extents
    return Bbox.from_extents(x0 + 1, y0 + 1, x1 - 1, y1 - 1)


def figure_problems(fig) -> list[str]:
    """What is wrong with ``fig`` by the project's rules (empty: nothing):

    - every axes that shows data has an x and a y label, or shares that axis (``sharex`` /
      ``sharey``) with an axes of the figure that has one (a row labels its shared y once);
    - no label, tick label, title or legend entry is a table column's name (``value``,
      ``ppl_1x``: ``RAW_LABEL``);
    - at most one legend, and no legend over a data point of any axes;
    - no text of an axes (labels, tick labels, title) over the plot area or a text of another,
      and no two tick labels of one axis over each other.
    """
    from matplotlib.transforms import Bbox

    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    axes = [ax for ax in fig.axes if ax.get_visible() and ax.axison and ax.has_data()]
    problems = []

    def name(ax):
        return f"axes {fig.axes.index(ax)} ({ax.get_title() or 'untitled'})"

    for ax in axes:
        for which, get, shared in (("x", ax.get_xlabel, ax.get_shared_x_axes()),
                                   ("y", ax.get_ylabel, ax.get_shared_y_axes())):
            if get().strip():
                continue
            other = [o for o in axes if o is not ax and shared.joined(ax, o)
                     and (o.get_xlabel() if which == "x" else o.get_ylabel()).strip()]
            if not other:
                problems.append(f"{name(ax)}: no {which} label")
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    legends += list(fig.legends)
    if len(legends) > 1:
        problems.append(f"{len(legends)} legends (at most one)")
    texts = [(ax, t) for ax in axes for t in _texts_of(ax, renderer)]
    for legend in legends:
        texts += [(None, t) for t in legend.get_texts() + [legend.get_title()] if t.get_text()]
    for owner, text in texts:
        if RAW_LABEL.search(text.get_text()):
            problems.append(f"{name(owner) if owner else 'legend'}: label "
                            f"{text.get_text()!r} names a column")
    for legend in legends:
        box = legend.get_window_extent(renderer)
        for ax in axes:
            inside = [p for p in _points(ax) if box.contains(*p)]
            if inside:
                problems.append(f"the legend hides {len(inside)} data points of {name(ax)}")
    boxes = []
    for ax in axes:
        for text in _texts_of(ax, renderer):
            x0, y0, x1, y1 = text.get_window_extent(renderer).extents
            box = Bbox.from_extents(x0 + 1, y0 + 1, x1 - 1, y1 - 1)  # touching is no overlap
            boxes.append((ax, text, box))
            for other in axes:
                if other is not ax and box.overlaps(other.get_window_extent(renderer)):
                    problems.append(f"{name(ax)}: {text.get_text()!r} overlaps {name(other)}")
    for ax in axes:  # the tick labels of one axis, side by side
        for ticks in (ax.get_xticklabels(), ax.get_yticklabels()):
            shown = [t for t in ticks if t.get_visible() and t.get_text().strip()]
            for a, b in itertools.combinations(shown, 2):
                if _inset(a.get_window_extent(renderer)).overlaps(
                        _inset(b.get_window_extent(renderer))):
                    problems.append(f"{name(ax)}: tick labels {a.get_text()!r} and "
                                    f"{b.get_text()!r} overlap")
    for (ax, text, box), (other, text2, box2) in itertools.combinations(boxes, 2):
        if ax is not other and box.overlaps(box2):
            problems.append(f"{name(ax)}: {text.get_text()!r} overlaps {text2.get_text()!r} "
                            f"of {name(other)}")
    return list(dict.fromkeys(problems))


def check_figure(fig, name: str) -> None:
    """Warn about ``figure_problems``; raise instead when ``LSA_STRICT_FIGURES`` is set (the
    tests), so a figure that breaks the rules fails there without stopping a long pipeline."""
    problems = figure_problems(fig)
    if not problems:
        return
    text = f"figure {name}: " + "; ".join(problems)
    if os.environ.get("LSA_STRICT_FIGURES"):
        raise ValueError(text)
    warnings.warn(text, stacklevel=3)


__all__ += ["figure_problems", "check_figure"]
