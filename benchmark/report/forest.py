"""Forest plot of a board: each method's difference to the best of the others, with its interval.

One row per trained method, best first: the point is the difference of its mean to the best of
the *other* methods on the headline metric, the bar its 95% simultaneous interval
(:func:`dmlbench.report.verdicts.compare_with_best`), a line marks 0 and a grey band the
protocol's equivalence margin ± δ. The verdict is read off the picture: a bar wholly left of 0
is *worse*, a bar inside the band *equivalent*, anything else *undecided*; the marker says it
too (filled circle: not worse; cross: worse), so it survives a greyscale printer.

It replaces the critical-difference diagram (Demšar, JMLR 2006), whose average ranks need
several *data sets* as blocks: on one board its blocks were seeds, and its bars came from
all-pairs tests that disagreed with the table. Comparisons across data sets are not a board's.

:func:`forest_data` is the data step (a pure function, tested); :func:`draw_forest` only draws.
Saved as PNG and SVG with dates stripped and a fixed SVG id salt, like the bar plot, so a
re-render of the same records rewrites byte-identical files.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from dmlbench.metrics import catalogue
from dmlbench.report.figures import save_png_svg
from dmlbench.report.gate import verdict_text
from dmlbench.report.latex import pretty_metric
from dmlbench.report.titles import wrap_title
from dmlbench.report.verdicts import EQUIVALENT, WORSE

TITLE_WIDTH = 80


def forest_data(verdicts: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Per method, best first: ``difference``, ``lower``, ``upper`` in display units (% points,
    label distances as they are), ``verdict`` and ``below_start`` (no better than the
    starting point)."""
    scale = catalogue.scale(metric)
    out = verdicts[["difference", "lower", "upper"]] * scale
    below = verdicts.get("below_start", False)
    return out.assign(verdict=verdicts["verdict"], below_start=below)


def draw_forest(data: pd.DataFrame, metric: str, margin: float, title: str) -> Figure:
    """Horizontal intervals, first row of ``data`` at the top, the ± δ band and the 0 line."""
    scale = catalogue.scale(metric)
    delta = margin * scale
    n = len(data)
    fig = Figure(figsize=(7.0, 1.6 + 0.32 * max(n, 1)), layout="constrained")
    ax = fig.add_subplot()
    ys = list(range(n))[::-1]
    ax.axvspan(-delta, delta, color="0.88", zorder=0)
    ax.axvline(0.0, color="black", linewidth=0.8, zorder=1)
    for y, (_, row) in zip(ys, data.iterrows(), strict=True):
        worse = row["verdict"] == WORSE
        ax.plot([row["lower"], row["upper"]], [y, y], color="black", linewidth=1.2, zorder=2)
        ax.plot(
            row["difference"], y, marker="x" if worse else "o", color="black",
            markerfacecolor="black" if row["verdict"] == EQUIVALENT else "white",
            markersize=6, zorder=3, linestyle="none",
        )  # fmt: skip
        label = verdict_text(str(row["verdict"]), bool(row["below_start"]))
        ax.text(max(row["upper"], delta), y, f"  {label}", va="center", fontsize=8)
    ax.set_yticks(ys, [str(m) for m in data.index])
    ax.set_ylim(-0.7, n - 0.3)
    name = pretty_metric(metric).replace("R@", "Recall@")
    unit = "points" if catalogue.is_percent(metric) else catalogue.unit(metric)
    ax.set_xlabel(
        f"{name}: difference to the best of the other methods ({unit})\n"
        f"95% simultaneous interval; grey band: ± δ = {delta:g} (equivalence margin)"
    )
    ax.set_title(wrap_title(title, TITLE_WIDTH), fontsize=10)
    ax.grid(axis="x", color="0.85", linewidth=0.6)
    ax.set_axisbelow(True)
    left, right = ax.get_xlim()
    ax.set_xlim(left, right + 0.18 * (right - left))  # room for the verdict labels
    return fig


def save_forest(
    verdicts: pd.DataFrame, metric: str, margin: float, title: str, stem: Path
) -> list[Path]:
    """Write ``<stem>.png`` and ``<stem>.svg``; nothing without verdicts."""
    if verdicts.empty:
        return []
    fig = draw_forest(forest_data(verdicts, metric), metric, margin, title)
    stem.parent.mkdir(parents=True, exist_ok=True)
    png, svg = (stem.parent / f"{stem.name}.{ext}" for ext in ("png", "svg"))
    save_png_svg(fig, png, svg)
    return [png, svg]
