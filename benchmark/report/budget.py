"""The tuning budget each method actually spent, read from its records.

Equal budgets are half of a fair comparison, so every report shows what each method consumed
under one protocol hash: how many hyper-parameter search trials (records of stage
``search-trial``) and final runs (stage ``final``), the epochs and optimiser steps trained
(epochs = points of the per-epoch curve, so a run stopped early by ``--max-steps`` counts the
epochs it started; the untrained baseline counts none), and wall time, training time summed over
all of those records. Records without search trials simply show 0 trials (e.g. a method run with
its paper defaults).
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from dmlbench.records import Record

COLUMNS = ["trials", "finals", "seeds", "epochs", "steps", "train_seconds", "wall_seconds"]


def tuning_budget(records: Iterable[Record]) -> pd.DataFrame:
    """One row per method: trials, finals, seeds, epochs, steps, train and wall seconds.

    Pure function of the records; pass the records of one protocol hash (budgets of different
    hashes are not comparable). Sorted by method name.
    """
    rows = [
        {
            "method": r.method,
            "trials": int(r.stage == "search-trial"),
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
    out = g[["trials", "finals", "epochs", "steps", "train_seconds", "wall_seconds"]].sum()
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
    """Display strings: counts as integers, times in s / min / h."""
    out = budget.copy().astype(object)
    for c in ("trials", "finals", "seeds", "epochs", "steps"):
        out[c] = [str(int(v)) for v in budget[c]]
    for c in ("train_seconds", "wall_seconds"):
        out[c] = [format_seconds(float(v)) for v in budget[c]]
    return out.rename(columns={"train_seconds": "train time", "wall_seconds": "wall time"})
