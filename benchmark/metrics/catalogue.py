"""What each metric is: its name, label, unit and scale, direction, display format, hashing.

One description per metric family, read by everything that names, orders, scales, labels or
ranks a metric — the protocol (which families its ``metrics`` section turns on, and which the
hash covers), the metric functions (the keys they write), the search's objective, the tables,
plots, LaTeX, the published-number comparison, the verdicts and the leaderboard's tolerances —
so that a new metric is one entry here, its function and its ``MetricsSpec`` field.

Why this module sits in the foundations layer although it lives in ``metrics/``: the protocol
(the layer above the foundations) must know which metric families exist and which of them its
hash covers, and the metrics layer is above the protocol. So this module imports nothing from
dmlbench, and ``dmlbench/metrics/__init__.py`` imports nothing either (importing this module
runs it); ``tests/test_layers.py`` holds both. A ninth top-level module was the other choice;
the package keeps eight.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

LabelKind = Literal["class", "continuous"]


@dataclass(frozen=True)
class MetricFamily:
    """One metric, or one metric per K (``recall@K``).

    Attributes:
        key: the record key, or its prefix for a family per K (``"recall@"``).
        per_k: the key is ``key`` followed by K (``recall@4``).
        spec_field: the :class:`~dmlbench.protocol.MetricsSpec` field that turns it on (a
            list of K for a family per K, a bool otherwise).
        label: its name in prose and plot labels (``Recall@K`` with K filled in).
        short: its LaTeX column header (``R@`` + K, ``MAP@R``).
        percent: a fraction in the records, shown ×100 in %; else shown as recorded, in
            ``unit`` (label distances).
        unit: the unit shown (``%``, or ``label distance``).
        digits: decimals in tables (of the shown value).
        higher_is_better: the direction every ranking, bold cell and verdict uses.
        label_kind: the labels it needs; a run's keys say which kind of board it is on.
        hashed: whether the protocol hash always covers its spec field. The first six
            families are; a family added later, with a default that computes nothing, is not
            (``hashed=False``) and sets ``hash_omit_default``: the field enters the hash only
            when a protocol turns the metric on, so old protocols keep their hashes.
        hash_omit_default: the spec field's value that the hash leaves out (``None``: none).
    """

    key: str
    per_k: bool
    spec_field: str
    label: str
    short: str
    percent: bool
    unit: str
    digits: int
    higher_is_better: bool
    label_kind: LabelKind | None
    hashed: bool = True
    hash_omit_default: object = None

    def at(self, k: int) -> str:
        """The record key of this family at ``k`` (``recall@4``)."""
        assert self.per_k, f"{self.key} has no K"
        return f"{self.key}{k}"

    @property
    def name(self) -> str:
        """The record key of a metric without K (``map@r``)."""
        assert not self.per_k, f"{self.key} needs a K: use .at(k)"
        return self.key

    @property
    def pattern(self) -> str:
        """The regular expression of its record keys."""
        return re.escape(self.key) + (r"\d+" if self.per_k else "")


RECALL = MetricFamily("recall@", True, "recall_at", "Recall@", "R@", True, "%", 1, True, "class")
MAP_AT_R = MetricFamily("map@r", False, "map_at_r", "MAP@R", "MAP@R", True, "%", 1, True, "class")
R_PRECISION = MetricFamily(
    "r_precision", False, "r_precision", "R-Precision", "R-Prec.", True, "%", 1, True, "class"
)
NMI = MetricFamily("nmi", False, "nmi", "NMI", "NMI", True, "%", 1, True, "class")
NDCG = MetricFamily("ndcg@", True, "ndcg_at", "nDCG@", "nDCG@", True, "%", 1, True, "continuous")
MLD = MetricFamily(
    "mld@", True, "label_distance_at", "MLD@", "MLD@", False, "label distance", 3, False,
    "continuous",
)  # fmt: skip
# Added after the first hashes (#49), each off by default and left out of the hash while off:
# mean reciprocal rank (1 / rank of the first same-class item, over the whole gallery) and the
# per-class means of Recall@K and MAP@R (each query's value averaged within its class first,
# then over classes: pytorch-metric-learning's ``avg_of_avgs=True``), which weigh a class of
# 5 images as much as one of 500.
MRR = MetricFamily(
    "mrr", False, "mrr", "MRR", "MRR", True, "%", 1, True, "class",
    hashed=False, hash_omit_default=False,
)  # fmt: skip
CLASS_RECALL = MetricFamily(
    "class_recall@", True, "class_recall_at", "class-mean Recall@", "cR@", True, "%", 1, True,
    "class", hashed=False, hash_omit_default=[],
)  # fmt: skip
CLASS_MAP_AT_R = MetricFamily(
    "class_map@r", False, "class_map_at_r", "class-mean MAP@R", "cMAP@R", True, "%", 1, True,
    "class", hashed=False, hash_omit_default=False,
)  # fmt: skip

# In table order: the column order of every table and CSV.
FAMILIES: tuple[MetricFamily, ...] = (
    RECALL, MAP_AT_R, R_PRECISION, NMI, MRR, CLASS_RECALL, CLASS_MAP_AT_R, NDCG, MLD
)  # fmt: skip

# The headline metric of a board, first present wins: Recall@1 for class labels (the
# papers' headline), nDCG@10 for continuous ones; else the first metric column.
HEADLINE: tuple[str, ...] = (RECALL.at(1), NDCG.at(10))
# The second metric of a paper's table (report.latex), first present wins: MAP@R for class
# labels (the metric a reality check asks for beside Recall@1), MLD@10 for continuous ones.
PAPER_SECOND: tuple[str, ...] = (MAP_AT_R.name, MLD.at(10))
# Recall@1 is also the one metric whose per-query hits records keep (the bootstraps over
# test classes resample them).
HITS_METRIC = RECALL.at(1)


def key_forms() -> str:
    """Every record key's form, for a message: ``recall@K, map@r, ..., mld@K``."""
    return ", ".join(f.key + ("K" if f.per_k else "") for f in FAMILIES)


