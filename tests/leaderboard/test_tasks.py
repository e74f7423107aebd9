"""Pool workers of `dmlbench check --update --jobs N` end with the process that spawned them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")

PARENT = textwrap.dedent(
    """
    import multiprocessing, os, signal, sys, time
    from concurrent.futures import ProcessPoolExecutor
    from dmlbench.leaderboard.tasks import exit_with_parent

    if __name__ == "__main__":
        watched = sys.argv[1] == "watched"
        pool = ProcessPoolExecutor(
            1,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=exit_with_parent if watched else None,
            initargs=(0.1,) if watched else (),
        )
        pid = pool.submit(os.getpid).result()
        pool.submit(time.sleep, 30)  # the task a killed parent leaves its worker
        print(pid, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """
)


def _alive(pid: int) -> bool:
    """Running or sleeping: a zombie waiting for its reaper has ended."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _orphan(tmp_path: Path, mode: str) -> int:
    script = tmp_path / "parent.py"
    script.write_text(PARENT, encoding="utf-8")
    # read one line, not to the end: an orphan keeps the pipe open
    with subprocess.Popen(
        [sys.executable, str(script), mode], stdout=subprocess.PIPE, text=True
    ) as parent:
        assert parent.stdout is not None
        pid = int(parent.stdout.readline())
        assert parent.wait(timeout=120) == -signal.SIGKILL
        parent.stdout.close()
    return pid


def _ended_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.1)
    return False


def test_a_worker_ends_when_its_parent_is_killed(tmp_path: Path) -> None:
    assert _ended_within(_orphan(tmp_path, "watched"), 10.0)


def test_without_the_watch_the_worker_runs_on(tmp_path: Path) -> None:
    """The failure the initializer prevents: a plain pool worker outlives a killed parent."""
    pid = _orphan(tmp_path, "plain")
    try:
        assert not _ended_within(pid, 2.0)
    finally:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
