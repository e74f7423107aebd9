"""Claims over test queries: seed-mean hits, class bootstrap, paired tests against the best."""

from __future__ import annotations

import numpy as np
import pytest

from dmlbench.records import QueryHits, Record
from dmlbench.report.board import analyse_board, summary_markdown
from dmlbench.report.confidence import confidence_table
from dmlbench.report.query_tests import hit_rates, query_tests
from dmlbench.report.tables import records_frame, summary_table
from tests.report.test_build import rec

CLASSES = np.repeat(np.arange(60), 10)  # 60 test classes × 10 queries


def hits_of(rate: float, seed: int) -> np.ndarray:
    """Per-query hits with about ``rate`` of them 1; class difficulty shared across seeds."""
    rng = np.random.default_rng(seed)
    hard = np.random.default_rng(99).random(60)[CLASSES]  # the same hard classes every seed
    return (rng.random(CLASSES.size) * 0.5 + hard * 0.5 < rate).astype(float)


def run(method: str, seed: int, hits: np.ndarray, classes: np.ndarray = CLASSES) -> Record:
    r = rec(method, seed, m={"recall@1": float(hits.mean())})
    r.query_hits = QueryHits.encode(hits, classes)
    return r


def board(rates: dict[str, float], seeds: int = 3) -> list[Record]:
    return [run(m, s, hits_of(v, 10 * s + i)) for i, (m, v) in enumerate(rates.items())
            for s in range(seeds)]  # fmt: skip


def test_query_hits_round_trip_and_refuse_non_binary() -> None:
    hits = (np.arange(37) % 3 == 0).astype(float)
    q = QueryHits.encode(hits, np.arange(37) // 4)
    back, classes = q.decode()
    assert np.array_equal(back, hits) and np.array_equal(classes, np.arange(37) // 4)
    assert len(q.model_dump_json()) < 200
    with pytest.raises(ValueError, match="0/1"):
        QueryHits.encode(np.array([0.5, 1.0]), np.array([0, 1]))


def test_rates_are_seed_means_and_need_every_record_on_the_same_queries() -> None:
    a0, a1 = hits_of(0.6, 0), hits_of(0.6, 1)
    rates = hit_rates([run("a", 0, a0), run("a", 1, a1), run("b", 0, a0)])
    assert rates is not None and rates.seeds == {"a": 2, "b": 1}
    np.testing.assert_array_equal(rates.rates["a"], (a0 + a1) / 2)
    plain = rec("c", 0)  # an older record without hits: nothing is claimed
    assert hit_rates([run("a", 0, a0), plain]) is None
    other = run("b", 0, a0, classes=np.roll(CLASSES, 1))  # scored on other queries
    assert hit_rates([run("a", 0, a0), other]) is None


def test_a_clearly_worse_method_leaves_the_set_a_tie_stays() -> None:
    records = board({"a": 0.7, "a-twin": 0.7, "weak": 0.35})
    rates = hit_rates(records)
    assert rates is not None
    tests = query_tests(rates)
    assert tests is not None
    assert tests.best in {"a", "a-twin"} and "weak" not in tests.not_worse
    assert set(tests.not_worse) == {"a", "a-twin"}
    assert "class resamples" in tests.stability


def test_the_test_can_fail_to_separate() -> None:
    """Two methods with the same hits are never separated (p = 1), whatever the board."""
    same = hits_of(0.5, 3)
    records = [run("a", 0, same), run("b", 0, same.copy()), run("untrained", 0, 0 * same)]
    rates = hit_rates(records)
    assert rates is not None
    tests = query_tests(rates)
    assert tests is not None and tests.not_worse == ["a", "b"]
    assert query_tests(hit_rates([run("a", 0, same)])) is None


def test_the_board_prints_the_query_lines_and_the_confidence_table_uses_classes() -> None:
    records = [*board({"a": 0.7, "b": 0.68, "weak": 0.3}), run("untrained", 0, hits_of(0.1, 7))]
    df = records_frame(records)
    result = analyse_board(df, records)
    md = summary_markdown("t", summary_table(df), result, False)
    assert "Not significantly worse than the best over test queries" in md
    assert (
        "Stability over test queries (recall@1)" in md
        and "untrained" not in md.split("test queries")[1].split("\n")[0]
    )
    table = confidence_table(records)
    rates = hit_rates(records)
    assert rates is not None
    lo, hi = rates.interval("a")
    assert table.loc["a", "95% CI (queries)"] == f"[{100 * lo:.1f}, {100 * hi:.1f}]"
    assert analyse_board(df).queries is None  # no records given: nothing claimed over queries
