"""Progress lines off a terminal: one per epoch, trial and final run, with elapsed and ETA."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from dmlbench.engine import progress
from dmlbench.records import ProtocolRef, Record, Timings


def _record(method: str, seed: int, wall: float, steps: int, created: str | None = None) -> Record:
    extra: dict[str, Any] = {} if created is None else {"created": created}
    return Record(
        protocol=ProtocolRef(name="p", version=1, hash="0" * 64),
        data_fingerprint="f",
        method=method,
        seed=seed,
        metrics={"recall@1": 0.5, "ci_recall@1_lo": 0.4},
        timings=Timings(wall_seconds=wall, steps=steps),
        **extra,
    )


def test_clock_and_eta() -> None:
    assert [progress.clock(s) for s in (None, 4.4, 65, 7260)] == ["?", "4s", "1m05s", "2h01m"]
    assert progress.eta(10.0, 0, 5) is None
    assert progress.eta(10.0, 2, 5) == pytest.approx(15.0)


def test_run_tally_lines_and_eta_per_method(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(progress.PROGRESS, logger="dmlbench.progress")
    tally = progress.RunTally(["untrained", "a", "b"], [0, 1])
    tally.finished(_record("untrained", 0, 2.0, steps=0))
    tally.finished(_record("a", 0, 60.0, steps=10))
    # left: b0 (mean of trained runs: 60), untrained1 (2), a1 (60), b1 (60)
    assert tally.eta() == pytest.approx(182.0)
    tally.finished(None)  # skipped: another process computes it
    old = (datetime.now(timezone.utc) - timedelta(days=1)).isoformat()
    tally.finished(_record("b", 0, 999.0, steps=10, created=old))  # reused: no line, no rate
    assert tally.eta() == pytest.approx(122.0)
    lines = [r.getMessage() for r in caplog.records if r.name == "dmlbench.progress"]
    assert len(lines) == 2
    assert lines[1].startswith("a seed 0: recall@1 0.5000 (took 1m00s); ")
    assert lines[1].endswith("ETA 3m02s")


def test_study_clock_counts_every_worker_s_trials() -> None:
    from dmlbench.search.worker import _StudyClock

    clock = _StudyClock(budget=8, finished_at_start=2, start=0.0)
    text = clock.tick(4)  # two trials (here or elsewhere) since this worker joined
    assert text.startswith("(4/8; ") and "ETA" in text and "?" not in text


def test_epoch_lines_off_a_terminal_and_the_tracker_gets_each_point(
    tiny_glyphs_protocol: Any, caplog: pytest.LogCaptureFixture
) -> None:
    from dmlbench.data import load_data
    from dmlbench.engine.train import train
    from dmlbench.methods import create_method

    caplog.set_level(logging.INFO)
    protocol = tiny_glyphs_protocol.with_overrides({"optim.epochs": 2, "optim.steps_per_epoch": 2})
    data = load_data(protocol)
    method = create_method("contrastive", None, data.train.num_classes, 32)

    class Points:
        def __init__(self) -> None:
            self.seen: list[tuple[dict[str, float], int]] = []

        def scalars(self, values: dict[str, float], step: int) -> None:
            self.seen.append((dict(values), step))

        def hparams(self, params: Any, metrics: Any) -> None:
            pass

        def close(self) -> None:
            pass

    points = Points()
    result = train(protocol, method, data.train, 0, track=points)  # stderr: not a terminal
    lines = [r.getMessage() for r in caplog.records if r.name == "dmlbench.progress"]
    assert [line.split(":")[0] for line in lines] == [
        "  contrastive seed 0 epoch 1/2",
        "  contrastive seed 0 epoch 2/2",
    ]
    assert all("loss " in line and "elapsed, ETA" in line for line in lines)
    assert points.seen == [({"loss": p["loss"]}, int(p["epoch"])) for p in result.curve]
    quiet = train(protocol, method, data.train, 0, progress=False)  # --no-progress: no lines
    assert len([r for r in caplog.records if r.name == "dmlbench.progress"]) == 2
    assert quiet.curve == result.curve  # progress and tracking move no number


def test_reset_logging_leaves_nothing_of_a_configured_log_file(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second command in one process must not write into the first one's log file."""
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])
    log = tmp_path / "first.log"
    progress.configure_logging(log_file=log)
    assert progress.current_setup() is not None
    progress.line("first command")
    progress.reset_logging()
    progress.line("second command")
    assert "first command" in log.read_text() and "second command" not in log.read_text()
    assert progress.current_setup() is None and root.handlers == []
