"""Work shared between processes: the end-of-run table holds every record on disk for the
protocol, and a killed search worker does not fail a run whose budget completed."""

from __future__ import annotations

import fcntl
import logging
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from dmlbench.cli.main import main


def test_the_table_written_at_the_end_holds_other_processes_records(
    tiny_glyphs_protocol: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two runs on one folder (here one after the other, as two processes would each finish):
    the second's table has both methods, not only its own."""
    protocol = tmp_path / "tiny.yaml"
    protocol.write_text(yaml.safe_dump(tiny_glyphs_protocol.model_dump(mode="json")))
    common = [
        "run", "--protocol", str(protocol), "--seed", "0", "--max-steps", "1", "--no-progress",
        "--results-dir", str(tmp_path / "r"), "--reports-dir", str(tmp_path / "rep"),
    ]  # fmt: skip
    assert main([*common, "--method", "contrastive"]) == 0
    assert main([*common, "--method", "triplet-semihard"]) == 0
    table = next((tmp_path / "rep").glob("glyphs-tiny-*-overrides.md")).read_text()
    assert "| contrastive" in table and "| triplet-semihard" in table
    capsys.readouterr()


class _Killed:
    exitcode = -9

    def join(self) -> None:
        return None


def test_a_killed_worker_does_not_fail_a_completed_budget(
    tiny_glyphs_protocol: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    import dmlbench.search.tuning as sw  # where tune looks spawn_workers up
    from dmlbench.data import load_data
    from dmlbench.options import RunOptions, SearchOptions
    from dmlbench.search import tune

    monkeypatch.setattr(sw, "spawn_workers", lambda *a, **k: [_Killed()])
    protocol = tiny_glyphs_protocol.with_overrides({"search.trials": 2})
    data = load_data(protocol)
    run = RunOptions(results_dir=tmp_path, max_steps=1, progress=False)
    with caplog.at_level(logging.WARNING):
        chosen = tune(
            protocol,
            "contrastive",
            data.train,
            data.fingerprint,
            replace(run, search=SearchOptions(workers=2)),
        )
    assert chosen.hparams
    assert "the budget completed without them" in caplog.text


class _Flag(logging.Handler):
    def __init__(self, text: str) -> None:
        super().__init__()
        self.text, self.seen = text, threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.seen.set()


def test_a_run_waits_for_the_record_another_process_computes(
    tiny_glyphs_protocol: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A record locked by another process is skipped, then waited for at the end of the run:
    the table lists it. Here the other process lets go without writing (it died), so the
    waiting run computes the record itself — after the lock was released, not beside it."""
    from dmlbench.records import lock_path, record_path

    protocol = tmp_path / "tiny.yaml"
    protocol.write_text(yaml.safe_dump(tiny_glyphs_protocol.model_dump(mode="json")))
    path = record_path(
        tmp_path / "r", "glyphs-tiny", tiny_glyphs_protocol.hash, "contrastive", 0, "final",
        {"max_steps": 1},
    )  # fmt: skip
    lock_path(path).parent.mkdir(parents=True)
    other = open(lock_path(path), "a+")  # noqa: SIM115
    fcntl.flock(other.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)  # "the other process"
    flag = _Flag("waiting for")
    logging.getLogger("dmlbench").addHandler(flag)
    released: list[float] = []

    def let_go() -> None:
        assert flag.seen.wait(120)
        released.append(time.time())
        other.close()

    thread = threading.Thread(target=let_go)
    thread.start()
    try:
        code = main([
            "run", "--protocol", str(protocol), "--seed", "0", "--max-steps", "1",
            "--no-progress", "--method", "contrastive", "--results-dir", str(tmp_path / "r"),
            "--reports-dir", str(tmp_path / "rep"),
        ])  # fmt: skip
    finally:
        thread.join()
        logging.getLogger("dmlbench").removeHandler(flag)
    assert code == 0 and released
    assert path.stat().st_mtime >= released[0]
    table = next((tmp_path / "rep").glob("glyphs-tiny-*-overrides.md")).read_text()
    assert "| contrastive" in table
    capsys.readouterr()
