"""Tuning budget per method: trials, finals, seeds, epochs, steps and time, summed from records."""

from __future__ import annotations

import pytest

from dmlbench.report.budget import COLUMNS, format_budget, format_seconds, tuning_budget
from tests.report.test_build import rec


def test_counts_and_sums_per_method() -> None:
    records = [
        rec("a", 0, stage="search-trial", epochs=2, steps=20, wall=10.0),
        rec("a", 0, stage="search-trial", epochs=1, steps=7, wall=5.0),  # pruned early
        rec("a", 0, epochs=4, steps=40, wall=30.0),
        rec("a", 1, epochs=4, steps=40, wall=32.0),
        rec("b", 0, epochs=4, steps=44, wall=100.0),
        rec("untrained", 0, wall=2.0),
    ]
    b = tuning_budget(records)
    assert list(b.columns) == COLUMNS and list(b.index) == ["a", "b", "untrained"]
    assert b.loc["a", ["trials", "finals", "seeds", "epochs", "steps"]].tolist() == [
        2,
        2,
        2,
        11,
        107,
    ]
    assert b.loc["a", "wall_seconds"] == pytest.approx(77.0)
    assert b.loc["a", "train_seconds"] == pytest.approx(38.5)
    assert b.loc["b", ["trials", "finals", "seeds", "epochs", "steps"]].tolist() == [0, 1, 1, 4, 44]
    assert b.loc["untrained", "epochs"] == 0


def test_empty_and_formatting() -> None:
    empty = tuning_budget([])
    assert empty.empty and list(empty.columns) == COLUMNS
    assert format_seconds(45) == "45 s"
    assert format_seconds(750) == "12.5 min"
    assert format_seconds(3 * 3600) == "3.0 h"
    shown = format_budget(tuning_budget([rec("a", 0, epochs=3, steps=9, wall=600.0)]))
    assert shown.loc["a"].tolist() == ["0", "1", "1", "3", "9", "5.0 min", "10.0 min"]
