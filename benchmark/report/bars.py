"""Bar chart of one metric per method with error bars (mean ± std over seeds).

The data step (:func:`bar_data`) is a pure function, tested without drawing; :func:`draw_bars`
is a thin renderer. The chart must survive a greyscale printer: bars are one mid grey with
black edges (no hatching: a pattern per bar said nothing the row label does not, and made
the bars hard to read), and the axis says what is measured and in which unit.
Drawn with ``matplotlib.figure.Figure`` directly (the Agg canvas, no pyplot state), saved as PNG
(for the HTML page) and SVG (for papers), with dates stripped and a fixed SVG id salt so that
re-running the report on the same records rewrites byte-identical files.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from dmlbench.metrics import catalogue
from dmlbench.records import PRETRAINED
from dmlbench.report.figures import save_png_svg
from dmlbench.report.gate import BELOW_START, no_better_than_start
from dmlbench.report.latex import pretty_metric
from dmlbench.report.titles import wrap_title

TITLE_WIDTH = 80  # characters per title line: a board's title names its protocol and budget
GREY = "0.75"


def unit(metric: str) -> str:
    return catalogue.unit(metric)


def bar_data(table: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Methods in the table's order with ``mean``, ``std`` (display units) and ``seeds``.

    ``table`` is a :func:`dmlbench.report.tables.summary_table`; fractions become %, except
    label distances (``mld@K``), shown as they are. Methods without a value are dropped; a
    method with one seed has ``std`` 0 here only so that no error bar is drawn (the label and
    the axis say "one seed", never a spread of 0).
    """
    scale = catalogue.scale(metric)
    out = pd.DataFrame(
        {
            "mean": table[metric] * scale,
            "std": table[f"{metric}_std"].fillna(0.0) * scale,
            "seeds": table["seeds"].astype(int),
        },
        index=table.index,
    )
    return out.dropna(subset=["mean"])


def draw_bars(data: pd.DataFrame, metric: str, title: str) -> Figure:
    """Horizontal bars, first row of ``data`` at the top, std as error bars; where the board
    has a pretrained row, a dashed line at its mean and the methods not beyond it labelled
    ``BELOW_START``."""
    n = len(data)
    higher = catalogue.higher_is_better(metric)
    means = {str(m): {metric: float(v)} for m, v in data["mean"].items()}
    starts = set(no_better_than_start(means, metric, higher))
    fig = Figure(figsize=(7.0, 1.2 + 0.38 * max(n, 1)), layout="constrained")
    ax = fig.add_subplot()
    ys = list(range(n))[::-1]
    for y, (_, row) in zip(ys, data.iterrows(), strict=True):
        ax.barh(
            y,
            row["mean"],
            xerr=row["std"],
            color=GREY,
            edgecolor="black",
            linewidth=0.8,
            error_kw={"ecolor": "black", "capsize": 3, "elinewidth": 1.0},
        )
        below = str(row.name) in starts
        ax.text(
            row["mean"] + row["std"],
            y,
            f"  {row['mean']:.1f} (n={int(row['seeds'])})" + (f", {BELOW_START}" if below else ""),
            va="center",
            fontsize=8,
        )
    if PRETRAINED in data.index:  # the starting point every method fine-tunes
        ax.axvline(
            float(data.loc[PRETRAINED, "mean"]), color="black", linestyle="--", linewidth=0.8
        )
    ax.set_yticks(ys, [str(m) for m in data.index])
    ax.set_ylabel("method")
    what = spread_words(data["seeds"])
    name = pretty_metric(metric).replace("R@", "Recall@")
    ax.set_xlabel(f"{name} on test classes ({unit(metric)}), {what}")
    if unit(metric) == "%":
        ax.set_xlim(0, min(100.0, max(10.0, float((data["mean"] + data["std"]).max()) * 1.2)))
    ax.set_title(wrap_title(title, TITLE_WIDTH), fontsize=10)
    ax.grid(axis="x", color="0.85", linewidth=0.6)
    ax.set_axisbelow(True)
    return fig


def spread_words(seeds: pd.Series) -> str:
    """What the bars and error bars show, given the seeds per method."""
    counts = sorted(set(int(n) for n in seeds))
    if counts == [1]:
        return "one seed: no spread (no error bars)"
    if len(counts) == 1:
        return f"mean ± std over {counts[0]} seeds"
    tail = " (no error bar for n=1)" if counts[0] == 1 else ""
    return f"mean ± std over n seeds{tail}"


def save_bars(table: pd.DataFrame, metric: str, title: str, stem: Path) -> list[Path]:
    """Write ``<stem>.png`` and ``<stem>.svg``; nothing when no method has the metric."""
    data = bar_data(table, metric) if metric in table.columns else pd.DataFrame()
    if data.empty:
        return []
    fig = draw_bars(data, metric, title)
    stem.parent.mkdir(parents=True, exist_ok=True)
    # not with_suffix: a sweep's protocol name has dots (``p@model.embedding_size=16``)
    png, svg = (stem.parent / f"{stem.name}.{ext}" for ext in ("png", "svg"))
    save_png_svg(fig, png, svg)
    return [png, svg]