def ci_keys(name: str) -> tuple[str, str]:
    """The record keys of the 95% bootstrap interval over test queries of ``name``
    (``ci_recall@1_lo``, ``ci_recall@1_hi``): kept beside the metric, never a metric column."""
    return f"ci_{name}_lo", f"ci_{name}_hi"


def interval_of(key: str) -> str | None:
    """The metric an interval key of :func:`ci_keys` bounds (``ci_recall@1_lo`` ->
    ``recall@1``); None for every other key. How readers leave intervals out of metric lists
    without spelling the keys' form again."""
    if key.startswith("ci_") and key.endswith(("_lo", "_hi")):
        return key[3:-3]
    return None


_KEY = re.compile("^(?:" + "|".join(f.pattern for f in FAMILIES) + ")$")
METRIC_KEY = _KEY  # a record key that is a metric (not ``queries``, not ``seeds``)


def family(name: str) -> MetricFamily | None:
    """The family of a record key (``recall@4`` -> :data:`RECALL`), None for other keys."""
    for f in FAMILIES:
        if f.per_k:
            if name.startswith(f.key) and name[len(f.key) :].isdigit():
                return f
        elif name == f.key:
            return f
    return None


def family_by_prefix(name: str) -> MetricFamily | None:
    """The family whose key ``name`` starts with, K or not (``recall@1_lo`` -> RECALL): how
    derived columns (intervals, differences) are read."""
    for f in FAMILIES:
        if name.startswith(f.key):
            return f
    return None


def _of(name: str) -> MetricFamily:
    f = family_by_prefix(name)
    if f is None:
        raise KeyError(f"not a metric: {name!r}")
    return f


def higher_is_better(name: str) -> bool:
    """The metric's direction (unknown names count as higher-is-better, as before)."""
    f = family_by_prefix(name)
    return True if f is None else f.higher_is_better


def is_percent(name: str) -> bool:
    """A fraction shown ×100 (every metric but label distances; unknown names too)."""
    f = family_by_prefix(name)
    return True if f is None else f.percent


def scale(name: str, percent: bool = True) -> float:
    """The factor from the recorded value to the shown one (100 for fractions in %)."""
    return 100.0 if percent and is_percent(name) else 1.0


def digits(name: str) -> int:
    """Decimals of the shown value in tables (1 for %, 3 for label distances)."""
    f = family_by_prefix(name)
    return 1 if f is None else f.digits


def unit(name: str) -> str:
    """``%`` or the label units (``label distance``)."""
    f = family_by_prefix(name)
    return "%" if f is None else f.unit


def short_label(name: str) -> str:
    """The LaTeX header: ``recall@4`` -> ``R@4``, ``map@r`` -> ``MAP@R``; other names as they
    are."""
    f = family(name)
    if f is None:
        return name
    return f.short + name[len(f.key) :] if f.per_k else f.short


def order_key(name: str) -> tuple[int, float]:
    """The sort key of a metric column: family in :data:`FAMILIES` order, then K."""
    for i, f in enumerate(FAMILIES):
        if name.startswith(f.key):
            tail = name[len(f.key) :]
            return i, float(tail) if tail.replace(".", "").isdigit() else 0.0
    return len(FAMILIES), 0.0


def is_metric_column(name: str) -> bool:
    """A column that holds (or derives from) a metric: it starts with a family's key."""
    return family_by_prefix(name) is not None


def label_kind_of(keys: list[str]) -> LabelKind | None:
    """``class`` where a run computed Recall@K, ``continuous`` where it computed nDCG@K (the
    two families only one label kind has, by design of the protocols), else None."""
    for f in (RECALL, NDCG):
        if any(k.startswith(f.key) for k in keys):
            return f.label_kind
    return None


def hash_omit_defaults() -> dict[str, object]:
    """``MetricsSpec`` field -> the value the protocol hash leaves out (the families added
    after the first hashes, at their default: off)."""
    return {f.spec_field: f.hash_omit_default for f in FAMILIES if not f.hashed}
