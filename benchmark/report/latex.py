r"""The paper table: a board as a booktabs LaTeX table a paper can ``\input``, made by pandas'
Styler.

A paper shows fewer columns than the board's Markdown (13 there did not fit a page): the
method; the headline metric (Recall@1, nDCG@10 on continuous labels) as the mean ± the
half-width of its 95% Student-t interval over seeds, bold where the method is not worse than
the best; one second metric (:data:`~dmlbench.metrics.catalogue.PAPER_SECOND`: MAP@R, or MLD@10)
the same way; and, where the board was judged, the difference to the best of the others with
its 95% simultaneous interval and the verdict. Every other metric, the standard deviations,
P(rank 1) and P(top 3) are in the board's CSV, which the caption names.

The Styler escapes the method names (a plug-in may be called ``a&b`` or ``my_loss``) and
writes the booktabs rules, caption and label; the numbers are written here as LaTeX (``18.3
$\pm$ 0.5``, a minus sign in math), and the caption is escaped by :func:`escape`, which also
turns ``±``, ``δ``, ``α`` and the like into math, since pdflatex has no text glyph for them.
The output needs ``\usepackage{booktabs}``; tests/report/test_latex.py compiles the committed
ones with pdflatex.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import pandas as pd

from dmlbench.metrics import catalogue
from dmlbench.metrics.stats import t_half_width
from dmlbench.report.gate import BELOW_START

if TYPE_CHECKING:
    from dmlbench.report.board import BoardAnalysis

_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "±": r"$\pm$",
    "α": r"$\alpha$",
    "δ": r"$\delta$",
    "Δ": r"$\Delta$",
    "τ": r"$\tau$",
    "×": r"$\times$",
    "≥": r"$\geq$",
    "≤": r"$\leq$",
    "−": r"$-$",
    ">": r"$>$",
    "<": r"$<$",
}
LEVEL = 0.95  # the seeds' t-interval the table shows beside each mean
# ``\small`` and narrower column gaps: the widest board (a 21-letter method name, a Δ of
# -14.3 [-17.2, -11.5]) then fits the text width of LaTeX's article class (345 pt, narrower
# than most paper templates' pages) without an overfull box.
FIT = [
    {"selector": "small", "props": ":;"},
    {"selector": "setlength", "props": ":{\\tabcolsep}{3pt};"},
]


def escape(text: str) -> str:
    """Escape LaTeX's special characters in plain text; the Greek letters and math signs a
    caption uses become math (pdflatex has no text glyph for them)."""
    return "".join(_SPECIAL.get(ch, ch) for ch in text)


def pretty_metric(name: str) -> str:
    """``recall@4`` -> ``R@4``, ``ndcg@10`` -> ``nDCG@10``, ``mld@1`` -> ``MLD@1``."""
    return catalogue.short_label(name)


def _number(x: float, digits: int) -> str:
    return f"{x:.{digits}f}" if x >= 0 else f"${x:.{digits}f}$"


def _mean_cell(row: pd.Series, metric: str) -> str:
    """``18.3 $\\pm$ 0.5``: the shown mean and its half-width; the mean alone for one seed."""
    if pd.isna(row[metric]):
        return "—"
    digits, scale = catalogue.digits(metric), catalogue.scale(metric)
    text = _number(scale * float(row[metric]), digits)
    h = t_half_width(float(row.get(f"{metric}_std", math.nan)), int(row["seeds"]), LEVEL)
    return text if math.isnan(h) else rf"{text} $\pm$ {scale * h:.{digits}f}"


def _header(metric: str) -> str:
    return escape(pretty_metric(metric) + (" (%)" if catalogue.is_percent(metric) else ""))


def paper_metrics(table: pd.DataFrame, board: BoardAnalysis) -> list[str]:
    """The headline metric (the board's) and the first of :data:`catalogue.PAPER_SECOND` the
    table has."""
    first = board.metric or next((c for c in table.columns if catalogue.family(c)), None)
    if first is None:
        return []
    second = next((m for m in catalogue.PAPER_SECOND if m in table.columns and m != first), None)
    return [first] if second is None else [first, second]


def paper_frame(table: pd.DataFrame, board: BoardAnalysis) -> tuple[pd.DataFrame, list[str]]:
    """The paper table's cells (LaTeX, the method names still plain) and its bold methods."""
    metrics = paper_metrics(table, board)
    cells: dict[str, list[str]] = {"Method": [str(m) for m in table.index]}
    for m in metrics:
        cells[_header(m)] = [_mean_cell(row, m) for _, row in table.iterrows()]
    v = board.verdicts
    if v is not None and board.metric is not None:
        digits, scale = catalogue.digits(board.metric), catalogue.scale(board.metric)
        diff, verdict = [], []
        for method in table.index:
            if method not in v.index:
                diff.append("—")
                verdict.append("—")
                continue
            d, lo, hi = (scale * float(v.loc[method, c]) for c in ("difference", "lower", "upper"))
            diff.append(f"${d:+.{digits}f}$ $[{lo:+.{digits}f}, {hi:+.{digits}f}]$")
            below = "below_start" in v and bool(v.loc[method, "below_start"])
            verdict.append(str(v.loc[method, "verdict"]) + (r"$^\dagger$" if below else ""))
        cells[rf"$\Delta$ {escape(pretty_metric(board.metric))} (95\% CI)"] = diff
        cells["Verdict"] = verdict
    return pd.DataFrame(cells), list(board.bold.get(board.metric or "", []))


def paper_caption(title: str, table: pd.DataFrame, board: BoardAnalysis, csv_name: str) -> str:
    """What the numbers are, in a paper's words (plain text: :func:`latex_table` escapes it)."""
    metrics = paper_metrics(table, board)
    counts = sorted(set(table["seeds"].astype(int))) if "seeds" in table else [1]
    seeds = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]}–{counts[-1]}"
    labels = " and ".join(
        catalogue.short_label(m)
        + ("" if catalogue.is_percent(m) else f" (in {catalogue.unit(m)}s)")
        + ("" if catalogue.higher_is_better(m) else ", lower is better")
        for m in metrics
    )
    if counts == [1]:
        numbers = "one seed each, so no interval"
    else:
        alone = " (the value alone for a method with one seed)" if counts[0] == 1 else ""
        numbers = f"mean over {seeds} seeds ± the half-width of its 95% t-interval{alone}"
    what = f"{title}. Test-class {labels}: {numbers}."
    if board.metric is None or board.verdicts is None:
        return f"{what} All metrics: {csv_name}."
    m = pretty_metric(board.metric)
    unit = " points" if catalogue.is_percent(board.metric) else ""
    delta = f"{catalogue.scale(board.metric) * board.margin:g}"
    return (
        f"{what} Bold: not worse than the best. Δ {m}: the difference to the best of the other "
        "methods with its 95% simultaneous interval (Hsu's multiple comparison with the best, "
        f"bootstrap over {board.resampled}). Verdict worse: the interval lies below 0; "
        f"equivalent: it lies inside ±{delta}{unit}; undecided: neither.{_start_words(board)} "
        "The rows that need no learning are never candidates. All metrics, P(rank 1) and "
        f"P(top 3): {csv_name}."
    )


def _start_words(board: BoardAnalysis) -> str:
    if not board.below_start:
        return ""
    return (
        f" A verdict with a dagger: {BELOW_START} (the method's mean is not above that of the "
        "pretrained network without fine-tuning)."
    )


def latex_table(table: pd.DataFrame, board: BoardAnalysis, caption: str, label: str) -> str:
    """A ``table`` environment with a booktabs ``tabular`` of the paper columns of a
    :func:`~dmlbench.report.tables.summary_table` and its :class:`BoardAnalysis`; ``caption``
    is plain text (escaped here)."""
    frame, bold = paper_frame(table, board)
    styler = (
        frame.style.hide(axis="index")
        .format(escape="latex", subset=["Method"])
        .set_table_styles(FIT, overwrite=False)
    )
    headline = frame.columns[1] if len(frame.columns) > 1 else None
    if headline is not None and bold:
        styler = styler.apply(
            lambda col: [
                "font-weight: bold" if method in bold else "" for method in frame["Method"]
            ],
            subset=[headline],
        )
    return styler.to_latex(
        environment="table",
        position="t",
        position_float="centering",
        hrules=True,
        column_format="l" + "r" * (len(frame.columns) - 1),
        caption=escape(caption),
        label=label,
        convert_css=True,
    )
