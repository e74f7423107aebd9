"""Report tables: one protocol hash per table, mean ± std over seeds, untrained last."""

from __future__ import annotations

from pathlib import Path

import pytest

from dmlbench.records import Record
from dmlbench.report import MixedProtocolsError, records_frame, summary_table, write_reports
from tests.test_records import make


def scored(metrics: dict[str, float], method: str, seed: int = 0, h: str = "a" * 64) -> Record:
    """``make``'s record with these metrics (names like ``recall@1`` are no keywords)."""
    return make(method, seed, h).model_copy(update={"metrics": metrics})


def test_mean_std_and_order() -> None:
    recs = [
        scored({"recall@1": 0.5}, "a", 0),
        scored({"recall@1": 0.7}, "a", 1),
        scored({"recall@1": 0.9}, "b", 0),
        scored({"recall@1": 0.95}, "untrained", 0),
    ]
    table = summary_table(records_frame(recs))
    assert list(table.index) == ["b", "a", "untrained"]
    assert table.loc["a", "recall@1"] == pytest.approx(0.6)
    assert table.loc["a", "recall@1_std"] == pytest.approx(0.1414, abs=1e-3)
    assert table.loc["a", "seeds"] == 2


def test_refuses_to_mix_protocol_hashes() -> None:
    df = records_frame([make("a", h="a" * 64), make("a", h="b" * 64)])
    with pytest.raises(MixedProtocolsError, match="2 protocol hashes"):
        summary_table(df)


def test_write_reports_one_table_per_hash(tmp_path: Path) -> None:
    recs = [make("a", h="a" * 64), scored({"recall@1": 0.1, "nmi": 0.3}, "b", h="b" * 64)]
    written = write_reports(recs, tmp_path)
    assert len(written) == 2
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [
        "p-aaaaaaaaaaaa.csv",
        "p-aaaaaaaaaaaa.md",
        "p-bbbbbbbbbbbb.csv",
        "p-bbbbbbbbbbbb.md",
    ]
    md = (tmp_path / "p-bbbbbbbbbbbb.md").read_text()
    assert "| b " in md and "| 10.0 " in md and "30.0" in md and "±" not in md.split("|", 1)[1]
    assert "**" not in md and "one seed (0): no spread, no significance claimed" in md


def test_label_distance_is_raw_and_lower_is_better() -> None:
    from dmlbench.report.tables import format_table

    recs = [
        scored({"ndcg@10": 0.9, "mld@1": 0.44}, "a"),
        scored({"ndcg@10": 0.8, "mld@1": 0.55}, "b"),
    ]
    out = format_table(summary_table(records_frame(recs)), bold={"mld@1": ["a"]})
    assert out.loc["a", "mld@1"] == "**0.440**"  # one seed: no ± shown
    assert out.loc["b", "mld@1"] == "0.550"
    assert out.loc["a", "ndcg@10"] == "90.0"  # bold only where asked


def test_runs_with_different_overrides_are_never_averaged_into_one_row() -> None:
    """The hostile case: --max-steps 3 and --max-steps 150 (or two --hparam values) of one
    method and seed are two rows named by their overrides, not one row of their mean."""
    short = scored({"recall@1": 0.091}, "contrastive", 0).model_copy(
        update={"overrides": {"max_steps": 3}}
    )
    long = scored({"recall@1": 0.520}, "contrastive", 0).model_copy(
        update={"overrides": {"max_steps": 150}}
    )
    margin = scored({"recall@1": 0.251}, "contrastive", 0).model_copy(
        update={"overrides": {"max_steps": 3, "hparams": {"margin": 0.2}}}
    )
    table = summary_table(records_frame([short, long, margin, make("b", 0)]))
    assert table.loc["contrastive (max_steps=150)", "recall@1"] == pytest.approx(0.520)
    assert table.loc["contrastive (max_steps=3)", "recall@1"] == pytest.approx(0.091)
    assert table.loc["contrastive (hparams.margin=0.2, max_steps=3)", "recall@1"] == 0.251
    assert table.loc["b", "seeds"] == 1  # a method run one way keeps its plain name
    assert set(table["seeds"]) == {1}


def test_confidence_and_query_rows_follow_the_same_labels() -> None:
    from dmlbench.report.confidence import confidence_frame

    a = scored({"recall@1": 0.2}, "m", 0).model_copy(update={"overrides": {"max_steps": 3}})
    b = scored({"recall@1": 0.6}, "m", 0)
    table = confidence_frame([a, b])
    assert sorted(table.index) == ["m (max_steps=3)", "m (no overrides)"]
    assert table.loc["m (max_steps=3)", "recall@1_mean"] == pytest.approx(0.2)
