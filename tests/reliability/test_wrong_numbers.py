"""The hostile pass's silently wrong numbers, each as the user typed it: no record that
differs in what was run shares a row, and a table never shows a number nothing produced."""

from __future__ import annotations

from pathlib import Path

import pytest

from dmlbench.cli.main import main


@pytest.mark.slow
def test_two_max_steps_of_one_method_and_seed_are_two_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["run", "--method", "contrastive", "--seed", "0", "--no-search", "--no-progress"]
    base += ["--results-dir", str(tmp_path / "r"), "--reports-dir", str(tmp_path / "rep")]
    assert main([*base, "--max-steps", "3"]) == 0
    capsys.readouterr()
    assert main([*base, "--max-steps", "6"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| contrastive")]
    assert len(rows) == 2, out
    assert any("(max_steps=3)" in r for r in rows) and any("(max_steps=6)" in r for r in rows)
    assert all(r.rstrip(" |").endswith("1") for r in rows)  # one seed each, not a mean of two
