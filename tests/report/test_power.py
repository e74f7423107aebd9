"""The power of a board's verdicts (dmlbench.report.power): checked against boards simulated
from a known truth, and against what a broken variant would claim."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dmlbench.report.board import analyse_board
from dmlbench.report.build import build_reports
from dmlbench.report.power import (
    TARGET,
    board_power,
    pair_power,
    power_table,
    render_power,
    write_power_report,
)
from dmlbench.report.tables import records_frame
from dmlbench.report.verdicts import WORSE, compare_with_best, seed_moments
from tests.report.test_baselines import H, board

N = 500  # simulation draws per critical value (the package's default is 4000)
GAP = 0.03


def _board(
    rng: np.random.Generator, k: int = 4, seeds: int = 12, lead: int = 3, noisy: float = 2.0
) -> np.ndarray:
    """k methods × seeds: a seed effect every method shares (sd 2 points), each method's
    own seed noise (sd 2.5 points, the second method's ``noisy`` times that); the last method
    GAP behind the first ``lead`` − 1 (tied), the others 15 points further behind."""
    shared = rng.normal(0.0, 0.02, seeds)
    own = rng.normal(0.0, 0.025, (k, seeds)) * np.array([1.0, noisy, 1.0, 1.0])[:k, None]
    means = np.full(k, 0.60)
    means[lead - 1 : k - 1] -= 0.15
    means[-1] -= GAP
    return means[:, None] + shared[None, :] + own


def _rates(lead: int, noisy: float, boards: int = 150) -> tuple[float, float, float]:
    """Over boards drawn from the truth: the share calling the last method *worse*, the mean
    of each board's own predicted power for its pair with the first, and the Monte-Carlo
    error of the share."""
    rng = np.random.default_rng(lead)
    called, predicted = [], []
    for b in range(boards):
        mc = seed_moments(("a", "b", "c", "d"), _board(rng, lead=lead, noisy=noisy))
        out = compare_with_best(mc, 0.03, n_sim=N, seed=b)
        called.append(out.loc["d", "verdict"] == WORSE)
        predicted.append(pair_power(mc, GAP, n=N, seed=b)[0][2])  # pairs (a,b) (a,c) (a,d)
    rate = float(np.mean(called))
    return rate, float(np.mean(predicted)), float(np.sqrt(rate * (1 - rate) / boards))


def test_predicted_power_matches_boards_drawn_from_the_truth() -> None:
    """One leader 3 points ahead, the other two far behind: Hsu's verdict on the trailing
    method is its pair with the leader, and the share of simulated boards calling it *worse*
    is what each board's own fitted law predicts (on average; equal own seed sds, which the
    simulated law's shrinkage keeps)."""
    rate, mean, error = _rates(lead=2, noisy=1.0)
    assert 0.2 < rate < 0.9  # a board where the question is open, not a foregone one
    assert abs(mean - rate) <= 3 * error


def test_predicted_power_is_a_lower_bound_beside_tied_leaders() -> None:
    """Three tied leaders: any of them can make the trailing method *worse*, so the boards
    find it more often than its pair with one leader predicts; never less (nor where the
    simulated law's shrinkage of unequal seed sds widens the pair's spread)."""
    rate, mean, error = _rates(lead=4, noisy=2.0)
    assert mean <= rate + 3 * error
    assert rate > mean + 0.1  # the bound is not tight here, and the docs say so


def test_without_the_critical_value_the_power_would_be_overstated() -> None:
    """The broken variant (c = 0: the gap found whenever the estimate points the right way)
    claims far more than the boards deliver; the package's does not."""
    rng = np.random.default_rng(1)
    mc = seed_moments(("a", "b", "c", "d"), _board(rng))
    power, gap, se = pair_power(mc, GAP, n=N)
    i = 2  # a against d
    naive = float(np.mean(rng.normal(0, se[i], 4000) < GAP))
    assert naive > 0.95 and power[i] < naive - 0.2
    assert gap[i] > GAP * 0.5 and se[i] > 0


def test_gap_found_with_the_target_probability_is_the_quantile() -> None:
    """The gap found with probability TARGET has that power (the quantile and the rate are
    the same draws read two ways)."""
    mc = seed_moments(("a", "b", "c", "d"), _board(np.random.default_rng(2)))
    _, gap, _ = pair_power(mc, GAP, n=N, seed=3)
    power_at_gap = np.array([pair_power(mc, float(g), n=N, seed=3)[0][r] for r, g in
                             enumerate(gap)])  # fmt: skip
    assert power_at_gap == pytest.approx(np.full(len(gap), TARGET), abs=0.01)


def test_board_power_summarises_the_leading_methods_only() -> None:
    """A far-behind method's pairs (always found) do not lift the leading methods' power."""
    rng = np.random.default_rng(4)
    values = _board(rng)
    far = np.vstack([values, values[:1] - 0.30])
    leading = board_power(seed_moments(("a", "b", "c", "d"), values), GAP)
    with_far = board_power(seed_moments(("a", "b", "c", "d", "z"), far), GAP, leading=4)
    assert with_far.pairs == leading.pairs == 6
    assert with_far.power == pytest.approx(leading.power, abs=0.15)
    everything = board_power(seed_moments(("a", "b", "c", "d", "z"), far), GAP, leading=5)
    assert everything.pairs == 10


def test_render_names_the_rule() -> None:
    table = pd.DataFrame([{"board": "x (12345678)", "metric": "recall@1", "seeds": 12}])
    text = render_power(table)
    assert "x (12345678)" in text and "0.8" in text


def test_report_has_a_row_per_judged_board(tmp_path: Path) -> None:
    """``dmlbench report`` writes power.md: a line for a board with two methods over three
    seeds, none for one judged on a single seed."""
    records = board({"pixels": [0.2] * 3, "a": [0.50, 0.60, 0.55], "b": [0.40, 0.45, 0.43]})
    records += board({"a": [0.5], "b": [0.4]}, name="q")
    build_reports(records, tmp_path)
    text = (tmp_path / "power.md").read_text(encoding="utf-8")
    assert "| p (bbbbbbbb)" in text and "| q (" not in text
    assert "seeds only" in text  # these records carry no per-query hits
    assert write_power_report({("q", H): board({"a": [0.5], "b": [0.4]}, name="q")},
                              tmp_path / "none") == []  # fmt: skip


def test_table_uses_the_analysis_it_is_given() -> None:
    """A report passes the analyses it has made (fitting a law and simulating critical values
    is costly); the same analysis gives the same row, another board's gives its own."""
    near = board({"a": [0.50, 0.60, 0.55], "b": [0.40, 0.45, 0.43]})
    far = board({"a": [0.50, 0.90, 0.55], "b": [0.10, 0.45, 0.43]})
    key = {("p", near[0].protocol.hash): near}
    alone = power_table(key)
    same = power_table(key, {near[0].protocol.hash: analyse_board(records_frame(near), near)})
    other = power_table(key, {near[0].protocol.hash: analyse_board(records_frame(far), far)})
    assert alone.equals(same)
    assert other["se of a difference"].iloc[0] > alone["se of a difference"].iloc[0]
