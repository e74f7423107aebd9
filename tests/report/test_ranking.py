"""What a board is ranked on, its label kind, and which board speaks for its data set."""

from __future__ import annotations

from dmlbench.report.ranking import one_board_per_data_set, primary_metric
from tests.report.test_build import rec


def test_primary_metric() -> None:
    assert primary_metric(["nmi", "recall@2", "recall@1"]) == "recall@1"
    assert primary_metric(["mld@1", "ndcg@5", "ndcg@10"]) == "ndcg@10"
    assert primary_metric(["nmi", "map@r"]) == "map@r"
    assert primary_metric(["mld@5", "mld@1"]) == "mld@1"
    assert primary_metric(["seeds"]) is None


def test_one_board_per_data_set_keeps_the_least_derived_name() -> None:
    records = [
        rec("a", 0, "a" * 64, "glyphs-mini@trials=4"),
        rec("a", 0, "b" * 64, "glyphs-mini"),  # the same data (fingerprint f-glyphs-mini)
        rec("b", 0, "b" * 64, "glyphs-mini"),
        rec("a", 0, "c" * 64, "poses-mini"),
    ]
    kept, lines = one_board_per_data_set(records)
    assert [(r.protocol.name, r.method) for r in kept] == [
        ("glyphs-mini", "a"), ("glyphs-mini", "b"), ("poses-mini", "a"),
    ]  # fmt: skip
    assert lines == [
        "Not compared: glyphs-mini@trials=4 (aaaaaaaa), the same data as glyphs-mini "
        "(bbbbbbbb), which is compared; one data set counts once."
    ]


def test_label_kind_from_metrics_then_registry() -> None:
    from dmlbench.report.ranking import label_kind

    assert label_kind("anything", ["recall@1", "nmi"]) == "class"
    assert label_kind("anything", ["ndcg@10", "mld@1"]) == "continuous"
    assert label_kind("log-ratio", ["map@r"]) == "continuous"  # the registry decides
    assert label_kind("proxy-nca", []) == "class"
    assert label_kind("untrained", ["recall@1"]) is None
    assert label_kind("not-a-method", []) is None
