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


def test_only_code_changes_make_a_commit_dirty(tmp_path: Path) -> None:
    """A regeneration rewrites results/ and reports/ between boards: the code is still clean."""

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    for rel in ("benchmark/x.py", "results/r.json", "reports/r.md"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("0")
    git("init", "-q")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "x", "--allow-empty")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "files")
    (tmp_path / "results/r.json").write_text("1")
    (tmp_path / "reports/r.md").write_text("1")
    (tmp_path / "untracked.py").write_text("1")
    code = tmp_path / "benchmark"
    clean = provenance.git_commit(code)
    assert clean is not None and not clean.endswith("+dirty")
    (tmp_path / "benchmark/x.py").write_text("1")
    assert provenance.git_commit(code) == clean + "+dirty"


def test_usable_cpus_and_environment() -> None:
    assert 1 <= provenance.usable_cpus() <= (os.cpu_count() or 1)
    env = provenance.environment("cpu", "fp32")
    assert env["device"] == "cpu" and env["precision"] == "fp32" and env["cuda"] is None
    assert env["packages"]["torch"] and env["simd"] and env["python"] == sys.version.split()[0]
    assert provenance.cpu_name()
