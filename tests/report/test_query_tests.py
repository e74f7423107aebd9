"""Per-query values: seed-mean rates, class sums for the crossed moment estimates, the
confidence table, continuous labels' per-query values."""

from __future__ import annotations

import numpy as np
import pytest

from dmlbench.metrics.catalogue import HITS_METRIC, MAP_AT_R
from dmlbench.records import QueryHits, Record
from dmlbench.report.board import analyse_board, summary_markdown
from dmlbench.report.confidence import confidence_table
from dmlbench.report.query_tests import class_sums, hit_rates
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
    return r.model_copy(update={"query_hits": QueryHits.encode(hits, classes)})


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
    assert q.metric == HITS_METRIC  # the catalogue's: the record's field names no metric
    with pytest.raises(ValueError, match=f"must be '{HITS_METRIC}'"):
        QueryHits.model_validate({**q.model_dump(), "metric": MAP_AT_R.name})


def test_rates_are_seed_means_and_need_every_record_on_the_same_queries() -> None:
    a0, a1 = hits_of(0.6, 0), hits_of(0.6, 1)
    rates = hit_rates([run("a", 0, a0), run("a", 1, a1), run("b", 0, a0)])
    assert rates is not None and rates.seeds == {"a": 2, "b": 1}
    np.testing.assert_array_equal(rates.rates["a"], (a0 + a1) / 2)
    plain = rec("c", 0)  # an older record without hits: nothing is claimed
    assert hit_rates([run("a", 0, a0), plain]) is None
    other = run("b", 0, a0, classes=np.roll(CLASSES, 1))  # scored on other queries
    assert hit_rates([run("a", 0, a0), other]) is None


def test_class_sums_per_method_seed_and_class() -> None:
    a0, a1, b0, b1 = (hits_of(0.6, i) for i in range(4))
    records = [run("a", 0, a0), run("a", 1, a1), run("b", 0, b0), run("b", 1, b1)]
    found = class_sums(records, ["a", "b"], [0, 1])
    assert found is not None
    sums, counts = found
    assert sums.shape == (2, 2, 60) and counts.tolist() == [10.0] * 60
    np.testing.assert_array_equal(sums[0, 1], a1.reshape(60, 10).sum(axis=1))
    assert sums.sum() == a0.sum() + a1.sum() + b0.sum() + b1.sum()
    assert class_sums(records, ["a", "b"], [0, 1, 2]) is None  # seed 2 missing
    assert class_sums([*records, rec("c", 0)], ["a"], [0]) is None  # a record without hits


def test_the_board_resamples_classes_where_hits_exist_and_the_confidence_table_uses_them() -> None:
    records = [*board({"a": 0.7, "b": 0.68, "weak": 0.3}), run("untrained", 0, hits_of(0.1, 7))]
    df = records_frame(records)
    result = analyse_board(df, records, margin=0.03)
    md = summary_markdown("t", summary_table(df), result, False)
    assert result.resampled == "seeds and test classes"
    assert "over the test queries' classes, crossed" in md
    assert analyse_board(df, margin=0.03).resampled == "seeds"  # no records: seeds only
    assert "the test-query component is not counted" in analyse_board(df, margin=0.03).legend
    table = confidence_table(records)
    rates = hit_rates(records)
    assert rates is not None
    lo, hi = rates.interval("a")
    assert table.loc["a", "95% CI (queries)"] == f"[{100 * lo:.1f}, {100 * hi:.1f}]"


def test_query_values_round_trip_validate_and_feed_the_crossed_design() -> None:
    """Continuous labels: per-query nDCG and label distances survive the record's encoding
    (float32), a mean that disagrees with the metric or a wrong length is a damaged record,
    and query_sums gives one unit per query."""
    import numpy as np
    import pytest

    from dmlbench.records import QueryValues, record_problem
    from dmlbench.report.query_tests import query_sums
    from tests.report.test_build import rec

    rng = np.random.default_rng(0)
    records = []
    for m in ("a", "b"):
        for s in range(3):
            ndcg = rng.uniform(0.5, 1.0, 100)
            r = rec(
                m, s, "p" * 64, "poses-mini", m={"ndcg@10": float(ndcg.mean()), "queries": 100.0}
            )
            values = QueryValues.encode({"ndcg@10": ndcg})
            records.append(r.model_copy(update={"query_values": values}))
            np.testing.assert_allclose(values.decode("ndcg@10"), ndcg, rtol=1e-6)
            assert record_problem(records[-1]) is None
    found = query_sums(records, "ndcg@10", ["a", "b"], [0, 1, 2])
    assert found is not None
    sums, counts = found
    assert sums.shape == (2, 3, 100) and (counts == 1).all()
    assert sums[0].sum(axis=1).mean() / 100 == pytest.approx(
        np.mean([r.metrics["ndcg@10"] for r in records if r.method == "a"]), rel=1e-6
    )
    bad = records[0].model_copy(update={"metrics": {"ndcg@10": 0.1, "queries": 100.0}})
    assert "query_values give ndcg@10" in (record_problem(bad) or "")
    short = records[0].model_copy(update={"metrics": {**records[0].metrics, "queries": 99.0}})
    assert "query_values holds 100 queries" in (record_problem(short) or "")
    assert query_sums(records[1:], "ndcg@10", ["a", "b"], [0, 1, 2]) is None  # a seed missing
    assert query_sums(records, "mld@10", ["a", "b"], [0]) is None  # not kept
    result = analyse_board(records_frame(records), records, margin=0.03)
    assert result.resampled == "seeds and test classes"
    assert "over the test queries, each its own unit (continuous labels" in result.legend
