"""Interruptions: SIGINT/SIGTERM/SIGKILL mid-run, then the same command resumes and yields the
same numbers as an uninterrupted run with the same seed."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli.runner import run_cli

PROTOCOL = """\
name: resume-test
version: 1
data: {dataset: glyphs, params: {num_classes: 40}}
model: {backbone: small-cnn, embedding_size: 32}
batch: {size: 40}  # multi-similarity's 5 per class divides it
optim: {lr: 0.001, epochs: 4, schedule: cosine}
metrics: {recall_at: [1, 2], nmi: false}
search: {trials: 0}
seeds: [0]
"""


def command(protocol: Path, results: Path) -> list[str]:
    """``dmlbench run`` arguments; one torch thread, so that a run in this process
    (:mod:`tests.cli.runner`) and one in a child round alike."""
    return [
        "run",
        "--protocol",
        str(protocol),
        "--method",
        "multi-similarity",
        "--results-dir",
        str(results),
        "--reports-dir",
        str(results / "reports"),
        "--no-progress",
        "--threads",
        "1",
    ]


def child(argv: list[str]) -> list[str]:
    return [sys.executable, "-m", "dmlbench", *argv]


def final_record(results: Path) -> dict:
    (path,) = results.rglob("multi-similarity-seed0-final.json")
    return json.loads(path.read_text())


def wait_for_checkpoint(proc: subprocess.Popen, results: Path, timeout: float = 300) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if list(results.rglob("checkpoints/*.pt")):
            return
        if proc.poll() is not None:
            pytest.fail(f"run ended before its first checkpoint: {proc.stderr.read()}")  # type: ignore[union-attr]
        time.sleep(0.05)
    pytest.fail("no checkpoint appeared")


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("uninterrupted")
    protocol = root / "p.yaml"
    protocol.write_text(PROTOCOL)
    done = run_cli(*command(protocol, root / "results"))
    assert done.returncode == 0, done.stderr
    return protocol, final_record(root / "results")


@pytest.mark.slow
@pytest.mark.parametrize(
    "signum",
    [  # SIGINT and SIGTERM share one handler: the default run keeps one of them
        signal.SIGINT,
        pytest.param(signal.SIGTERM, marks=pytest.mark.heavy),
        signal.SIGKILL,
    ],
    ids=["SIGINT", "SIGTERM", "SIGKILL"],
)
def test_killed_run_resumes_to_the_same_numbers(uninterrupted, tmp_path: Path, signum: int) -> None:
    protocol, expected = uninterrupted
    results = tmp_path / "results"
    proc = subprocess.Popen(child(command(protocol, results)), stderr=subprocess.PIPE, text=True)
    wait_for_checkpoint(proc, results)  # epoch 0 done: the signal lands in a later epoch
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=300)
    if signum == signal.SIGKILL:
        assert proc.returncode == -signal.SIGKILL
    else:
        assert proc.returncode == 130, err
        assert "interrupted at step" in err and "Traceback" not in err
    # No half-written record: the interrupted method has a checkpoint, not a record.
    assert not list(results.rglob("multi-similarity-seed0-final.json"))
    assert list(results.rglob("checkpoints/*.pt"))

    rerun = run_cli(*command(protocol, results))
    assert rerun.returncode == 0, rerun.stderr
    got = final_record(results)
    assert got["metrics"] == expected["metrics"]
    assert got["curve"] == expected["curve"]
    assert not list(results.rglob("checkpoints/*.pt"))  # removed once the record exists
