"""Records are never lost or torn (issue #9, point 5).

- An atomic write that fails midway (in the writer, at fsync, at the rename; a checkpoint too)
  leaves the previous file intact and no temp file; a writer killed with SIGKILL mid-write
  leaves the previous record intact and nothing a reader would take for a record.
- ``record_lock`` across real processes: the second process is refused while the first holds
  the run, gets it once the first lets go, and gets it when the first is SIGKILLed.
- Through the CLI: a ``dmlbench run`` skips a run another process holds and computes it later;
  it recomputes a damaged record; ``dmlbench report`` warns naming a damaged record and still
  reports the rest.
"""

from __future__ import annotations

import copy
import errno
import io
import json
import logging
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch

import dmlbench.atomic
from dmlbench.atomic import WriteError
from dmlbench.cli.main import main
from dmlbench.engine.checkpoint import Progress, load_checkpoint, save_checkpoint
from dmlbench.records import (
    ProtocolRef,
    Record,
    Timings,
    atomic_write_text,
    load_record,
    load_records,
    record_lock,
    save_record,
)
from tests.reliability.test_bad_input import Setup
from tests.reliability.test_hostile import snapshot


def record(method: str = "contrastive", recall: float = 0.5) -> Record:
    return Record(
        protocol=ProtocolRef(name="p", version=1, hash="a" * 64),
        data_fingerprint="f",
        method=method,
        seed=0,
        metrics={"recall@1": recall},
        timings=Timings(wall_seconds=1.0),
    )


# --------------------------------------------------------------------------- atomic writes


class DiskFull(OSError):
    pass


def fail(*args: Any) -> None:
    raise DiskFull(28, "No space left on device")


