"""What a record says about where it was made: the command by its program's name, the commit
of the checkout (``+dirty`` with uncommitted changes), the CPUs this process may use."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import dmlbench
from dmlbench import provenance


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["/venv/bin/dmlbench", "run", "--method", "a b"], "dmlbench run --method 'a b'"),
        (["/x/benchmark/__main__.py", "check"], "dmlbench check"),
        ([], "python"),
    ],
)
def test_command_line_names_the_program_not_its_path(
    argv: list[str], expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "argv", argv)
    assert provenance.command_line() == expected


def test_git_commit_is_the_checkouts_head() -> None:
    here = Path(dmlbench.__file__).parent
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True)
    if head.returncode != 0:
        pytest.skip("dmlbench is not installed from a git checkout here")
    commit = provenance.git_commit()
    assert commit is not None and commit.removesuffix("+dirty") == head.stdout.strip()
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        cwd=here,
        capture_output=True,
        text=True,
    ).stdout.strip()
    assert commit.endswith("+dirty") == bool(status)


def test_usable_cpus_and_environment() -> None:
    assert 1 <= provenance.usable_cpus() <= (os.cpu_count() or 1)
    env = provenance.environment("cpu", "fp32")
    assert env["device"] == "cpu" and env["precision"] == "fp32" and env["cuda"] is None
    assert env["packages"]["torch"] and env["simd"] and env["python"] == sys.version.split()[0]
    assert provenance.cpu_name()
