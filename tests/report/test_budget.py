"""Tuning budget per method: trials (complete, pruned), the search's epochs, finals, seeds, epochs,
steps and time, summed from records."""

from __future__ import annotations

import pytest

from dmlbench.records import Record
from dmlbench.report.budget import COLUMNS, format_budget, format_seconds, tuning_budget
from tests.report.test_build import rec


def trial(state: str, epochs: int, steps: int, wall: float) -> Record:
    r = rec("a", 0, stage="search-trial", epochs=epochs, steps=steps, wall=wall)
    return r.model_copy(update={"search": {"state": state, "study": "s", "reason": ""}})


def test_counts_and_sums_per_method() -> None:
    records = [
        trial("complete", 2, 20, 10.0),
        trial("pruned", 1, 7, 5.0),  # pruned after one epoch
        rec("a", 0, epochs=4, steps=40, wall=30.0),
        rec("a", 1, epochs=4, steps=40, wall=32.0),
        rec("b", 0, epochs=4, steps=44, wall=100.0),
        rec("untrained", 0, wall=2.0),
    ]
    b = tuning_budget(records)
    assert list(b.columns) == COLUMNS and list(b.index) == ["a", "b", "untrained"]
    counts = ["trials", "complete", "pruned", "search_epochs", "finals", "seeds", "epochs", "steps"]
    assert b.loc["a", counts].tolist() == [2, 1, 1, 3, 2, 2, 11, 107]
    assert b.loc["a", "wall_seconds"] == pytest.approx(77.0)
    assert b.loc["a", "train_seconds"] == pytest.approx(38.5)
    assert b.loc["b", counts].tolist() == [0, 0, 0, 0, 1, 1, 4, 44]
    assert b.loc["untrained", "epochs"] == 0


def test_the_committed_tuned_board_shows_what_each_search_really_trained() -> None:
    """glyphs-mini's searches: 3 studies of 4 trials each; every study completed at least the
    median pruner's 3 start-up trials, some only those, and the epochs trained differ between
    methods."""
    from pathlib import Path

    from dmlbench.records import load_records
    from dmlbench.search.study import MEDIAN_STARTUP_TRIALS

    lb = Path(__file__).resolve().parents[2] / "results" / "leaderboard" / "glyphs-mini"
    records, _ = load_records(lb)
    b = tuning_budget(records)
    trained = b.drop(index=[m for m in ("untrained", "pixels", "pretrained") if m in b.index])
    assert (trained["trials"] == 12).all()
    assert (trained["complete"] + trained["pruned"] == 12).all()
    assert (trained["complete"] >= 3 * MEDIAN_STARTUP_TRIALS).all()
    assert (trained["complete"] == 3 * MEDIAN_STARTUP_TRIALS).any()  # the rest were pruned
    assert trained["search_epochs"].nunique() > 1  # an equal trial count, unequal training


def test_empty_and_formatting() -> None:
    empty = tuning_budget([])
    assert empty.empty and list(empty.columns) == COLUMNS
    assert format_seconds(45) == "45 s"
    assert format_seconds(750) == "12.5 min"
    assert format_seconds(3 * 3600) == "3.0 h"
    shown = format_budget(tuning_budget([rec("a", 0, epochs=3, steps=9, wall=600.0)]))
    assert shown.loc["a"].tolist() == [
        "0", "0", "0", "0", "1", "1", "3", "9", "5.0 min", "10.0 min"
    ]  # fmt: skip
    assert "search epochs" in shown.columns
