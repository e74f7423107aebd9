"""The metrics' description is the one the code computes, hashes and shows."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import numpy as np
import pytest

from dmlbench.metrics import catalogue
from dmlbench.metrics.catalogue import FAMILIES, MLD, NDCG, RECALL, family
from dmlbench.protocol import HASH_OMIT_DEFAULTS, MetricsSpec


def test_every_metrics_field_of_the_protocol_is_a_described_family() -> None:
    """A ``MetricsSpec`` field without a description (or the reverse) fails here: a new metric
    is its function, its field and one entry in the catalogue."""
    assert set(MetricsSpec.model_fields) == {f.spec_field for f in FAMILIES} | {"normalize"}


def test_the_hash_omits_only_the_metrics_added_after_the_first_hashes_while_off() -> None:
    """The six first families are always hashed; MRR and the per-class means (#49) enter the
    hash only when a protocol turns them on, so every committed protocol keeps its hash."""
    from dmlbench.protocol import load_protocol, protocol_hash

    first = (*FAMILIES[:4], NDCG, MLD)
    assert all(f.hashed for f in first)
    assert {k: v for k, v in HASH_OMIT_DEFAULTS.items() if k[0] == "metrics"} == {
        ("metrics", "mrr"): False,
        ("metrics", "class_recall_at"): [],
        ("metrics", "class_map_at_r"): False,
    }
    base = load_protocol("glyphs-mini")
    hashes = {protocol_hash(base)}
    for dotted, on in (
        ("metrics.mrr", True),
        ("metrics.class_recall_at", [1]),
        ("metrics.class_map_at_r", True),
    ):
        hashes.add(protocol_hash(base.with_overrides({dotted: on})))
        assert protocol_hash(
            base.with_overrides({dotted: on}).with_overrides(
                {dotted: ([] if isinstance(on, list) else False)}
            )
        ) == protocol_hash(base)
    assert len(hashes) == 4  # each one turned on is another protocol


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("recall@4", RECALL),
        ("ndcg@10", NDCG),
        ("mld@1", MLD),
        ("map@r", catalogue.MAP_AT_R),
        ("r_precision", catalogue.R_PRECISION),
        ("nmi", catalogue.NMI),
        ("mrr", catalogue.MRR),
        ("class_recall@10", catalogue.CLASS_RECALL),
        ("class_map@r", catalogue.CLASS_MAP_AT_R),
        ("recall@", None),
        ("queries", None),
        ("ci_recall@1_lo", None),
    ],
)
def test_family_of_a_record_key(name: str, expected: catalogue.MetricFamily | None) -> None:
    assert family(name) is expected
    assert bool(catalogue.METRIC_KEY.match(name)) == (expected is not None)


def test_scale_digits_direction_and_labels() -> None:
    """The facts the tables, plots and verdicts used to spell out for ``mld@`` by hand."""
    assert catalogue.scale("recall@1") == 100.0 and catalogue.scale("mld@2") == 1.0
    assert catalogue.scale("recall@1", percent=False) == 1.0
    assert catalogue.digits("nmi") == 1 and catalogue.digits("mld@1") == 3
    assert catalogue.higher_is_better("ndcg@1") and not catalogue.higher_is_better("mld@1")
    assert catalogue.unit("mld@1") == "label distance" and catalogue.unit("map@r") == "%"
    assert [catalogue.short_label(n) for n in ("recall@4", "ndcg@10", "mld@1", "map@r")] == [
        "R@4", "nDCG@10", "MLD@1", "MAP@R"
    ]  # fmt: skip
    assert catalogue.short_label("r_precision") == "R-Prec."
    assert catalogue.ci_keys("recall@1") == ("ci_recall@1_lo", "ci_recall@1_hi")
    assert [catalogue.interval_of(k) for k in catalogue.ci_keys("mld@4")] == ["mld@4"] * 2
    assert catalogue.interval_of("recall@1") is None and catalogue.interval_of("ci_x") is None
    assert catalogue.key_forms() == (
        "recall@K, map@r, r_precision, nmi, mrr, class_recall@K, class_map@r, ndcg@K, mld@K"
    )
    assert catalogue.label_kind_of(["nmi", "recall@1"]) == "class"
    assert catalogue.label_kind_of(["ndcg@1", "mld@1"]) == "continuous"


def test_the_engines_write_only_described_keys() -> None:
    """Every key the class-label and continuous-label metrics compute is a described metric."""
    from dmlbench.metrics.continuous import continuous_metrics
    from dmlbench.metrics.retrieval import retrieval_metrics

    rng = np.random.default_rng(0)
    labels = rng.integers(0, 3, size=(12, 8))
    q = rng.integers(0, 3, size=12)
    r = np.full(12, 3)
    keys = list(retrieval_metrics(labels, q, r, [1, 2, 4], True, True))
    d = np.sort(rng.random((12, 8)), axis=1)
    keys += list(continuous_metrics(d, d, [1, 4], [1]))
    assert len(keys) == 8 and all(family(k) is not None for k in keys), keys


# A metric's record key spelled in a string outside docstrings (an f-string's text parts too).
SPELLED = re.compile(r"(recall@|mld@|map@r|ndcg@|\bnmi\b|r_precision)")
ROOT = Path(__file__).resolve().parents[2]
# Where the package still spells a metric name, and why it is not a second description:
ALLOWED = {
    "benchmark/metrics/catalogue.py": 10,  # the description itself
    # pytorch-metric-learning's own name of R-Precision, in the peer-name map (its vocabulary)
    "benchmark/perf/evaluate.py": 1,
    "benchmark/report/html.py": 1,  # prose of the page's caption ("mld@K in label units")
    "benchmark/report/method_page.py": 1,  # the same prose on a method's page
}


def spelled_metric_names(source: str) -> list[str]:
    """The non-docstring string constants of ``source`` that spell a metric's record key."""
    tree = ast.parse(source)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
        and SPELLED.search(node.value)
    ]


def test_the_scan_finds_a_spelled_metric_name() -> None:
    injected = '"""Doc: recall@1 here is prose."""\nKEY = "recall@1"\nx = f"{y} mld@{k}"\n'
    assert spelled_metric_names(injected) == ["recall@1", " mld@"]


def test_metric_names_are_spelled_in_the_catalogue_only() -> None:
    """Every other module reads the catalogue (issue 46): a metric's key in a string is a
    second description that a new or renamed metric would miss."""
    found = {}
    for path in sorted([*(ROOT / "benchmark").rglob("*.py"), *(ROOT / "methods").rglob("*.py")]):
        if names := spelled_metric_names(path.read_text(encoding="utf-8")):
            found[path.relative_to(ROOT).as_posix()] = len(names)
    assert found == ALLOWED
