"""Validation without the test classes: folds carved out of the training classes.

``search.validation`` carves class-disjoint folds out of the training classes (k-fold by class,
Musgrave et al., ECCV 2020; ``folds: 1`` holds out one ``fraction`` of the classes).
Continuous-label splits hold out groups (``extras["groups"]``, e.g. the base pose) and
otherwise single items. The objective is Recall@(first K) for class labels (the papers'
headline number) and nDCG@(largest K) for continuous labels (the smoothest of the protocol's).
"""

from __future__ import annotations

import numpy as np

from dmlbench.data.base import Split
from dmlbench.metrics.catalogue import MAP_AT_R, NDCG, RECALL
from dmlbench.protocol import Protocol
from dmlbench.search.storage import SearchError


def objective_metric(protocol: Protocol, label_kind: str) -> str:
    m = protocol.metrics
    if label_kind == "continuous":
        return NDCG.at(max(m.ndcg_at or [10]))
    return RECALL.at(m.recall_at[0]) if m.recall_at else MAP_AT_R.name


def validation_folds(
    split: Split, folds: int, fraction: float, seed: int
) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(train_indices, validation_indices)`` per fold, disjoint in classes (or groups)."""
    groups = split.groups()
    units = np.unique(groups)
    if units.size < 2 * max(folds, 2 if folds == 1 else folds):
        raise SearchError(
            f"cannot carve validation from {units.size} training classes/groups "
            f"(folds={folds}); the protocol's training split is too small to search on"
        )
    order = np.random.default_rng(seed).permutation(units)
    if folds == 1:
        n_val = min(max(1, round(fraction * units.size)), units.size - 1)
        held = [order[:n_val]]
    else:
        held = np.array_split(order, folds)
    out = []
    for val_units in held:
        val = np.isin(groups, val_units)
        out.append((np.flatnonzero(~val), np.flatnonzero(val)))
    return out
