"""What a validation evaluation computes: only the metric that selects.

A search scores every trial's validation folds after every epoch, and only one number of each
evaluation is used: the selection metric (``search.validation.objective_metric``: Recall@(first
K) for class labels, nDCG@(largest K) for continuous ones). Every other metric the protocol
lists would be paid for at each of those evaluations and thrown away, NMI's k-means above all
(at CUB scale nearly as long as the k-NN search). So a validation asks the engine for the reduced
:class:`~dmlbench.protocol.MetricsSpec` of :func:`validation_spec`.

The selection metric keeps its value bit for bit: the engine gives every metric the same value
whatever else it computes alongside (a K-NN list's first K items do not depend on how long the
list is, ties included; ``tests/metrics/test_selection.py`` checks it on random inputs with
ties), so the committed searches' selections stand.
"""

from __future__ import annotations

import re

from dmlbench.errors import DmlbenchError
from dmlbench.metrics.catalogue import FAMILIES, family
from dmlbench.protocol import MetricsSpec

_K = re.compile(r"[1-9][0-9]*")


def validation_spec(spec: MetricsSpec, metric: str) -> MetricsSpec:
    """The protocol's ``metrics`` reduced to what scoring ``metric`` needs.

    Args:
        spec: the protocol's ``metrics`` section (its ``normalize`` is kept: it changes every
            distance).
        metric: the selection metric, as the engines name it: ``recall@K``, ``map@r``,
            ``r_precision``, ``nmi`` (class labels), ``ndcg@K``, ``mld@K`` (continuous labels).

    Returns:
        A spec that computes ``metric`` and nothing else: NMI only when selecting on it.

    Raises:
        DmlbenchError: ``metric`` is no metric the engines compute.
    """
    chosen = family(metric)
    if chosen is None or (chosen.per_k and not _K.fullmatch(metric[len(chosen.key) :])):
        names = [f"{f.key}K" if f.per_k else f.key for f in FAMILIES]
        raise DmlbenchError(
            f"selection metric {metric!r}: expected {', '.join(names[:-1])} or {names[-1]}"
        )
    k = int(metric[len(chosen.key) :]) if chosen.per_k else 0
    fields: dict[str, bool | list[int]] = {
        f.spec_field: ([k] if f is chosen else []) if f.per_k else f is chosen for f in FAMILIES
    }
    return MetricsSpec(normalize=spec.normalize, **fields)
