"""A board's per-query values: the test-query component of its uncertainty.

Every final run on class labels records each scored query's Recall@1 hit and class
(:class:`dmlbench.records.QueryHits`), and every final run on continuous labels each query's
nDCG@K and mean label distance@K (:class:`dmlbench.records.QueryValues`); all methods of a
board are scored on the same queries, so the test classes (each query its own unit on
continuous labels, which have no classes) are a factor crossed with the seeds. This module
turns them into what the statistics need:

- :func:`query_sums` (:func:`class_sums` for the hits): per method, seed and test class, the
  sum of the per-query values (and the queries per class), the input of the crossed
  seeds × classes moment estimates of the verdicts
  (:func:`dmlbench.report.verdicts.crossed_moments`);
- :func:`hit_rates`: per method the mean over its seeds of each query's hit, whose 95% interval
  resamples query classes, not single queries (the queries of a class share their gallery
  positives, so their hits move together;
  :func:`~dmlbench.report.significance.class_bootstrap_interval`), for the confidence table.

A board whose records lack them (older records; poses-mini's committed records predate
``query_values``) or were scored on different queries gets neither: its verdicts count the
seeds only, never call a method equivalent, and say so.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from dmlbench.metrics.catalogue import HITS_METRIC
from dmlbench.records import Record
from dmlbench.report.significance import class_bootstrap_interval
from dmlbench.report.tables import row_labels

N_BOOT = 1000


@dataclass(frozen=True)
class QueryHitRates:
    """Seed-mean Recall@1 hit of every scored test query, per method, and the query classes."""

    rates: dict[str, np.ndarray]
    classes: np.ndarray
    seeds: dict[str, int]

    def interval(self, method: str) -> tuple[float, float]:
        return class_bootstrap_interval(self.rates[method], self.classes, N_BOOT)


def _hits(records: Iterable[Record]) -> tuple[dict[tuple[str, int], np.ndarray], np.ndarray] | None:
    """(row label, seed) → hits, and the query classes; None unless every final record carries
    hits and all of them were scored on the same queries."""
    finals = [r for r in records if r.stage == "final"]
    if not finals or any(r.query_hits is None for r in finals):
        return None
    out: dict[tuple[str, int], np.ndarray] = {}
    classes: np.ndarray | None = None
    for r, label in zip(finals, row_labels(finals), strict=True):
        assert r.query_hits is not None  # checked above
        hits, cls = r.query_hits.decode()
        if classes is None:
            classes = cls
        elif cls.shape != classes.shape or not np.array_equal(cls, classes):
            return None
        out[(label, r.seed)] = hits
    assert classes is not None
    return out, classes


def hit_rates(records: Iterable[Record]) -> QueryHitRates | None:
    """Per method, the mean over its seeds of each query's hit; None unless every final
    record carries hits and all of them were scored on the same queries."""
    found = _hits(records)
    if found is None:
        return None
    hits, classes = found
    by_method: dict[str, list[np.ndarray]] = {}
    for (method, _), h in hits.items():
        by_method.setdefault(method, []).append(h)
    rates = {m: np.mean(np.stack(h), axis=0) for m, h in by_method.items()}
    return QueryHitRates(rates, classes, {m: len(h) for m, h in by_method.items()})


def class_sums(
    records: Iterable[Record], methods: Sequence[str], seeds: Sequence[int]
) -> tuple[np.ndarray, np.ndarray] | None:
    """``(sums, counts)``: the hits summed per (method, seed, test class), shape (k, S, C), and
    the queries per class, shape (C,); None unless every final record carries hits on the same
    queries and every (method, seed) asked for has a record."""
    found = _hits(records)
    if found is None:
        return None
    hits, classes = found
    if any((m, s) not in hits for m in methods for s in seeds):
        return None
    _, codes = np.unique(classes, return_inverse=True)
    counts = np.bincount(codes).astype(np.float64)
    sums = np.array(
        [[np.bincount(codes, weights=hits[(m, s)], minlength=counts.size) for s in seeds]
         for m in methods]
    )  # fmt: skip
    return sums, counts


def _values(
    records: Iterable[Record], metric: str
) -> tuple[dict[tuple[str, int], np.ndarray], np.ndarray] | None:
    """(row label, seed) → each query's value of ``metric``, and a unit per query (its
    index: continuous labels have no classes); None unless every final record keeps them for
    the same number of queries."""
    finals = [r for r in records if r.stage == "final"]
    if not finals or any(
        r.query_values is None or metric not in r.query_values.values for r in finals
    ):
        return None
    out: dict[tuple[str, int], np.ndarray] = {}
    for r, label in zip(finals, row_labels(finals), strict=True):
        assert r.query_values is not None  # checked above
        out[(label, r.seed)] = r.query_values.decode(metric)
    if len({len(v) for v in out.values()}) != 1:
        return None
    return out, np.arange(len(next(iter(out.values()))))


def query_sums(
    records: Iterable[Record], metric: str, methods: Sequence[str], seeds: Sequence[int]
) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`class_sums` for ``metric``: Recall@1 hits per test class, or on continuous
    labels each query's value (one query per unit); None where the records do not all carry
    them on the same queries, or a (method, seed) asked for has no record."""
    records = list(records)
    if metric == HITS_METRIC:
        return class_sums(records, methods, seeds)
    found = _values(records, metric)
    if found is None:
        return None
    values, units = found
    if any((m, s) not in values for m in methods for s in seeds):
        return None
    sums = np.array([[values[(m, s)] for s in seeds] for m in methods])
    return sums, np.ones(len(units))


def seed_studies(records: Iterable[Record], seeds: Sequence[int]) -> np.ndarray | None:
    """Each seed's search study (its final records' ``study_index``; absent: study 0), the
    nesting the verdicts' moment estimates take (:func:`~dmlbench.report.moments.
    crossed_moments`); None where the board has one study, or where the methods' finals of
    one seed name different studies (then no nesting is assumed, and the study luck goes
    uncounted as before, rather than counted wrongly)."""
    found: dict[int, set[int]] = {s: set() for s in seeds}
    for r in records:
        if r.stage == "final" and r.seed in found and r.search:
            found[r.seed].add(r.study_index)
    if any(len(v) > 1 for v in found.values()):
        return None
    labels = np.array([min(found[s], default=0) for s in seeds])
    return labels if len(set(labels.tolist())) > 1 else None
