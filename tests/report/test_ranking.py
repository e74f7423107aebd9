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
