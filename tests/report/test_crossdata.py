"""Across data sets (dmlbench.report.crossdata): hand-computed τ, simulated boards with a known
truth, a method missing on one board, one data set alone, and the Nemenyi number."""

from __future__ import annotations

import math
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dmlbench.records import QueryHits, Record
from dmlbench.report import crossdata
from dmlbench.report.crossdata import (
    DataSet,
    agreement,
    data_sets_needed,
    nemenyi_cd,
    write_cross_report,
)
from dmlbench.report.verdicts import Replicates, crossed_replicates
from tests.report.test_build import rec

METHODS = ("a", "b", "c", "d")


def fixed(name: str, means: list[float], higher: bool = True) -> DataSet:
    """A board whose every replicate equals its observed means: τ's interval is τ itself."""
    m = np.array(means)
    reps = Replicates(METHODS[: len(m)], m, np.tile(m, (50, 1)))
    return DataSet(name, "0" * 64, "recall@1", higher, pd.Series(m, index=reps.methods),
                   pd.Series(dtype=str), 0.03, reps)  # fmt: skip


def test_hand_computed_tau_for_four_methods() -> None:
    # A: a > b > c > d; B: b > a > c > d. Of the 6 pairs only (a, b) is discordant:
    # τ = (5 − 1) / 6 = 2/3.
    row = agreement(fixed("A", [0.9, 0.8, 0.7, 0.6]), fixed("B", [0.7, 0.9, 0.6, 0.5]))
    assert row.methods == 4
    assert row.tau == pytest.approx(2 / 3)
    assert (row.tau_lo, row.tau_hi) == pytest.approx((2 / 3, 2 / 3))
    # B ties a and b: 5 concordant, 0 discordant, one tie in B: τ-b = 5 / √(6 · 5).
    tied = agreement(fixed("A", [0.9, 0.8, 0.7, 0.6]), fixed("B", [0.7, 0.7, 0.6, 0.5]))
    assert tied.tau == pytest.approx(5 / math.sqrt(30))


def test_lower_is_better_is_ranked_the_other_way() -> None:
    # B's metric is a distance: its order is a < b < c < d, the same as A's.
    row = agreement(fixed("A", [0.9, 0.8, 0.7, 0.6]), fixed("B", [1, 2, 3, 4], higher=False))
    assert row.tau == pytest.approx(1.0)


def test_too_few_shared_methods_give_no_tau() -> None:
    row = agreement(fixed("A", [0.9, 0.8, 0.7, 0.6]), fixed("B", [0.9, 0.8]))
    assert row.methods == 2 and np.isnan(row.tau)


def simulated(rng: np.random.Generator, true: np.ndarray, noise: float) -> DataSet:
    """A board of k methods × 5 seeds × 50 classes of 20 queries: seed and method × class
    components of sd ``noise``, a class component shared by all methods (sd 10 points); its
    replicates from the verdicts' crossed bootstrap (150, to keep the test fast)."""
    k, seeds, classes = len(true), 5, 50
    p = (
        true[:, None, None]
        + rng.normal(0, noise, (k, seeds, 1))
        + rng.normal(0, 0.10, classes)[None, None, :]
        + rng.normal(0, noise, (k, 1, classes))
    )
    sums = rng.binomial(20, p.clip(0.01, 0.99)).astype(float)
    methods = tuple(f"m{i:02d}" for i in range(k))
    reps = crossed_replicates(methods, sums, np.full(classes, 20.0), 150, int(rng.integers(10**9)))
    return DataSet("sim", "0" * 64, "recall@1", True, pd.Series(reps.means, index=methods),
                   pd.Series(dtype=str), 0.03, reps)  # fmt: skip


def test_identical_true_rankings_agree() -> None:
    rng = np.random.default_rng(0)
    true = np.linspace(0.75, 0.45, 12)  # 12 methods, 2.7 points apart
    row = agreement(simulated(rng, true, 0.005), simulated(rng, true, 0.005))
    assert row.tau > 0.9
    assert 0 < row.tau_lo <= row.tau_hi <= 1


def unrelated_orders(rng: np.random.Generator, values: np.ndarray) -> tuple[np.ndarray, ...]:
    """Two random orders of ``values`` whose Kendall τ is exactly 0. Two independent random
    orders agree by chance (τ of sd 0.21 for 12 methods), and the bootstrap over seeds and
    classes is about these two boards, not about data sets in general: it should cover the
    τ of the true means, which is 0 only when the orders are unrelated in fact."""
    while True:
        a, b = rng.permutation(values), rng.permutation(values)
        if stats.kendalltau(a, b).statistic == 0:
            return a, b


