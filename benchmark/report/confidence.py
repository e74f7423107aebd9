"""How sure is each number: spread over seeds, and over test queries.

One row per method of one protocol hash, for the headline metric (Recall@1, or nDCG@10 for
continuous labels; :func:`dmlbench.report.ranking.primary_metric`, the metric every table of the
report bolds, ranks and tests on):

- the mean over seeds, its std and the 95% Student-t interval of the mean
  (:func:`dmlbench.metrics.stats.t_interval`); one seed has neither a std nor an interval;
- the bootstrap 95% interval over test queries of Recall@1: where every record of the board
  carries its queries' hits, the interval of the seed-mean hit rate resampling query classes
  (:mod:`dmlbench.report.query_tests` says why classes); for older records, the per-run
  interval over single queries computed at evaluation (:mod:`dmlbench.metrics.stats`),
  averaged over the seeds' runs;
- what the search selected: the trial, its validation score and the epochs trained, so a
  reader sees which hyper-parameters produced the row (``defaults`` when there was no search).

:func:`confidence_frame` holds the numbers (for the CSV, in the records' units);
:func:`confidence_table` turns them into display strings in % (for Markdown and HTML).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import pandas as pd

from dmlbench.metrics.catalogue import HITS_METRIC, ci_keys, interval_of
from dmlbench.metrics.stats import t_interval
from dmlbench.records import Record, is_baseline
from dmlbench.report.query_tests import hit_rates
from dmlbench.report.ranking import primary_metric
from dmlbench.report.tables import HIDDEN, Shown, row_labels

COLUMNS = [
    "seeds",
    "metric",
    "mean ± std",
    "95% CI (seeds)",
    "95% CI (queries)",
    "selected",
    "hyper-parameters",
]
STATS = ("mean", "std", "lo", "hi", "query_lo", "query_hi")


def headline_metric(records: list[Record]) -> str | None:
    """The board's headline metric: recall@1, else ndcg@10, else the first metric present."""
    keys = {k for r in records for k in r.metrics if k not in HIDDEN and interval_of(k) is None}
    return primary_metric(sorted(keys))


def confidence_frame(records: Iterable[Record]) -> pd.DataFrame:
    """Numbers per method: ``metric``, ``n_seeds`` and ``<metric>_mean/_std/_lo/_hi/_query_lo/
    _query_hi`` (NaN where a value does not exist), ``selected`` and ``hyper-parameters`` (empty
    for the untrained row)."""
    finals = [r for r in records if r.stage == "final"]
    metric = headline_metric(finals)
    if metric is None:
        return pd.DataFrame(columns=["metric", "n_seeds", "selected", "hyper-parameters"])
    rows = {}
    rates = hit_rates(finals) if metric == HITS_METRIC else None
    labels = row_labels(finals)
    for method in sorted(set(labels), key=lambda m: (is_baseline(m), m)):
        runs = [r for r, lb in zip(finals, labels, strict=True) if lb == method]
        runs = [r for r in runs if metric in r.metrics]
        values = np.array([r.metrics[metric] for r in runs], dtype=np.float64)
        mean, half = t_interval(values)
        std = float(values.std(ddof=1)) if values.size > 1 else math.nan
        stats = (mean, std, mean - half, mean + half) + (
            rates.interval(method) if rates is not None else _run_intervals(runs, metric)
        )
        rows[method] = {
            "metric": metric,
            "n_seeds": len(runs),
            **{f"{metric}_{k}": v for k, v in zip(STATS, stats, strict=True)},
            "selected": _selected(runs),
            "hyper-parameters": _hparams(runs),
        }
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index.name = "method"
    return out


def confidence_table(records: Iterable[Record]) -> pd.DataFrame:
    """Display strings (values in %), indexed by method; finals of one protocol hash."""
    frame = confidence_frame(records)
    if frame.empty:
        return pd.DataFrame(columns=COLUMNS)
    rows = {}
    for method, row in frame.iterrows():
        metric = str(row["metric"])
        mean, std, lo, hi, qlo, qhi = (100 * float(row[f"{metric}_{k}"]) for k in STATS)
        shown = f"{mean:.1f}" if math.isnan(std) else f"{mean:.1f} ± {std:.1f}"
        rows[method] = {
            "seeds": Shown(str(int(row["n_seeds"])), row["n_seeds"]),
            "metric": metric,
            "mean ± std": Shown(shown, mean / 100),
            "95% CI (seeds)": _interval(lo, hi),
            "95% CI (queries)": _interval(qlo, qhi),
            "selected": row["selected"] or "—",
            "hyper-parameters": row["hyper-parameters"] or "—",
        }
    out = pd.DataFrame.from_dict(rows, orient="index", columns=COLUMNS)
    out.index.name = "method"
    return out


def _run_intervals(runs: list[Record], metric: str) -> tuple[float, float]:
    """Older records: the mean over runs of each run's bootstrap over single queries."""
    lo_key, hi_key = ci_keys(HITS_METRIC)
    lo = [r.metrics.get(lo_key, math.nan) for r in runs]
    hi = [r.metrics.get(hi_key, math.nan) for r in runs]
    if metric != HITS_METRIC or np.all(np.isnan(lo)):
        return math.nan, math.nan
    return float(np.nanmean(lo)), float(np.nanmean(hi))


def _interval(lo: float, hi: float) -> str:
    """The interval in %, keeping its lower bound (a fraction) as the number it sorts by."""
    if math.isnan(lo) or math.isnan(hi):
        return "n/a"
    return Shown(f"[{lo:.1f}, {hi:.1f}]", lo / 100)


def _hparams(runs: list[Record]) -> str:
    if not runs or is_baseline(runs[0].method):
        return ""
    items = runs[0].hparams.items()
    return ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in items)


def _selected(runs: list[Record]) -> str:
    if not runs or is_baseline(runs[0].method):
        return ""
    s = runs[0].search
    if not s:
        return "overridden hyper-parameters" if runs[0].overrides.get("hparams") else "defaults"
    return (
        f"trial {s['trial']} of {s['trials']} (val {s['metric']} {100 * s['value']:.1f}, "
        f"{s['epochs']} epochs)"
    )
