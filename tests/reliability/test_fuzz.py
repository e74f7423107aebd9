"""Property-based fuzzing of the protocol loader and the metric engine (hypothesis).

- Arbitrary mappings and arbitrary YAML text never crash the loader with anything but our
  ProtocolError (one line, naming the source).
- Metrics on arbitrary embeddings and labels stay in [0, 1], and do not depend on the order of
  the gallery.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dmlbench.errors import ProtocolError
from dmlbench.metrics.retrieval import embedding_metrics
from dmlbench.protocol import MetricsSpec, load_protocol, validate_protocol

FUZZ = settings(
    max_examples=500,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
VALID = yaml.safe_load((Path(__file__).parents[2] / "protocols" / "glyphs-mini.yaml").read_text())

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.floats(allow_nan=True)
    | st.text(max_size=12)
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def mutate(raw: dict[str, Any], path: list[str], value: Any) -> dict[str, Any]:
    node = raw
    for key in path[:-1]:
        if not isinstance(node.get(key), dict):
            node[key] = {}
        node = node[key]
    node[path[-1]] = value
    return raw


def assert_one_line_protocol_error(raw: Any) -> None:
    try:
        validate_protocol(raw, source="fuzz.yaml")
    except ProtocolError as err:
        assert "\n" not in str(err) and str(err).startswith("fuzz.yaml")


@FUZZ
@given(st.dictionaries(st.text(max_size=10), values, max_size=8))
def test_arbitrary_mappings_only_raise_protocol_errors(raw: dict[str, Any]) -> None:
    assert_one_line_protocol_error(raw)


@FUZZ
@given(
    st.lists(
        st.sampled_from(
            [
                "name",
                "version",
                "data",
                "dataset",
                "params",
                "num_classes",
                "model",
                "embedding_size",
                "batch",
                "size",
                "optim",
                "lr",
                "epochs",
                "metrics",
                "recall_at",
                "seeds",
                "search",
                "trials",
                "validation",
                "fraction",
                "unknown",
            ]
        ),
        min_size=1,
        max_size=3,
    ),
    values,
)
def test_mutated_valid_protocols_only_raise_protocol_errors(path: list[str], value: Any) -> None:
    import copy

    assert_one_line_protocol_error(mutate(copy.deepcopy(VALID), path, value))


@FUZZ
@given(st.text(max_size=200))
def test_arbitrary_yaml_text_only_raises_protocol_errors(
    tmp_path_factory: pytest.TempPathFactory, text: str
) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "p.yaml"
    path.write_text(text, encoding="utf-8")
    try:
        load_protocol(path)
    except ProtocolError as err:
        assert "\n" not in str(err)


SPEC = MetricsSpec(recall_at=[1, 2, 4], nmi=True)
embeddings = st.integers(2, 40).flatmap(
    lambda n: st.tuples(
        st.lists(
            st.lists(st.floats(-1e3, 1e3, allow_nan=False, width=32), min_size=3, max_size=3),
            min_size=n,
            max_size=n,
        ),
        st.lists(st.integers(0, 5), min_size=n, max_size=n),
    )
)


@FUZZ
@given(embeddings)
def test_metrics_stay_in_range_on_arbitrary_inputs(
    case: tuple[list[list[float]], list[int]],
) -> None:
    x, labels = np.array(case[0], dtype=np.float32), np.array(case[1])
    if len(x) <= max(SPEC.recall_at):
        return
    out = embedding_metrics(x, labels, SPEC)
    for key, value in out.items():
        if key in {"queries", "lone_queries"}:
            assert value == int(value) and value >= 0
        else:
            assert 0.0 <= value <= 1.0 + 1e-9, (key, value)


@FUZZ
@given(st.integers(0, 2**32 - 1), st.integers(6, 60), st.integers(2, 8), st.integers(1, 6))
def test_metrics_do_not_depend_on_gallery_order(seed: int, n: int, d: int, classes: int) -> None:
    rng = np.random.default_rng(seed)
    # continuous, d >= 2: no exact distance ties even after L2 normalisation (d = 1 collapses
    # every point onto +-1, where order can only be broken arbitrarily)
    x = rng.normal(size=(n, d)).astype(np.float32)
    labels = rng.integers(0, classes, n)
    perm = rng.permutation(n)
    spec = MetricsSpec(recall_at=[1, 2, 4], nmi=False)
    a, b = embedding_metrics(x, labels, spec), embedding_metrics(x[perm], labels[perm], spec)
    assert a.keys() == b.keys()
    for key in a:
        assert abs(a[key] - b[key]) < 1e-9, key
