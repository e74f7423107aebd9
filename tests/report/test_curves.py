"""The curves of a method: loss over seeds, validation per trial, the search's history."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from dmlbench.records import Record
from dmlbench.report.curves import (
    loss_curves,
    search_history,
    selected_trial,
    validation_curves,
    write_curves,
)
from tests.report.test_build import rec


def final(seed: int, losses: list[float], trial: int = 1) -> Record:
    r = rec("m", seed)
    curve = [{"epoch": float(e), "loss": v} for e, v in enumerate(losses)]
    search = {"trial": trial, "trials": 3, "metric": "recall@1", "value": 0.6, "epochs": 2}
    return r.model_copy(update={"curve": curve, "search": search})


def trial(n: int, value: float, state: str, folds: list[list[float]]) -> Record:
    r = rec("m", 0, stage="search-trial", m={"val_recall@1": value})
    curve = [
        {"fold": float(f), "epoch": float(e), "val_recall@1": v}
        for f, values in enumerate(folds)
        for e, v in enumerate(values)
    ]
    return r.model_copy(update={"trial": n, "curve": curve, "search": {"state": state}})


def test_loss_is_the_mean_and_std_over_seeds_per_epoch() -> None:
    out = loss_curves([final(0, [4.0, 3.0]), final(1, [2.0, 1.0])])
    assert list(out.index) == [0, 1]
    assert out["mean"].tolist() == [3.0, 2.0]
    assert out["std"].tolist() == pytest.approx([math.sqrt(2), math.sqrt(2)])
    assert out["n"].tolist() == [2, 2]
    one = loss_curves([final(0, [4.0])])
    assert math.isnan(one["std"].iloc[0])


def test_search_history_keeps_the_best_completed_value_so_far() -> None:
    trials = [
        trial(2, 0.9, "pruned", [[0.9]]),  # pruned: never the best so far
        trial(0, 0.5, "complete", [[0.4, 0.5]]),
        trial(1, 0.7, "complete", [[0.6, 0.7]]),
        trial(3, 0.6, "complete", [[0.5, 0.6]]),
    ]
    out = search_history(trials)
    assert list(out.index) == [0, 1, 2, 3]
    assert out["best"].tolist() == [0.5, 0.7, 0.7, 0.7]
    assert out["state"].tolist() == ["complete", "complete", "pruned", "complete"]


def test_validation_curves_average_the_folds_per_epoch() -> None:
    out = validation_curves([trial(0, 0.5, "complete", [[0.2, 0.4], [0.4, 0.6]])])
    assert out[0].tolist() == pytest.approx([0.3, 0.5])


def test_the_selected_trial_is_the_final_records() -> None:
    assert selected_trial([final(0, [1.0], trial=2)]) == 2
    assert selected_trial([rec("m")]) is None


def test_write_curves_draws_a_png_per_method_with_a_curve(tmp_path: Path) -> None:
    records = [final(0, [4.0, 3.0]), final(1, [3.5, 2.5]), trial(0, 0.5, "complete", [[0.5]])]
    records.append(rec("flat"))  # no curve at all: no picture
    out = write_curves(records, tmp_path, "board")
    assert set(out) == {"m"}
    assert out["m"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
