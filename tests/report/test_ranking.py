"""Average rank across protocol hashes: hand-worked example with ties, metric choice, exclusions."""

from __future__ import annotations

import numpy as np
import pytest

from dmlbench.report import records_frame
from dmlbench.report.ranking import average_ranks, primary_metric
from tests.report.test_build import rec


def test_primary_metric() -> None:
    assert primary_metric(["nmi", "recall@2", "recall@1"]) == "recall@1"
    assert primary_metric(["mld@1", "ndcg@5", "ndcg@10"]) == "ndcg@10"
    assert primary_metric(["nmi", "map@r"]) == "map@r"
    assert primary_metric(["mld@5", "mld@1"]) == "mld@1"
    assert primary_metric(["seeds"]) is None


def test_hand_worked_example_with_ties() -> None:
    # Protocol A (recall@1): a .90, b .80, c .80        -> ranks a 1, b 2.5, c 2.5
    # Protocol B (recall@1, b's mean over 2 seeds .70): -> ranks b 1, c 2, a 3
    # Protocol C (ndcg@10, continuous; b not run):      -> ranks a 1, c 2
    # average: a (1+3+1)/3 = 1.667, b (2.5+1)/2 = 1.75, c (2.5+2+2)/3 = 2.167
    # Borda (methods ranked − rank): a (3−1)+(3−3)+(2−1) = 3, b 0.5+2 = 2.5, c 0.5+1+0 = 1.5
    records = [
        rec("a", 0, "a" * 64, "A", m={"recall@1": 0.90}),
        rec("b", 0, "a" * 64, "A", m={"recall@1": 0.80}),
        rec("c", 0, "a" * 64, "A", m={"recall@1": 0.80}),
        rec("untrained", 0, "a" * 64, "A", m={"recall@1": 0.99}),  # left out
        rec("a", 0, "b" * 64, "B", m={"recall@1": 0.50, "nmi": 0.9}),
        rec("b", 0, "b" * 64, "B", m={"recall@1": 0.60}),
        rec("b", 1, "b" * 64, "B", m={"recall@1": 0.80}),
        rec("c", 0, "b" * 64, "B", m={"recall@1": 0.65}),
        rec("c", 1, "b" * 64, "B", stage="search-trial", m={"recall@1": 0.99}),  # left out
        rec("a", 0, "c" * 64, "C", m={"ndcg@10": 0.9, "mld@1": 5.0}),
        rec("c", 0, "c" * 64, "C", m={"ndcg@10": 0.8, "mld@1": 1.0}),
    ]
    r = average_ranks(records_frame(records))
    assert list(r.index) == ["a", "b", "c"]
    assert r["average_rank"].tolist() == pytest.approx([5 / 3, 1.75, 13 / 6])
    assert r["borda"].tolist() == pytest.approx([3.0, 2.5, 1.5])
    assert r["protocols"].tolist() == [3, 2, 3]
    assert r.loc["b", "A aaaaaaaa"] == 2.5 and r.loc["c", "A aaaaaaaa"] == 2.5
    assert np.isnan(r.loc["b", "C cccccccc"])
    assert r.attrs["metrics"] == {
        "A aaaaaaaa": "recall@1",
        "B bbbbbbbb": "recall@1",
        "C cccccccc": "ndcg@10",
    }


def test_lower_is_better_for_label_distance_only_protocols() -> None:
    records = [
        rec("a", 0, "a" * 64, "P", m={"mld@1": 2.0}),
        rec("b", 0, "a" * 64, "P", m={"mld@1": 1.0}),
    ]
    r = average_ranks(records_frame(records))
    assert list(r.index) == ["b", "a"] and r.loc["b", "P aaaaaaaa"] == 1.0


def test_empty_without_final_records() -> None:
    records = [rec("a", 0, stage="search-trial")]
    r = average_ranks(records_frame(records))
    assert r.empty and list(r.columns[:3]) == ["average_rank", "borda", "protocols"]


def test_label_kind_from_metrics_then_registry() -> None:
    from dmlbench.report.ranking import label_kind

    assert label_kind("anything", ["recall@1", "nmi"]) == "class"
    assert label_kind("anything", ["ndcg@10", "mld@1"]) == "continuous"
    assert label_kind("log-ratio", ["map@r"]) == "continuous"  # the registry decides
    assert label_kind("proxy-nca", []) == "class"
    assert label_kind("untrained", ["recall@1"]) is None
    assert label_kind("not-a-method", []) is None


def test_rankings_never_mix_label_kinds(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import csv

    from dmlbench.report.build import build_reports
    from dmlbench.report.ranking import ranks_by_kind

    records = [
        rec("a", 0, "a" * 64, "glyphs", m={"recall@1": 0.9}),
        rec("b", 0, "a" * 64, "glyphs", m={"recall@1": 0.8}),
        rec("c", 0, "a" * 64, "glyphs", m={"recall@1": 0.7}),
        rec("log-ratio", 0, "b" * 64, "poses", m={"ndcg@10": 0.95}),
        rec("triplet-dense", 0, "b" * 64, "poses", m={"ndcg@10": 0.85}),
        rec("untrained", 0, "b" * 64, "poses", m={"ndcg@10": 0.99}),
    ]
    by_kind = ranks_by_kind(records_frame(records))
    assert list(by_kind) == ["class", "continuous"]
    assert list(by_kind["class"].index) == ["a", "b", "c"]
    assert list(by_kind["continuous"].index) == ["log-ratio", "triplet-dense"]
    # one pooled ranking would give both winners rank 1 and average a over 1 of 2 protocols
    assert by_kind["continuous"]["borda"].tolist() == [1.0, 0.0]
    build_reports(records, tmp_path)
    md = (tmp_path / "ranking.md").read_text()
    class_part, continuous_part = md.split("### Class labels")[1].split("### Continuous labels")
    assert "| a " in class_part and "log-ratio" not in class_part
    assert "log-ratio" in continuous_part and "| a " not in continuous_part
    with (tmp_path / "ranking.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["method"], r["label_kind"]) for r in rows] == [
        ("a", "class"), ("b", "class"), ("c", "class"),
        ("log-ratio", "continuous"), ("triplet-dense", "continuous"),
    ]  # fmt: skip
    assert rows[0]["poses bbbbbbbb"] == "" and rows[0]["average_rank"] == "1.0"
    page = (tmp_path / f"poses-{'b' * 12}.html").read_text()
    assert "Continuous labels" in page and "Class labels" not in page
