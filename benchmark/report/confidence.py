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
  reader sees which hyper-parameters produced the row (``defaults`` when there was no search);
- where a tuned entry was searched by several independent studies (``search.studies``): its
  number of studies and the standard deviation between studies (the search's own luck: a
  one-way moment estimate over the study means, truncated at 0) beside the seed standard
  deviation within studies. Boards of one study keep the columns they always had.

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
NESTED = ["studies", "sd between studies / seeds"]  # only where an entry has several studies


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
        between, within = study_sds(values, [r.study_index for r in runs])
        rows[method] |= {"n_studies": len({r.study_index for r in runs}),
                         f"{metric}_study_sd": between, f"{metric}_seed_sd": within}  # fmt: skip
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index.name = "method"
    if out.empty or int(out["n_studies"].max()) < 2:  # one study: the columns of before
        out = out.drop(columns=["n_studies", f"{metric}_study_sd", f"{metric}_seed_sd"])
    return out


def study_sds(values: np.ndarray, studies: list[int]) -> tuple[float, float]:
    """(between-study sd, seed sd within studies) of one method's per-seed values: the
    one-way random-effects moment estimates, σ̂²_between = (MS_between − MS_within)/n₀
    truncated at 0 (n₀ the unbalanced layout's effective seeds per study), σ̂²_within =
    MS_within; NaN where a study or a within-study spread is missing."""
    groups = np.asarray(studies)
    labels = np.unique(groups)
    n, t = len(values), len(labels)
    if t < 2 or n <= t:
        return math.nan, math.nan
    sizes = np.array([np.sum(groups == g) for g in labels], dtype=np.float64)
    means = np.array([values[groups == g].mean() for g in labels])
    grand = float(values.mean())
    ms_between = float(np.sum(sizes * (means - grand) ** 2)) / (t - 1)
    ms_within = float(
        sum(np.sum((values[groups == g] - m) ** 2) for g, m in zip(labels, means, strict=True))
    ) / (n - t)
    n0 = (n - float(np.sum(sizes**2)) / n) / (t - 1)
    return math.sqrt(max(ms_between - ms_within, 0.0) / n0), math.sqrt(ms_within)


def confidence_table(records: Iterable[Record]) -> pd.DataFrame:
    """Display strings (values in %), indexed by method; finals of one protocol hash."""
    frame = confidence_frame(records)
    if frame.empty:
        return pd.DataFrame(columns=COLUMNS)
    rows = {}
    nested = "n_studies" in frame.columns
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
        if nested:
            between, within = (100 * float(row[f"{metric}_{k}"]) for k in ("study_sd", "seed_sd"))
            rows[method] |= {
                "studies": Shown(str(int(row["n_studies"])), row["n_studies"]),
                "sd between studies / seeds": "n/a"
                if math.isnan(between)
                else Shown(f"{between:.1f} / {within:.1f}", between / 100),
            }
    columns = [*COLUMNS[:3], *NESTED, *COLUMNS[3:]] if nested else COLUMNS
    out = pd.DataFrame.from_dict(rows, orient="index", columns=columns)
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


def _per_study(runs: list[Record]) -> list[Record]:
    """One run of each search study, in study order."""
    first: dict[int, Record] = {}
    for r in runs:
        first.setdefault(r.study_index, r)
    return [first[i] for i in sorted(first)]


def _hparams(runs: list[Record]) -> str:
    if not runs or is_baseline(runs[0].method):
        return ""
    shown = [
        ", ".join(
            f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in r.hparams.items()
        )
        for r in _per_study(runs)
    ]
    if len(shown) == 1:
        return shown[0]
    return "; ".join(f"study {i}: {h}" for i, h in enumerate(shown))


def _selected(runs: list[Record]) -> str:
    if not runs or is_baseline(runs[0].method):
        return ""
    s = runs[0].search
    if not s:
        return "overridden hyper-parameters" if runs[0].overrides.get("hparams") else "defaults"
    per = _per_study(runs)
    if len(per) > 1:  # several studies: each its own selection
        picks = ", ".join(
            f"{r.search['trial']} ({100 * r.search['value']:.1f}, {r.search['epochs']} ep.)"
            for r in per
        )
        head = f"{len(per)} studies of {s['trials']} trials"
        return f"{head}; trial (val {s['metric']}, epochs): {picks}"
    return (
        f"trial {s['trial']} of {s['trials']} (val {s['metric']} {100 * s['value']:.1f}, "
        f"{s['epochs']} epochs)"
    )
