"""The in-process runner behaves as a new process would, and leaves this one as it found it."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from tests.cli.runner import run_cli


def test_an_escaping_exception_is_a_traceback_and_status_1(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(argv: object) -> int:
        raise RuntimeError("not a DmlbenchError")

    monkeypatch.setattr("dmlbench.cli.main.main", boom)
    proc = run_cli("list", "methods")
    assert proc.returncode == 1
    assert "Traceback" in proc.stderr and "RuntimeError: not a DmlbenchError" in proc.stderr


def test_usage_errors_and_help_exit_as_argparse_says() -> None:
    assert run_cli("--no-such-flag").returncode == 2
    helped = run_cli("list", "--help")
    assert helped.returncode == 0 and "usage: dmlbench list" in helped.stdout


def test_environment_folder_argv_and_logging_are_restored(tmp_path: Path) -> None:
    root = logging.getLogger()
    before = (dict(os.environ), os.getcwd(), root.handlers[:], root.level)
    proc = run_cli(
        "--log-file", tmp_path / "log.txt", "validate", tmp_path / "missing.yaml",
        env={"DMLBENCH_CACHE": str(tmp_path / "c")}, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 2 and proc.stderr.startswith("error: ")
    assert (tmp_path / "log.txt").read_text().strip().endswith(proc.stderr.strip())
    assert (dict(os.environ), os.getcwd(), root.handlers, root.level) == before
