"""Was the search budget enough? Each method's best validation score against trials spent.

Drawn per tuned board (``<stem>/budget.png``) from its search-trial records alone (the Optuna
database is not needed): for every search study of a method (``search.studies``; a record
without a study index is study 0), the best value of a *complete* trial among the first n
trials (by slot, the order an uninterrupted study runs them), n = 1 … N — the value the
study would have selected had it stopped after n trials. The figure shows, per method, the
mean of that best-so-far over its studies, with the band from the lowest to the highest study
(a single line with one study).

**Still rising at N.** A method whose mean best-so-far gained more than
:data:`RISING_POINTS` (0.5 validation points) over the last quarter of its trials — from trial
N − ⌈N/4⌉ to trial N — is *still rising*: more trials would likely have found a better
setting, so its row reflects the budget as much as the method. Such methods are named under
the figure and in the board's Markdown. The rule looks at the mean over studies, so one lucky
late trial in one study moves it by 1/T of its size.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from dmlbench.records import Record
from dmlbench.report.figures import save_small_png

RISING_POINTS = 0.005  # 0.5 validation points, on the records' fraction scale
VAL = "val_"
FILE = "budget.png"


def best_so_far(trials: Iterable[Record]) -> pd.DataFrame:
    """Per method, study and trials spent n (1 … N): ``best``, the best complete trial's
    validation value among the study's first n trials (NaN before its first complete one)."""
    rows = []
    for r in trials:
        key = next((k for k in r.metrics if k.startswith(VAL)), None)
        if r.stage != "search-trial" or r.trial is None:
            continue
        done = key is not None and r.search.get("state") == "complete"
        value = r.metrics[key] if done and key is not None else math.nan
        rows.append((r.method, r.study_index, r.trial, value))
    if not rows:
        return pd.DataFrame(columns=["method", "study", "spent", "best"])
    frame = pd.DataFrame(rows, columns=["method", "study", "trial", "value"])
    frame = frame.sort_values(["method", "study", "trial"])
    frame["spent"] = frame.groupby(["method", "study"]).cumcount() + 1
    frame["best"] = frame.groupby(["method", "study"])["value"].cummax()  # NaN stays NaN
    frame["best"] = frame.groupby(["method", "study"])["best"].ffill()
    return frame[["method", "study", "spent", "best"]].reset_index(drop=True)


def budget_curves(trials: Iterable[Record]) -> pd.DataFrame:
    """Per method and trials spent: ``mean``, ``low``, ``high`` of the best-so-far over the
    studies that had spent that many trials, and ``studies`` (their number)."""
    best = best_so_far(trials)
    if best.empty:
        return pd.DataFrame(columns=["mean", "low", "high", "studies"])
    g = best.groupby(["method", "spent"])["best"]
    return pd.DataFrame(
        {"mean": g.mean(), "low": g.min(), "high": g.max(), "studies": g.size()}
    ).sort_index()


def still_rising(curves: pd.DataFrame, points: float = RISING_POINTS) -> list[str]:
    """The methods whose mean best-so-far gained more than ``points`` over the last quarter of
    their trials (module docstring), in name order."""
    out = []
    for method, curve in curves.groupby(level="method"):
        mean = curve["mean"].droplevel("method").dropna()
        if len(mean) < 2:
            continue
        n = int(mean.index.max())
        start = n - max(1, math.ceil(n / 4))
        before = mean[mean.index <= start]
        if before.empty:
            continue
        if float(mean.loc[n]) - float(before.iloc[-1]) > points:
            out.append(str(method))
    return sorted(out)


def caption(curves: pd.DataFrame, rising: list[str], metric: str) -> str:
    """The figure's caption: what is drawn and, by name, the methods still rising at N."""
    studies = int(curves["studies"].max()) if len(curves) else 0
    spread = (
        f"mean over each method's {studies} search studies, band from the lowest to the "
        "highest study"
        if studies > 1
        else "one search study per method"
    )
    n = int(curves.index.get_level_values("spent").max()) if len(curves) else 0
    rule = (
        f"Still rising at N = {n} (the mean best gained more than "
        f"{100 * RISING_POINTS:g} points over the last ⌈N/4⌉ trials): "
    )
    named = ", ".join(rising) if rising else "none"
    return (
        f"Best validation {metric} (%) so far against trials spent, 1 … {n} ({spread}): the "
        f"value each search would have selected had it stopped there. {rule}{named}."
    )


def draw_budget(curves: pd.DataFrame, rising: list[str], metric: str, title: str) -> Figure:
    """One line per method (a min–max band where it has several studies); the methods still
    rising dashed and marked in the legend."""
    fig = Figure(figsize=(7.2, 4.0), layout="constrained")
    ax = fig.subplots()
    methods = list(dict.fromkeys(curves.index.get_level_values("method")))
    palette = colormaps["tab20"]
    for i, m in enumerate(methods):
        c = curves.loc[m]
        x = c.index.to_numpy()
        colour = palette(i % 20)
        style = "--" if m in rising else "-"
        label = f"{m} (still rising)" if m in rising else m
        ax.plot(x, 100 * c["mean"], style, color=colour, linewidth=1.2, label=label)
        if int(c["studies"].max()) > 1:
            ax.fill_between(
                x, 100 * c["low"], 100 * c["high"], color=colour, alpha=0.12, linewidth=0
            )
    ax.set_xlabel("trials spent")
    ax.set_ylabel(f"best validation {metric} so far (%)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(True, color="0.88", linewidth=0.6)
    ax.tick_params(labelsize=8)
    ax.legend(fontsize=6.5, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    ax.set_title(f"{title}: search budget", fontsize=9)
    return fig


def write_budget_curves(
    records: Iterable[Record], folder: Path, title: str
) -> tuple[Path, str, list[str]] | None:
    """``<folder>/budget.png``, its caption and the methods still rising; None for a board
    without search trials (a defaults board)."""
    trials = [r for r in records if r.stage == "search-trial"]
    curves = budget_curves(trials)
    if curves.empty or not np.isfinite(curves["mean"].to_numpy(dtype=float)).any():
        return None
    metric = next(k for r in trials for k in r.metrics if k.startswith(VAL)).removeprefix(VAL)
    rising = still_rising(curves)
    path = folder / FILE
    save_small_png(draw_budget(curves, rising, metric, title), path, dpi=90, colours=64)
    return path, caption(curves, rising, metric), rising