def test_unrelated_rankings_cover_zero() -> None:
    rng = np.random.default_rng(1)
    covered = 0
    for _ in range(16):
        a, b = unrelated_orders(rng, np.linspace(0.75, 0.45, 12))
        row = agreement(simulated(rng, a, 0.01), simulated(rng, b, 0.01))
        covered += row.tau_lo <= 0 <= row.tau_hi
    assert covered >= 14  # a 95% interval (conservative: it leans towards 0)


def test_nemenyi_critical_difference_by_hand() -> None:
    # q_0.05 of the studentized range, infinite df: 5.012 for k = 20 (Harter's table);
    # Demšar 2006, Table 5(a), lists q_0.05 / √2 = 3.164 for k = 10.
    assert nemenyi_cd(20, 3) == pytest.approx(
        5.012 / math.sqrt(2) * math.sqrt(20 * 21 / 18), abs=0.01
    )
    assert nemenyi_cd(20, 3) == pytest.approx(17.1, abs=0.05)
    assert nemenyi_cd(10, 1) / math.sqrt(10 * 11 / 6) == pytest.approx(3.164, abs=1e-3)
    n = data_sets_needed(20, 3.0)
    assert nemenyi_cd(20, n) <= 3.0 < nemenyi_cd(20, n - 1)


def board(name: str, rates: dict[str, float], tuned: bool = True) -> list[Record]:
    """Final records of protocol ``name`` (its own data set) over 2 seeds, each method's
    Recall@1 hits the first ``rate`` of 40 queries in 10 classes, the same on both seeds."""
    classes = np.repeat(np.arange(10), 4)
    out = [
        rec(m, s, f"{zlib.crc32(name.encode()):08x}" * 8, name, m={"recall@1": p}).model_copy(
            update={
                "query_hits": QueryHits.encode(np.arange(40) < round(40 * p), classes),
                "search": {"trials": 8} if tuned else {},
            }
        )
        for m, p in rates.items()
        for s in (0, 1)
    ]
    return out


def test_report_side_by_side_with_a_missing_method(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(crossdata, "N_BOOT", 200)  # the report's 2,000 cost 1 s per pair
    records = (
        board("alpha", {"a": 0.9, "b": 0.8, "c": 0.7, "d": 0.6, "e": 0.95})
        + board("beta", {"a": 0.7, "b": 0.9, "c": 0.6, "d": 0.5})
        + board("alpha@defaults", {"a": 0.1, "b": 0.2}, tuned=False)
    )
    paths = write_cross_report(records, tmp_path)
    assert [p.name for p in paths] == [
        "cross-dataset.md", "cross-dataset.csv", "cross-dataset-agreement.csv",
    ]  # fmt: skip
    md = paths[0].read_text()
    rows = [line for line in md.splitlines() if line.startswith("| ")]
    e_row = next(r for r in rows if r.startswith("| e "))
    assert [c.strip() for c in e_row.strip("|").split("|")][3:5] == ["—", "—"]  # beta's cells
    assert rows.index(e_row) == 6  # after the header, separator and the 4 methods on both
    assert "Not compared: alpha@defaults" in md and "small synthetic" in md
    assert "2 data sets" in md
    # 4 methods on both boards: CD = q_0.05(4, ∞) / √2 · √(4 · 5 / (6 · 2)), q = 3.633
    cd = 3.633 / math.sqrt(2) * math.sqrt(20 / 12)
    assert f"Nemenyi critical difference (α = 0.05) is {cd:.1f} ranks (of at most 3)" in md
    csv = pd.read_csv(paths[1], index_col="method")
    assert pd.isna(csv.loc["e", "beta_rank"]) and csv.loc["e", "alpha_rank"] == 1
    assert csv.loc["a", "mean_rank"] == pytest.approx((2 + 2) / 2)
    agree = pd.read_csv(paths[2])
    assert agree.loc[0, "methods"] == 4 and agree.loc[0, "tau"] == pytest.approx(2 / 3)
    assert -1 <= agree.loc[0, "tau_lo"] <= agree.loc[0, "tau_hi"] <= 1


def test_one_data_set_is_shown_alone(tmp_path: Path) -> None:
    records = board("alpha", {"a": 0.9, "b": 0.8, "c": 0.7})
    # the untrained row names no search; read first, it must not make the board untuned
    untrained = rec("untrained", 0, records[0].protocol.hash, "alpha", m={"recall@1": 0.1})
    paths = write_cross_report([untrained, *records], tmp_path)
    md = paths[0].read_text()
    assert "One data set: alpha" in md and "| mean rank" not in md
    assert "| untrained " not in md and "Not compared" not in md
    assert "there is one data set, and even with 3 data sets and these 3 methods" in md
    assert len(pd.read_csv(paths[2])) == 0
