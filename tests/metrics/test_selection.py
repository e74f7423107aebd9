"""A validation computes only the selection metric, and that metric keeps its value bit for bit
(the committed searches' selections stand)."""

from __future__ import annotations

import numpy as np
import pytest

from dmlbench.data.base import ArrayImages, Split
from dmlbench.errors import DmlbenchError
from dmlbench.metrics.continuous import evaluate_continuous
from dmlbench.metrics.retrieval import embedding_metrics
from dmlbench.metrics.selection import validation_spec
from dmlbench.protocol import MetricsSpec, builtin_names, load_protocol
from dmlbench.search.validation import objective_metric
from tests.metrics.test_fast_evaluation import KINDS, case

FULL = MetricsSpec(recall_at=[1, 2, 4, 8, 16, 32], nmi=True, map_at_r=True, r_precision=True)


def test_only_the_selection_metric_is_asked_for() -> None:
    assert validation_spec(FULL, "recall@1") == MetricsSpec(
        recall_at=[1], nmi=False, map_at_r=False, r_precision=False
    )
    assert validation_spec(FULL, "map@r").model_dump() == {
        **MetricsSpec(recall_at=[], nmi=False, r_precision=False).model_dump(),
        "map_at_r": True,
    }
    assert validation_spec(FULL, "nmi") == MetricsSpec(
        recall_at=[], nmi=True, map_at_r=False, r_precision=False
    )
    ndcg = validation_spec(MetricsSpec(ndcg_at=[1, 5], label_distance_at=[5]), "ndcg@5")
    assert (ndcg.ndcg_at, ndcg.label_distance_at, ndcg.recall_at, ndcg.nmi) == ([5], [], [], False)
    assert validation_spec(MetricsSpec(normalize=False), "recall@4").normalize is False


@pytest.mark.parametrize("metric", ["recall", "recall@0", "ndcg@x", "precision@1", "NMI"])
def test_unknown_metric_is_refused(metric: str) -> None:
    with pytest.raises(DmlbenchError, match="selection metric"):
        validation_spec(FULL, metric)


@pytest.mark.parametrize("name", builtin_names())
def test_the_search_selects_on_the_same_spec_as_before(name: str) -> None:
    """The search's validation spec before this function existed (``search.validation``'s
    ``validation_metrics``, inlined here) for every shipped protocol's objective."""
    protocol = load_protocol(name)
    for kind in ("class", "continuous"):
        metric = objective_metric(protocol, kind)
        k = int(metric.split("@")[1]) if metric[-1].isdigit() else 1
        before = MetricsSpec(
            recall_at=[k] if metric.startswith("recall@") else [],
            nmi=False,
            map_at_r=metric == "map@r",
            r_precision=False,
            normalize=protocol.metrics.normalize,
            ndcg_at=[k] if metric.startswith("ndcg@") else [],
            label_distance_at=[],
        )
        assert validation_spec(protocol.metrics, metric) == before


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", [0, 1])
def test_selection_metric_alone_equals_it_in_the_full_set(kind: str, seed: int) -> None:
    x, labels = case(kind, seed)
    for spec in (FULL, MetricsSpec(recall_at=[1, 10, 100, 250], normalize=False)):
        full = embedding_metrics(x, labels, spec, seed=seed)
        names = [*(f"recall@{k}" for k in spec.recall_at), "map@r", "r_precision", "nmi"]
        for metric in names:
            alone = embedding_metrics(x, labels, validation_spec(spec, metric), seed=seed)
            assert alone[metric] == full[metric], metric
            assert set(alone) == {metric, "queries", "lone_queries"}


@pytest.mark.parametrize("seed", [0, 1])
def test_continuous_selection_metric_alone_equals_it_in_the_full_set(seed: int) -> None:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 4, size=(200, 2)).astype(np.float32)  # many equal label distances
    x = rng.integers(-2, 3, size=(200, 5)).astype(np.float32)  # and equal embedding distances
    split = Split(
        ArrayImages(np.zeros((200, 1, 2, 2), dtype=np.uint8)),
        labels,
        label_kind="continuous",
        extras={"label_distance": "euclidean"},
    )
    spec = MetricsSpec(recall_at=[], nmi=False, ndcg_at=[1, 5, 20], label_distance_at=[1, 20])
    full = evaluate_continuous(x, split, spec)
    for metric in ("ndcg@1", "ndcg@5", "ndcg@20", "mld@1", "mld@20"):
        assert evaluate_continuous(x, split, validation_spec(spec, metric))[metric] == full[metric]