@pytest.mark.parametrize("where", ["writer", "fsync", "rename"])
def test_a_failed_write_keeps_the_previous_record_and_no_temp_file(
    where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = save_record(record(recall=0.5), tmp_path / "run" / "contrastive-seed0-final.json")
    before = path.read_bytes()
    newer = record(recall=0.9).model_dump_json(indent=2)
    if where == "writer":

        def half_then_fail(fh: Any) -> None:
            fh.write(newer[: len(newer) // 2].encode())
            fail()

        write = lambda: dmlbench.atomic.atomic_write(path, half_then_fail)  # noqa: E731
    else:
        monkeypatch.setattr(dmlbench.atomic.os, "fsync" if where == "fsync" else "replace", fail)
        write = lambda: atomic_write_text(path, newer)  # noqa: E731
    with pytest.raises(WriteError, match="cannot write \\(No space left on device\\)") as err:
        write()  # one line naming the file (a DmlbenchError), still an OSError with its errno
    assert err.value.errno == 28 and str(path) in str(err.value)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert os.listdir(path.parent) == [path.name]  # no temp file left behind
    assert load_record(path).metrics == {"recall@1": 0.5}


def test_a_failed_checkpoint_write_keeps_the_previous_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, loss = torch.nn.Linear(3, 2), torch.nn.Module()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    path = tmp_path / "checkpoints" / "run.pt"
    save_checkpoint(path, Progress(epoch=1, steps=10), model, loss, opt, None)
    real_save = torch.save

    def torn_save(obj: Any, fh: Any) -> None:
        real_save(obj, fh)
        fh.truncate(100)  # half a checkpoint on disk, then the disk fills up
        fail()

    monkeypatch.setattr(torch, "save", torn_save)
    with pytest.raises(DiskFull):
        save_checkpoint(path, Progress(epoch=2, steps=20), model, loss, opt, None)
    monkeypatch.undo()
    assert os.listdir(path.parent) == [path.name]
    assert load_checkpoint(path, model, loss, opt, None).epoch == 1


KILLED_WRITER = """
import sys, time
from pathlib import Path
from dmlbench.atomic import atomic_write

def write(fh):
    fh.write(b'{"schema_version": 1, "protocol": {"na')
    fh.flush()
    print("writing", flush=True)
    time.sleep(120)

atomic_write(Path(sys.argv[1]), write)
"""


def test_a_writer_killed_mid_write_leaves_the_previous_record(tmp_path: Path) -> None:
    path = save_record(record(recall=0.5), tmp_path / "contrastive-seed0-final.json")
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED_WRITER, str(path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "writing"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    records, problems = load_records(tmp_path)
    assert [r.metrics for r in records] == [{"recall@1": 0.5}] and problems == []
    leftovers = [p.name for p in tmp_path.iterdir() if p != path]
    assert len(leftovers) == 1 and leftovers[0].endswith(".tmp")  # never read as a record


# --------------------------------------------------------------------------- the run lock


HOLDER = """
import sys
from pathlib import Path
from dmlbench.records import record_lock

with record_lock(Path(sys.argv[1])) as owned:
    print(owned, flush=True)
    if owned and sys.argv[2:] == ["hold"]:
        sys.stdin.readline()
"""


def hold(path: Path) -> subprocess.Popen[str]:
    """A process that owns ``path``'s run until its stdin gets a line (or it is killed)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path), "hold"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "True"
    return proc


def try_lock(path: Path) -> bool:
    """Whether a fresh process gets ``path``'s run."""
    out = subprocess.run(
        [sys.executable, "-c", HOLDER, str(path)], capture_output=True, text=True, check=True
    )
    return {"True": True, "False": False}[out.stdout.strip()]


def release(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None
    proc.stdin.write("\n")
    proc.stdin.close()
    assert proc.wait(timeout=30) == 0


def test_record_lock_refuses_a_second_process_while_the_first_holds_it(tmp_path: Path) -> None:
    path = tmp_path / "results" / "contrastive-seed0-final.json"
    first = hold(path)
    try:
        assert try_lock(path) is False
        with record_lock(path) as owned:  # this process, too
            assert owned is False
        with record_lock(tmp_path / "results" / "other-seed0-final.json") as owned:
            assert owned is True  # another run of the same folder is free
    finally:
        release(first)
    assert try_lock(path) is True


def test_record_lock_leaves_no_lock_file_beside_the_records(tmp_path: Path) -> None:
    """filelock's lock files go to one hidden ``.locks`` folder; the records' folder itself
    holds records only (and the lock is free again after use)."""
    path = tmp_path / "results" / "contrastive-seed0-final.json"
    with record_lock(path) as owned:
        assert owned is True
        path.write_text("{}")
    assert sorted(p.name for p in path.parent.iterdir()) == [".locks", path.name]
    assert try_lock(path) is True


def test_record_lock_dies_with_its_process(tmp_path: Path) -> None:
    path = tmp_path / "contrastive-seed0-final.json"
    first = hold(path)
    first.send_signal(signal.SIGKILL)
    first.wait()
    assert try_lock(path) is True


# --------------------------------------------------------------------------- through the CLI


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Setup:
    """One smoke run on the CUB fixture (contrastive + untrained records), computed once."""
    setup = Setup(tmp_path_factory.mktemp("finished"))
    assert main(setup.argv()) == 0
    return setup


@pytest.fixture
def run(finished: Setup, tmp_path: Path) -> tuple[Setup, Path]:
    """A copy of the finished run's results folder, and its contrastive record."""
    setup = copy.copy(finished)
    setup.tmp, setup.results = tmp_path, tmp_path / "results"
    shutil.copytree(finished.results, setup.results)
    (path,) = setup.results.rglob("contrastive-seed0-final*.json")
    return setup, path


def test_run_skips_a_run_another_process_holds_then_waits_and_computes_it(
    run: tuple[Setup, Path], caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    """The run does the rest first, then waits for the held record; the holder lets go
    without writing it (it died), so the run computes it after the release, not beside it."""
    setup, path = run
    path.unlink()
    holder = hold(path)
    released: list[float] = []

    class Release(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "waiting for" in record.getMessage() and not released:
                assert not path.exists()  # not computed while the other process held it
                released.append(time.time())
                release(holder)

    handler = Release()
    logging.getLogger("dmlbench").addHandler(handler)
    try:
        with caplog.at_level(logging.WARNING):
            assert main(setup.argv()) == 0
    finally:
        logging.getLogger("dmlbench").removeHandler(handler)
        if not released:
            release(holder)
    assert f"{path.name} is being computed by another process; skipped" in caplog.text
    assert released and path.stat().st_mtime >= released[0]
    assert load_record(path).method == "contrastive"
    capsys.readouterr()


def test_run_recomputes_a_damaged_record(
    run: tuple[Setup, Path], caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    setup, path = run
    path.write_text(path.read_text()[:200])  # torn by something outside dmlbench
    with caplog.at_level(logging.WARNING):
        assert main(setup.argv()) == 0
    assert f"{path} is damaged" in caplog.text and "recomputing" in caplog.text
    assert load_record(path).method == "contrastive"
    capsys.readouterr()


def test_a_record_with_a_nan_metric_is_recomputed_and_never_reported_silently(
    run: tuple[Setup, Path], caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    """It was reused as finished by ``run`` and shown as "—" by ``report``."""
    setup, path = run
    data = json.loads(path.read_text())
    data["metrics"]["recall@1"] = float("nan")
    path.write_text(json.dumps(data))  # Python's JSON writes NaN, and reads it back
    why = "metric recall@1 is nan, not a finite number"
    argv = ["report", "--results-dir", str(setup.results), "--reports-dir", str(setup.tmp / "r")]
    assert main(argv) == 0
    captured = capsys.readouterr()
    warnings = [line for line in captured.err.splitlines() if line.startswith("warning:")]
    assert warnings == [f"warning: {path}: damaged record skipped ({why})"]
    assert "| untrained" in captured.out and "| contrastive" not in captured.out
    with caplog.at_level(logging.WARNING):
        assert main(setup.argv()) == 0
    assert f"{path} is damaged ({why}); recomputing" in caplog.text
    assert math.isfinite(load_record(path).metrics["recall@1"])
    capsys.readouterr()


def test_a_full_disk_while_keeping_the_weights_is_one_line_and_loses_nothing(
    run: tuple[Setup, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """torch's zip writer turned the ENOSPC of a write into a RuntimeError traceback ("unexpected
    pos"), exit 1. Here the disk is full after the first 4 kB of the kept weights' file."""
    setup, path = run
    (weights,) = path.parent.glob(f"artifacts/{path.stem}.pt")
    path.unlink()  # to be computed again, keeping its weights again
    before = snapshot(setup.results)
    real_temp, real_fdopen = dmlbench.atomic._create_temp, os.fdopen
    doomed: set[int] = set()

    def create_temp(target: Path) -> tuple[int, str]:
        fd, tmp = real_temp(target)
        if target == weights:
            doomed.add(fd)
        return fd, tmp

    class FullDisk(io.FileIO):  # the disk fills up after the first 4 kB of the file
        room = 4096

        def write(self, data: Any) -> int:
            if len(data) > self.room:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            self.room -= len(data)
            return super().write(data)

    def fdopen(fd: int, *args: Any, **kwargs: Any) -> Any:
        return FullDisk(fd, "wb") if fd in doomed else real_fdopen(fd, *args, **kwargs)

    monkeypatch.setattr(dmlbench.atomic, "_create_temp", create_temp)
    monkeypatch.setattr(dmlbench.atomic.os, "fdopen", fdopen)
    assert main(setup.argv()) == 2
    monkeypatch.undo()
    err = capsys.readouterr().err
    assert doomed and "Traceback" not in err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert errors == [f"error: {weights}: cannot write (No space left on device)"], err
    after = snapshot(setup.results)
    assert {name: after.get(name) for name in before} == before  # the kept weights intact
    assert not path.exists() and not list(setup.results.rglob(".*.tmp"))


def test_report_names_a_damaged_record_and_reports_the_rest(
    run: tuple[Setup, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    setup, path = run
    path.write_text(path.read_text()[:200])
    alien = path.with_name("alien-seed0-final.json")
    alien.write_text('{"hello": "world"}')
    argv = ["report", "--results-dir", str(setup.results), "--reports-dir", str(setup.tmp / "r")]
    assert main(argv) == 0
    captured = capsys.readouterr()
    warnings = [line for line in captured.err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 2 and "Traceback" not in captured.err
    assert any(w.startswith(f"warning: {path}: damaged record skipped") for w in warnings)
    assert any(w.startswith(f"warning: {alien}: damaged record skipped") for w in warnings)
    assert "| untrained" in captured.out and "| contrastive" not in captured.out
