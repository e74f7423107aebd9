"""The convergence check: its verdict from scores, and one tiny measurement end to end."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from dmlbench.leaderboard.convergence import FACTORS, main, scaled, verdict
from dmlbench.protocol import load_protocol


def _frame(scores: dict[str, list[float]], seed: int = 0) -> pd.DataFrame:
    rows = [
        {"method": m, "factor": f, "seed": seed, "epochs": 4 * f, "steps": 40 * f,
         "recall@1": v, "seconds": 1}
        for m, values in scores.items()
        for f, v in zip(FACTORS, values, strict=True)
    ]  # fmt: skip
    return pd.DataFrame(rows)


def test_a_flat_schedule_has_converged() -> None:
    v = verdict(_frame({"a": [0.50, 0.60, 0.605, 0.61], "b": [0.40, 0.50, 0.505, 0.51]}))
    assert v.converged and v.best == "a" and abs(v.moved - 0.005) < 1e-12 and v.swapped == []


def test_a_best_method_still_rising_has_not() -> None:
    v = verdict(_frame({"a": [0.50, 0.60, 0.63, 0.65], "b": [0.40, 0.50, 0.505, 0.51]}))
    assert (
        not v.converged and "NOT converged" in v.sentence("x") and "+3.0 points" in v.sentence("x")
    )


def test_an_order_that_flips_when_doubled_has_not() -> None:
    """The best moves by nothing, but a slow method overtakes a fast one: speed ranked."""
    v = verdict(
        _frame(
            {"a": [0.5, 0.60, 0.60, 0.6], "b": [0.2, 0.40, 0.55, 0.7], "c": [0.3, 0.5, 0.5, 0.5]}
        )
    )
    assert not v.converged and v.swapped == [("c", "b")]


def test_the_verdict_reads_the_means_over_seeds() -> None:
    """Seed 0 alone says +3 points; seed 1 says -2.8: their mean moves by 0.1, converged."""
    one = _frame({"a": [0.50, 0.60, 0.63, 0.63], "b": [0.40, 0.50, 0.50, 0.50]}, seed=0)
    two = _frame({"a": [0.50, 0.60, 0.572, 0.60], "b": [0.40, 0.50, 0.50, 0.50]}, seed=1)
    assert not verdict(one).converged
    both = verdict(pd.concat([one, two]))
    assert both.converged and abs(both.moved - 0.001) < 1e-9


def test_the_move_carries_its_standard_error_over_seeds() -> None:
    """Seeds moving +3 and -2.8 points: mean +0.1, standard error |3 + 2.8| / 2 = 2.9 points
    (two seeds: sd = |d1 - d2| / sqrt(2), over sqrt(2)); one seed has none."""
    one = _frame({"a": [0.50, 0.60, 0.63, 0.63], "b": [0.40, 0.50, 0.50, 0.50]}, seed=0)
    two = _frame({"a": [0.50, 0.60, 0.572, 0.60], "b": [0.40, 0.50, 0.50, 0.50]}, seed=1)
    both = verdict(pd.concat([one, two]))
    assert abs(both.se - 0.029) < 1e-9 and "standard error 2.9 over the seeds" in both.sentence("x")
    assert math.isnan(verdict(one).se) and "standard error" not in verdict(one).sentence("x")


def test_scaled_epochs_round_up() -> None:
    p = load_protocol("emoji-mini")  # 3 epochs
    assert [scaled(p, f).optim.epochs for f in FACTORS] == [2, 3, 6, 12]


def test_the_command_writes_table_figure_and_verdict(tmp_path: Path, tiny_glyphs_protocol) -> None:
    import yaml

    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(tiny_glyphs_protocol.model_dump(mode="json")), encoding="utf-8")
    argv = ["--protocol", str(path), "--method", "contrastive", "--seeds", "0,1", "--jobs", "2"]
    assert main([*argv, "--out", str(tmp_path)]) == 0
    frame = pd.read_csv(tmp_path / "glyphs-tiny-convergence.csv")
    assert list(frame["epochs"]) == [1, 1, 1, 1, 2, 2, 4, 4] and list(frame["seed"]) == [0, 1] * 4
    assert frame["recall@1"].between(0, 1).all()
    assert (
        frame.loc[frame["seed"] == 0, "recall@1"]
        .ne(frame.loc[frame["seed"] == 1, "recall@1"].values)
        .any()
    )
    assert "Mean over seeds 0, 1 (2)" in (tmp_path / "glyphs-tiny-convergence.md").read_text()
    assert (tmp_path / "glyphs-tiny-convergence.png").stat().st_size > 1000
    assert "doubling the epochs" in (tmp_path / "glyphs-tiny-convergence.md").read_text()
