"""Across data sets (dmlbench.report.crossdata): hand-computed τ and exact permutation
p-values, the permutation test's rate under the null, Holm by hand, a method missing on one
board, one data set alone, and the Nemenyi number."""

from __future__ import annotations

import math
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dmlbench.records import QueryHits, Record
from dmlbench.report import crossdata
from dmlbench.report.crossdata import (
    Agreement,
    DataSet,
    agreement,
    data_sets_needed,
    holm,
    nemenyi_cd,
    write_cross_report,
)
from tests.report.test_build import rec

METHODS = tuple("abcdefghijklmnop")


def fixed(name: str, means: list[float] | np.ndarray, higher: bool = True) -> DataSet:
    """A board with these means (its verdicts are not needed here)."""
    m = np.asarray(means, dtype=float)
    index = list(METHODS[: len(m)])
    return DataSet(name, f"{zlib.crc32(name.encode()):064d}", "recall@1", higher,
                   pd.Series(m, index=index), pd.Series(dtype=str), 0.03)  # fmt: skip


def test_hand_computed_tau_and_exact_permutation_p_for_four_methods() -> None:
    # A: a > b > c > d; B: b > a > c > d. Of the 6 pairs only (a, b) is discordant:
    # τ = (5 − 1) / 6 = 2/3. Of the 24 orders of B, τ ≥ 2/3 for the identity and the 3
    # adjacent swaps: p = 4/24.
    row = agreement(fixed("A", [0.9, 0.8, 0.7, 0.6]), fixed("B", [0.7, 0.9, 0.6, 0.5]))
    assert row.methods == 4 and row.permutations == 24
    assert row.tau == pytest.approx(2 / 3)
    assert row.p_value == pytest.approx(4 / 24)
    # B ties a and b: 5 concordant, 0 discordant, one tie in B: τ-b = 5 / √(6 · 5).
    tied = agreement(fixed("A", [0.9, 0.8, 0.7, 0.6]), fixed("B", [0.7, 0.7, 0.6, 0.5]))
    assert tied.tau == pytest.approx(5 / math.sqrt(30))


def test_lower_is_better_is_ranked_the_other_way() -> None:
    # B's metric is a distance: its order is a < b < c < d, the same as A's.
    row = agreement(fixed("A", [0.9, 0.8, 0.7, 0.6]), fixed("B", [1, 2, 3, 4], higher=False))
    assert row.tau == pytest.approx(1.0) and row.p_value == pytest.approx(1 / 24)


def test_too_few_shared_methods_give_no_tau() -> None:
    row = agreement(fixed("A", [0.9, 0.8, 0.7, 0.6]), fixed("B", [0.9, 0.8]))
    assert row.methods == 2 and np.isnan(row.tau) and np.isnan(row.p_value)


def test_permutation_p_is_calibrated_for_unrelated_orders() -> None:
    """300 pairs of independent random orders of 12 methods (the null): p ≤ 0.05 in at most
    0.05 + 2 Monte-Carlo sd of them, and the same orders agreeing give p < 0.001."""
    rng = np.random.default_rng(1)
    values = np.linspace(0.75, 0.45, 12)
    small = 0
    for i in range(300):
        a, b = fixed(f"A{i}", rng.permutation(values)), fixed(f"B{i}", rng.permutation(values))
        small += agreement(a, b, n=999).p_value <= 0.05
    assert small / 300 <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / 300)
    same = agreement(fixed("A", values), fixed("B", values + 0.01))
    assert same.tau == pytest.approx(1.0) and same.p_value < 1e-3


def test_holm_over_the_pairs_by_hand() -> None:
    rows = [Agreement("a", "b", 5, 0.5, p) for p in (0.01, 0.04, 0.03)]
    rows.append(Agreement("a", "c", 2))  # untested: left out of the family
    out = holm(rows)
    assert [r.p_holm for r in out[:3]] == pytest.approx([0.03, 0.06, 0.06])
    assert math.isnan(out[3].p_holm)


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
    monkeypatch.setattr(crossdata, "PERMUTATIONS", 200)
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
    assert agree.loc[0, "p_value"] == pytest.approx(4 / 24)  # exact: 4 methods
    assert agree.loc[0, "p_holm"] == pytest.approx(4 / 24)  # one pair


def test_one_data_set_is_shown_alone(tmp_path: Path) -> None:
    records = board("alpha", {"a": 0.9, "b": 0.8, "c": 0.7})
    # the untrained row names no search; read first, it must not make the board untuned
    untrained, pixels = (
        rec(row, 0, records[0].protocol.hash, "alpha", m={"recall@1": 0.1})
        for row in ("untrained", "pixels")
    )
    paths = write_cross_report([untrained, *records, pixels], tmp_path)
    md = paths[0].read_text()
    assert "One data set: alpha" in md and "| mean rank" not in md
    assert "| untrained " not in md and "| pixels " not in md and "Not compared" not in md
    assert "there is one data set, and even with 3 data sets and these 3 methods" in md
    assert len(pd.read_csv(paths[2])) == 0


def test_boards_that_fail_or_escape_the_gate_are_not_compared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A board whose best method clears the rows that need no learning by less than the gate's
    10 points, or that lacks the pixels row, is named and left out; one that passes stays."""
    monkeypatch.setattr(crossdata, "PERMUTATIONS", 200)
    rates = {"a": 0.9, "b": 0.8, "c": 0.7}

    def rows(name: str, values: dict[str, float]) -> list[Record]:
        h = board(name, rates)[0].protocol.hash
        return [rec(m, s, h, name, m={"recall@1": v}) for m, v in values.items() for s in (0, 1)]

    records = (
        board("alpha", rates) + rows("alpha", {"pixels": 0.3, "untrained": 0.2})
        + board("beta", {"a": 0.7, "b": 0.9, "c": 0.6})
        + rows("beta", {"pixels": 0.3, "untrained": 0.2})
        + board("gamma", rates) + rows("gamma", {"pixels": 0.85, "untrained": 0.2})
        + board("delta", rates) + rows("delta", {"untrained": 0.2})
    )  # fmt: skip
    md = write_cross_report(records, tmp_path)[0].read_text()
    assert "2 data sets" in md
    assert (
        "Not compared: gamma" in md and "below the gate (best method +5.0 points over pixels" in md
    )
    assert "Not compared: delta" in md and "not judged by the gate (best method +70.0" in md
    assert "no pixels row" in md
    assert "Not compared: alpha" not in md and "Not compared: beta" not in md
