"""What a board is ranked on, which track it is in, and which board speaks for its data set.

Every table, verdict and comparison of a board reads one metric (:func:`primary_metric`):
``recall@1`` when the protocol computes it, otherwise ``ndcg@10`` (continuous labels),
otherwise the first metric in the tables' order; the direction of each metric is its
description's (:mod:`dmlbench.metrics.catalogue`: lower is better only for a label distance).

Class-label methods (Recall@K on CUB, glyphs) and continuous-label methods (nDCG on poses)
solve different problems (:func:`label_kind`, one of :data:`TRACKS`), so a method is compared
across data sets only with methods of its own kind (:mod:`dmlbench.report.crossdata`).

A data set counts once (:func:`one_board_per_data_set`): two boards on the same data (equal
data fingerprints: ``X`` and ``X@trials=N``) score the same methods on the same test classes,
so comparing both with a third would weigh that data set double and read a second look at one
data set as a second data set. The board with the fewest derivations in its name speaks for
its data set; the others are named.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

import pandas as pd

from dmlbench.metrics.catalogue import HEADLINE, label_kind_of
from dmlbench.records import Record, is_baseline
from dmlbench.report.tables import metric_columns

TRACKS = {"class": "class labels", "continuous": "continuous labels"}


def primary_metric(columns: list[str]) -> str | None:
    """``recall@1``, else ``ndcg@10``, else the first metric column; None without metrics."""
    for preferred in HEADLINE:
        if preferred in columns:
            return preferred
    ordered = metric_columns(pd.DataFrame(columns=columns))
    return ordered[0] if ordered else None


def one_board_per_data_set(records: Iterable[Record]) -> tuple[list[Record], list[str]]:
    """The records of one board per data set (equal data fingerprints), and one line per board
    left out naming the board of its data set that is compared instead."""
    records = list(records)
    boards: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for r in records:
        boards[r.data_fingerprint].add((r.protocol.name, r.protocol.hash))
    kept: set[str] = set()
    lines = []
    for fingerprint in sorted(boards):
        chosen, *others = sorted(boards[fingerprint], key=lambda b: (b[0].count("@"), b))
        kept.add(chosen[1])
        lines += [
            f"Not compared: {name} ({h[:8]}), the same data as {chosen[0]} ({chosen[1][:8]}), "
            "which is compared; one data set counts once."
            for name, h in others
        ]
    return [r for r in records if r.protocol.hash in kept], lines


def label_kind(method: str, metrics: Iterable[str]) -> str | None:
    """``class`` or ``continuous`` for a run, None for a row that needs no learning or an
    unknown method.

    Read from the metrics the run computed (Recall@K only exists for class labels, nDCG@K only
    for continuous ones), else from the method registry.
    """
    if is_baseline(method):
        return None
    kind = label_kind_of(list(metrics))
    if kind is not None:
        return kind
    from dmlbench.methods import METHODS

    return str(METHODS.get(method).label_kind) if method in METHODS else None
