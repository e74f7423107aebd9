"""Budget curves: each study's best complete trial so far, the mean and band over studies, the
"still rising" rule, and the figure on a committed board (one study per method)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from dmlbench.records import Record, load_records
from dmlbench.report.budget_curves import (
    best_so_far,
    budget_curves,
    still_rising,
    write_budget_curves,
)
from tests.report.test_build import rec

ROOT = Path(__file__).resolve().parents[2] / "results" / "leaderboard"


def trial(method: str, n: int, value: float, state: str = "complete", study: int = 0) -> Record:
    r = rec(method, 0, stage="search-trial", m={"val_recall@1": value})
    search = {"state": state, **({"study_index": study} if study else {})}
    return r.model_copy(update={"trial": n, "search": search})


def test_best_so_far_counts_complete_trials_per_study() -> None:
    trials = [
        trial("m", 0, 0.5),
        trial("m", 1, 0.9, "pruned"),  # a pruned value is never selected
        trial("m", 2, 0.6),
        trial("m", 0, 0.7, study=1),
        trial("m", 1, 0.4, study=1),
        trial("m", 2, 0.8, study=1),
    ]
    out = best_so_far(trials)
    s0 = out[(out["study"] == 0)]["best"].tolist()
    s1 = out[(out["study"] == 1)]["best"].tolist()
    assert s0 == [0.5, 0.5, 0.6] and s1 == [0.7, 0.7, 0.8]
    curves = budget_curves(trials)
    assert curves.loc[("m", 1), "mean"] == pytest.approx(0.6)
    assert (curves.loc[("m", 3), "low"], curves.loc[("m", 3), "high"]) == (0.6, 0.8)
    assert int(curves["studies"].max()) == 2


def test_still_rising_is_a_gain_over_the_last_quarter_above_half_a_point() -> None:
    """8 trials: the last quarter runs from trial 6 to 8. A gain of 0.6 points there is
    rising; 0.4 is not; a gain before the last quarter is not."""
    rising = [trial("a", n, 0.5 + (0.006 if n == 7 else 0.0)) for n in range(8)]
    flat = [trial("b", n, 0.5 + (0.004 if n == 7 else 0.0)) for n in range(8)]
    early = [trial("c", n, 0.5 + (0.05 if n >= 2 else 0.0)) for n in range(8)]
    assert still_rising(budget_curves(rising + flat + early)) == ["a"]


def test_nothing_before_the_first_complete_trial() -> None:
    out = best_so_far([trial("m", 0, 0.3, "pruned"), trial("m", 1, 0.4)])
    assert math.isnan(out["best"].iloc[0]) and out["best"].iloc[1] == 0.4


def test_the_figure_draws_on_a_committed_board(tmp_path: Path) -> None:
    records, _ = load_records(ROOT / "glyphs-mini")
    drawn = write_budget_curves(records, tmp_path, "glyphs-mini")
    assert drawn is not None
    path, caption, rising = drawn
    assert path.is_file() and path.stat().st_size > 1000
    assert "mean over each method's 3 search studies" in caption  # glyphs-mini v5: 3 studies
    assert "Still rising at N = " in caption
    assert all(m in caption for m in rising)
    defaults, _ = load_records(ROOT / "glyphs-mini@defaults")
    assert write_budget_curves(defaults, tmp_path / "d", "defaults") is None
