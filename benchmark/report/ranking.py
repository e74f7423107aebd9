"""Who wins overall: the average rank of each method across the protocol hashes present.

Within one protocol hash the methods are ranked on that protocol's primary metric (mean over
seeds of the ``final`` records): ``recall@1`` when the protocol computes it, otherwise
``ndcg@10`` (continuous labels), otherwise the first metric in the tables' order. Rank 1 is the
best; tied methods share the average of the ranks they span (``pandas.Series.rank(method=
"average")``). Across hashes, ``average_rank`` is the mean of a method's ranks over the hashes
where it was run (so it is only comparable between methods run on the same protocols:
``protocols`` says on how many), and ``borda`` the Borda count: in each hash a method scores
the number of methods ranked there minus its rank, summed over hashes. The untrained baseline is
left out; it would only push every trained method's rank down by one. Ranking never mixes
numbers of different hashes: each hash ranks its own methods, only ranks are combined.

Nor does it mix tracks (:func:`ranks_by_kind`): class-label methods (Recall@K on CUB, glyphs)
and continuous-label methods (nDCG on poses) solve different problems, and an average rank
over both would put a pose method's rank 1 among three beside a class method's rank 1 among
fifteen. Each label kind gets its own ranking; a method is ranked only against its own kind.

Nor does it count one data set twice (:func:`one_board_per_data_set`): a protocol's tuned board
and its ``@defaults`` board (or any two protocols on the same data, equal data fingerprints)
score the same methods on the same test classes, so averaging their ranks would weigh that
data set double and read a second look at one data set as a second data set. One board per
data set is ranked (the one with the fewest derivations in its name: the shipped, tuned
protocol before its ``@defaults``); the others are named under the ranking.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

import pandas as pd

from dmlbench.records import UNTRAINED, Record
from dmlbench.report.tables import metric_columns

LOWER_IS_BETTER = ("mld@",)
TRACKS = {"class": "class labels", "continuous": "continuous labels"}


def primary_metric(columns: list[str]) -> str | None:
    """``recall@1``, else ``ndcg@10``, else the first metric column; None without metrics."""
    for preferred in ("recall@1", "ndcg@10"):
        if preferred in columns:
            return preferred
    ordered = metric_columns(pd.DataFrame(columns=columns))
    return ordered[0] if ordered else None


def protocol_label(name: str, protocol_hash: str) -> str:
    return f"{name} {protocol_hash[:8]}"


def average_ranks(df: pd.DataFrame) -> pd.DataFrame:
    """Rank table from :func:`dmlbench.report.tables.records_frame` of any number of hashes.

    Returns a frame indexed by method with columns ``average_rank``, ``borda``, ``protocols``
    and one rank column per protocol hash (``"<name> <hash8>"``, NaN where the method was not
    run), sorted best first. ``frame.attrs["metrics"]`` maps each rank column to its metric.
    """
    final = df[(df["stage"] == "final") & (df["method"] != UNTRAINED)] if len(df) else df
    ranks: dict[str, pd.Series] = {}
    borda: dict[str, pd.Series] = {}
    metrics: dict[str, str] = {}
    for h, part in final.groupby("protocol_hash", sort=True):
        present = [c for c in part.columns if part[c].notna().any()]
        metric = primary_metric(present)
        if metric is None:
            continue
        means = part.groupby("method")[metric].mean().dropna()
        if means.empty:
            continue
        label = protocol_label(str(part["protocol"].iloc[0]), str(h))
        ascending = metric.startswith(LOWER_IS_BETTER)
        r = means.rank(ascending=ascending, method="average")
        ranks[label], borda[label], metrics[label] = r, len(r) - r, metric
    columns = ["average_rank", "borda", "protocols", *ranks]
    if not ranks:
        out = pd.DataFrame(columns=columns)
        out.attrs["metrics"] = metrics
        return out
    wide = pd.DataFrame(ranks)
    out = pd.DataFrame(
        {
            "average_rank": wide.mean(axis=1),
            "borda": pd.DataFrame(borda).sum(axis=1),
            "protocols": wide.notna().sum(axis=1).astype(int),
        }
    ).join(wide)
    out.index.name = "method"
    out = out.assign(_name=out.index).sort_values(
        ["average_rank", "protocols", "_name"], ascending=[True, False, True]
    )
    out = out.drop(columns="_name")
    out.attrs["metrics"] = metrics
    return out


def one_board_per_data_set(records: Iterable[Record]) -> tuple[list[Record], list[str]]:
    """The records of one board per data set (equal data fingerprints), and one line per board
    left out naming the board of its data set that is ranked instead."""
    records = list(records)
    boards: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for r in records:
        boards[r.data_fingerprint].add((r.protocol.name, r.protocol.hash))
    kept: set[str] = set()
    lines = []
    for fingerprint in sorted(boards):
        ranked, *others = sorted(boards[fingerprint], key=lambda b: (b[0].count("@"), b))
        kept.add(ranked[1])
        lines += [
            f"Not ranked: {name} ({h[:8]}), the same data as {ranked[0]} ({ranked[1][:8]}), "
            "which is ranked; one data set counts once."
            for name, h in others
        ]
    return [r for r in records if r.protocol.hash in kept], lines


def label_kind(method: str, metrics: Iterable[str]) -> str | None:
    """``class`` or ``continuous`` for a run, None for the untrained row or an unknown method.

    Read from the metrics the run computed (Recall@K only exists for class labels, nDCG@K only
    for continuous ones), else from the method registry.
    """
    if method == UNTRAINED:
        return None
    keys = list(metrics)
    for prefix, kind in (("recall@", "class"), ("ndcg@", "continuous")):
        if any(k.startswith(prefix) for k in keys):
            return kind
    from dmlbench.methods import METHODS

    return str(METHODS.get(method).label_kind) if method in METHODS else None


def ranks_by_kind(df: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """One :func:`average_ranks` table per label kind present (``class``, ``continuous``)."""
    if df.empty:
        return {}
    metrics = metric_columns(df)
    kinds = [
        label_kind(str(row["method"]), [m for m in metrics if pd.notna(row[m])])
        for _, row in df.iterrows()
    ]
    series = pd.Series(kinds, index=df.index, dtype=object)
    out = {}
    for kind in TRACKS:
        ranks = average_ranks(df[series == kind])
        if len(ranks):
            out[kind] = ranks
    return out
