"""What a board may claim over its *test queries*, beside what it may claim over seeds.

The seed tests of :mod:`dmlbench.report.board` ask whether another seed would reorder the
methods. This module asks whether other test queries would: every final run on class labels
records each scored query's Recall@1 hit and class (:class:`dmlbench.records.QueryHits`), and
all methods of a board are scored on the same queries, so two methods can be compared query by
query. Per method the hits are averaged over its seeds (a query's hit *rate*), then

- its 95% interval resamples query classes, not single queries (the queries of a class share
  their gallery positives, so their hits move together;
  :func:`~dmlbench.report.significance.class_bootstrap_interval`);
- each method is compared with the best one by a paired bootstrap over the same resampled
  classes (:func:`~dmlbench.report.significance.paired_bootstrap`), Holm-corrected over the
  comparisons: the methods not significantly worse than the best are listed under the table;
- the top-3 order is checked on every resample
  (:func:`~dmlbench.report.significance.bootstrap_rank_stability`).

A board whose records lack hits (older records, continuous labels) or were scored on different
queries gets none of these lines: nothing is claimed that was not computed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from dmlbench.records import Record
from dmlbench.report.significance import (
    bootstrap_rank_stability,
    class_bootstrap_interval,
    holm,
    paired_bootstrap,
    stability_summary,
)
from dmlbench.report.tables import row_labels

UNTRAINED = "untrained"
N_BOOT = 1000
ALPHA = 0.05


@dataclass(frozen=True)
class QueryHitRates:
    """Seed-mean Recall@1 hit of every scored test query, per method, and the query classes."""

    rates: dict[str, np.ndarray]
    classes: np.ndarray
    seeds: dict[str, int]

    def interval(self, method: str) -> tuple[float, float]:
        return class_bootstrap_interval(self.rates[method], self.classes, N_BOOT)


@dataclass(frozen=True)
class QueryTests:
    """The comparisons over test queries of one board (see the module docstring)."""

    best: str
    not_worse: list[str]  # best first, in the order of their means
    stability: str

    @property
    def notes(self) -> list[str]:
        return [
            f"Not significantly worse than the best over test queries (recall@1; paired "
            f"bootstrap of the seed-mean hits resampling query classes, {N_BOOT} resamples, "
            f"Holm-corrected, α = {ALPHA:g}): {', '.join(self.not_worse)}.",
            f"Stability over test queries (recall@1): {self.stability}.",
        ]


def hit_rates(records: Iterable[Record]) -> QueryHitRates | None:
    """Per method, the mean over its seeds of each query's hit; None unless every final
    record carries hits and all of them were scored on the same queries."""
    finals = [r for r in records if r.stage == "final"]
    if not finals or any(r.query_hits is None for r in finals):
        return None
    by_method: dict[str, list[np.ndarray]] = {}
    classes: np.ndarray | None = None
    for r, label in zip(finals, row_labels(finals), strict=True):
        assert r.query_hits is not None  # checked above
        hits, cls = r.query_hits.decode()
        if classes is None:
            classes = cls
        elif cls.shape != classes.shape or not np.array_equal(cls, classes):
            return None
        by_method.setdefault(label, []).append(hits)
    assert classes is not None
    rates = {m: np.mean(np.stack(h), axis=0) for m, h in by_method.items()}
    return QueryHitRates(rates, classes, {m: len(h) for m, h in by_method.items()})


def query_tests(rates: QueryHitRates) -> QueryTests | None:
    """Paired comparisons with the best trained method and the stability of the top 3 over
    class resamples; None with fewer than two trained methods."""
    trained = {m: v for m, v in rates.rates.items() if m != UNTRAINED}
    if len(trained) < 2:
        return None
    order = sorted(trained, key=lambda m: (-float(trained[m].mean()), m))
    best, others = order[0], order[1:]
    tests = [paired_bootstrap(trained[best], trained[m], rates.classes, N_BOOT) for m in others]
    p_holm = holm([t.p for t in tests])
    worse = {m for m, t, p in zip(others, tests, p_holm, strict=True) if p < ALPHA and t.diff > 0}
    stability = bootstrap_rank_stability(trained, rates.classes, N_BOOT)
    return QueryTests(best, [m for m in order if m not in worse], stability_summary(stability))
