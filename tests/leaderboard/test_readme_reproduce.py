"""The README's command for a committed defaults row reproduces that row bit for bit, on any
x86-64 machine under the portable setting: the committed record on the numeric path it was
made on, the path's recorded re-run on the other vendor's
(:func:`dmlbench.leaderboard.check.reference_metrics`); elsewhere re-runs drift by seed-like
noise (:func:`dmlbench.leaderboard.check.off_path`)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from dmlbench.cli.main import main
from dmlbench.leaderboard import boards, check, tolerances
from dmlbench.records import load_record, load_records

REPO = Path(__file__).resolve().parents[2]
MARK = "# a defaults row"


def readme_defaults_command() -> list[str]:
    [line] = [
        line
        for line in (REPO / "README.md").read_text(encoding="utf-8").splitlines()
        if MARK in line
    ]
    return shlex.split(line, comments=True)


def test_the_readme_command_is_a_one_thread_defaults_run_of_a_board_entry() -> None:
    argv = readme_defaults_command()
    assert argv[:2] == ["dmlbench", "run"] and "--no-search" in argv
    assert argv[argv.index("--threads") + 1] == "1"  # the board's thread count
    method = argv[argv.index("--method") + 1]
    assert method in boards.board_methods("glyphs-mini@defaults")


@pytest.mark.slow
def test_the_readme_command_reproduces_the_committed_row(tmp_path: Path) -> None:
    tol = tolerances.load_tolerances(REPO / "results" / "leaderboard")
    assert tol is not None
    if why := check.off_path(tol):
        pytest.skip(f"{why}: not bit-identical")
    argv = readme_defaults_command()[1:]
    results = tmp_path / "results"
    argv += ["--results-dir", str(results), "--reports-dir", str(tmp_path / "reports")]
    assert main([*argv, "--no-progress"]) == 0
    method, seed = argv[argv.index("--method") + 1], int(argv[argv.index("--seed") + 1])
    [ours] = [r for r in load_records(results)[0] if r.method == method and r.stage == "final"]
    [path] = (REPO / "results" / "leaderboard" / "glyphs-mini@defaults").rglob(
        f"{method}-seed{seed}-final.json"
    )
    committed = load_record(path)
    assert ours.protocol.hash == committed.protocol.hash
    assert ours.env["torch_threads"] == 1
    _, board = check.load_leaderboard(REPO / "results" / "leaderboard")
    reference, _ = check.reference_metrics(REPO / "results" / "leaderboard", tol, board)
    assert ours.metrics == reference["glyphs-mini@defaults", method]  # to the last bit
