"""How sure is each number: spread over seeds, and over test queries.

One row per method of one protocol hash, for the headline metric (Recall@1, or nDCG for
continuous labels):

- ``mean ± std`` over the seeds and the 95% Student-t interval of the mean
  (:func:`dmlbench.metrics.stats.t_interval`; "n/a" with a single seed);
- the bootstrap 95% interval over test queries of Recall@1 (computed per run at evaluation
  time, see :mod:`dmlbench.metrics.stats`), averaged over the seeds' runs;
- what the search selected: the trial, its validation score and the epochs trained, so a
  reader sees which hyper-parameters produced the row (``defaults`` when there was no search).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import pandas as pd

from dmlbench.metrics.stats import t_interval
from dmlbench.records import Record

COLUMNS = [
    "seeds",
    "metric",
    "mean ± std",
    "95% CI (seeds)",
    "95% CI (queries)",
    "selected",
    "hyper-parameters",
]


def headline_metric(records: list[Record]) -> str | None:
    keys = {k for r in records for k in r.metrics}
    for prefix in ("recall@1", "ndcg@"):
        found = sorted(k for k in keys if k.startswith(prefix) and not k.startswith("ci_"))
        if found:
            return found[0] if prefix == "recall@1" else max(found, key=lambda k: int(k[5:]))
    return None


def confidence_table(records: Iterable[Record]) -> pd.DataFrame:
    """Display strings (values in %), indexed by method; finals of one protocol hash."""
    finals = [r for r in records if r.stage == "final"]
    metric = headline_metric(finals)
    rows = {}
    if metric is None:
        return pd.DataFrame(columns=COLUMNS)
    for method in sorted({r.method for r in finals}, key=lambda m: (m == "untrained", m)):
        runs = [r for r in finals if r.method == method and metric in r.metrics]
        values = np.array([r.metrics[metric] for r in runs]) * 100
        mean, half = t_interval(values)
        std = float(values.std(ddof=1)) if values.size > 1 else math.nan
        lo = [r.metrics.get("ci_recall@1_lo", math.nan) for r in runs]
        hi = [r.metrics.get("ci_recall@1_hi", math.nan) for r in runs]
        boot = (
            f"[{100 * np.nanmean(lo):.1f}, {100 * np.nanmean(hi):.1f}]"
            if metric == "recall@1" and not np.all(np.isnan(lo))
            else "n/a"
        )
        rows[method] = {
            "seeds": str(len(runs)),
            "metric": metric,
            "mean ± std": f"{mean:.1f} ± {std:.1f}" if len(runs) > 1 else f"{mean:.1f}",
            "95% CI (seeds)": "n/a"
            if math.isnan(half)
            else f"[{mean - half:.1f}, {mean + half:.1f}]",
            "95% CI (queries)": boot,
            "selected": _selected(runs),
            "hyper-parameters": _hparams(runs),
        }
    out = pd.DataFrame.from_dict(rows, orient="index", columns=COLUMNS)
    out.index.name = "method"
    return out


def _interval(mean: float, half: float) -> str:
    return "n/a" if math.isnan(half) else f"[{mean - half:.1f}, {mean + half:.1f}]"


def _hparams(runs: list[Record]) -> str:
    if not runs or runs[0].method == "untrained":
        return "—"
    items = runs[0].hparams.items()
    return ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in items)


def _selected(runs: list[Record]) -> str:
    if not runs or runs[0].method == "untrained":
        return "—"
    s = runs[0].search
    if not s:
        return "overridden hyper-parameters" if runs[0].overrides.get("hparams") else "defaults"
    return (
        f"trial {s['trial']} of {s['trials']} (val {s['metric']} {100 * s['value']:.1f}, "
        f"{s['epochs']} epochs)"
    )
