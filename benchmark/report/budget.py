"""The tuning budget each method actually spent, read from its records.

Equal budgets are half of a fair comparison, so every report shows what each method consumed
under one protocol hash: how many hyper-parameter search trials (records of stage
``search-trial``), how many of them completed and how many the pruner stopped (the trial
record's ``search.state``), the epochs the search trained (``search_epochs``: an equal trial
count is a nominal budget when one method's trials are pruned after one epoch and another's
run to the end), final runs (stage ``final``), the epochs and optimiser steps trained
(epochs = points of the per-epoch curve, so a run stopped early by ``--max-steps`` counts the
epochs it started; the untrained baseline counts none), and wall time, training time summed over
all of those records. Records without search trials simply show 0 trials (e.g. a method run with
its paper defaults).
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from dmlbench.records import Record
from dmlbench.report.tables import Shown

COLUMNS = [
    "trials", "complete", "pruned", "search_epochs", "finals", "seeds", "epochs", "steps",
    "train_seconds", "wall_seconds",
]  # fmt: skip
SUMMED = [c for c in COLUMNS if c != "seeds"]


def tuning_budget(records: Iterable[Record]) -> pd.DataFrame:
    """One row per method: trials (complete, pruned), the search's epochs, finals, seeds,
    epochs and steps of all stages, train and wall seconds.

    Pure function of the records; pass the records of one protocol hash (budgets of different
    hashes are not comparable). Sorted by method name.
    """
    rows = [
        {
            "method": r.method,
            "trials": int(r.stage == "search-trial"),
            "complete": int(r.stage == "search-trial" and r.search.get("state") == "complete"),
            "pruned": int(r.stage == "search-trial" and r.search.get("state") == "pruned"),
            "search_epochs": len(r.curve) if r.stage == "search-trial" else 0,
            "finals": int(r.stage == "final"),
            "seed": r.seed if r.stage == "final" else None,
            "epochs": len(r.curve),
            "steps": r.timings.steps,
            "train_seconds": r.timings.train_seconds,
            "wall_seconds": r.timings.wall_seconds,
        }
        for r in records
    ]
    if not rows:
        return pd.DataFrame(columns=COLUMNS).rename_axis("method")
    df = pd.DataFrame(rows)
    g = df.groupby("method", sort=True)
    out = g[SUMMED].sum()
    out["seeds"] = g["seed"].nunique()
    return out[COLUMNS]


def format_seconds(seconds: float) -> str:
    """``45 s``, ``12.5 min`` or ``3.2 h``."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def format_budget(budget: pd.DataFrame) -> pd.DataFrame:
    """Display strings: counts as integers, times in s / min / h; each keeps its number
    (:class:`~dmlbench.report.tables.Shown`: seconds for the times), so that the page sorts
    "12.5 min" after "45 s"."""
    out = budget.copy().astype(object)
    for c in COLUMNS[:8]:  # the counts
        out[c] = [Shown(str(int(v)), v) for v in budget[c]]
    for c in ("train_seconds", "wall_seconds"):
        out[c] = [Shown(format_seconds(float(v)), v) for v in budget[c]]
    names = {"search_epochs": "search epochs", "train_seconds": "train time",
             "wall_seconds": "wall time"}  # fmt: skip
    return out.rename(columns=names)
