"""The perf scripts' rules for figures that hold: no report written on a busy machine unless
``--noisy`` (and then it says so at its top), the load average at start and end, and every
timed figure the median of at least three interleaved rounds with min and max beside it.

The load average and the core count are faked, so these run the same on any machine; the
timed runs use tiny sizes. No test asserts a speed.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

import dmlbench.provenance
from dmlbench.perf import _common as perf_common
from dmlbench.perf import check as perf_check
from dmlbench.perf import evaluate as perf_evaluate
from dmlbench.perf import losses as perf_losses
from dmlbench.perf import train as perf_train
from dmlbench.perf._common import Spread
from tests.perf.tables import parse_table

TINY_LOSSES = ["--config", "24x16", "--steps", "1", "--rounds", "3", "--num-classes", "20"]
TINY_LOSSES += ["--method", "lifted", "--method", "npairs", "--budget", "5"]
SCRIPTS: dict[str, tuple[Callable[[Sequence[str]], int], list[str]]] = {
    "losses": (perf_losses.main, TINY_LOSSES),
    "evaluate": (perf_evaluate.main, ["--size", "tiny=300,8,30,0.8", "--no-memory"]),
    "train": (perf_train.main, ["--method", "contrastive", "--max-images", "64"]),
    "check": (perf_check.main, ["--method", "contrastive"]),
}


def fake_machine(monkeypatch: pytest.MonkeyPatch, load: float, cores: int = 2) -> None:
    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))
    monkeypatch.setattr(dmlbench.provenance, "usable_cpus", lambda: cores)
    # no CPU accounting either: what other processes (other tests) use must not leak in
    monkeypatch.setattr(perf_common, "_machine_cpu_seconds", lambda: None)


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_refuses_to_write_a_report_on_a_busy_machine(
    script: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    fake_machine(monkeypatch, load=1.5)  # > 2 cores / 2
    main, args = SCRIPTS[script]
    out = tmp_path / "report.md"
    assert main([*args, "--out", str(out)]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: load average 1.50")
    assert "--noisy" in lines[0] and "2 cores" in lines[0]
    assert captured.out == ""  # refused before measuring anything
    assert not out.exists()


def test_half_the_cores_is_still_quiet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_machine(monkeypatch, load=1.0)  # = 2 cores / 2: not more than half
    out = tmp_path / "losses.md"
    assert perf_losses.main([*TINY_LOSSES, "--out", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert "Noisy" not in text
    assert "- load average at start (1, 5, 15 min): 1.00, 1.00, 1.00" in text
    assert "- load average at the end (1, 5, 15 min): 1.00, 1.00, 1.00" in text
    assert capsys.readouterr().err == ""


def test_noisy_writes_and_says_so_at_the_top(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_machine(monkeypatch, load=3.25)
    out = tmp_path / "losses.md"
    assert perf_losses.main([*TINY_LOSSES, "--out", str(out), "--noisy"]) == 0
    title, blank, banner = out.read_text(encoding="utf-8").splitlines()[:3]
    assert (title, blank) == ("# dmlbench.perf.losses", "")
    assert banner.startswith("> **Noisy measurement**: 1-minute load average 3.25 at the start")


def test_printing_without_a_report_is_not_refused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_machine(monkeypatch, load=8.0)
    assert perf_losses.main(TINY_LOSSES) == 0
    assert capsys.readouterr().out.startswith("# dmlbench.perf.losses\n\n> **Noisy measurement**")


def test_timed_figures_are_medians_with_min_and_max(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_machine(monkeypatch, load=0.0)
    assert perf_losses.main(TINY_LOSSES) == 0
    printed = capsys.readouterr().out
    assert "median of 3 interleaved rounds" in printed
    rows = [r for r in parse_table(printed) if r["figure"].endswith("ms/step")]
    assert {r["figure"].split(" ")[0] for r in rows} == {"lifted", "npairs"}
    for row in rows:
        for side in ("ours", "peer"):
            if row[side] == "—":
                assert row[f"{side} min – max"] == "—"
                continue
            low, high = (float(v) for v in row[f"{side} min – max"].split(" – "))
            assert low <= float(row[side]) <= high
    lifted = next(r for r in rows if r["figure"].startswith("lifted"))
    ratio = float(lifted["ours"]) / float(lifted["peer"])  # of the medians, shown to 2 places
    assert float(lifted["ratio"]) == pytest.approx(ratio, abs=0.005 + 0.01 * ratio)


@pytest.mark.parametrize("script", sorted(set(SCRIPTS) - {"check"}))
def test_fewer_than_three_rounds_are_refused(
    script: str, capsys: pytest.CaptureFixture[str]
) -> None:
    main, args = SCRIPTS[script]
    option = "--rounds" if script == "losses" else "--repeats"
    with pytest.raises(SystemExit) as exit_:
        main([*args, option, "2"])
    assert exit_.value.code == 2
    assert "at least 3" in capsys.readouterr().err


def test_spread_is_median_min_max() -> None:
    s = Spread.of([0.004, 0.001, 0.003, 0.010], scale=1e3)
    assert (s.median, s.low, s.high) == pytest.approx((3.5, 1.0, 10.0))
    with pytest.raises(ValueError):
        Spread.of([])


def test_losses_above_the_goal_are_listed_with_their_reason() -> None:
    fast, slow = Spread(1.0, 0.9, 1.2), Spread(40.0, 38.0, 45.0)
    rows = [
        ("structured-clustering", (180, 512), slow),
        ("npairs", (180, 512), fast),
        ("npairs", (120, 64), slow),  # only 180 × 512 counts
        ("log-ratio", (180, 512), slow),
    ]
    lines = perf_losses.over_goal(rows)
    assert len(lines) == 2
    assert lines[0].startswith("- structured-clustering: 40.0 ms — greedy loss-augmented")
    assert lines[1] == "- log-ratio: 40.0 ms — NO REASON RECORDED"
