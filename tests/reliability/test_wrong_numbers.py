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


@pytest.mark.parametrize(
    ("data", "says"),
    [
        ("{{root: {root}, params: {{test_classes: [101, 101]}}}}", "1 class (101)"),
        (
            "{{root: {root}, params: {{test_classes: [101, 101], train_classes: [1, 3]}}}}",
            "1 class",
        ),
    ],
    ids=["one-test-class", "one-test-class-narrow-train"],
)
def test_a_test_split_where_every_metric_is_trivial_is_refused(
    data: str,
    says: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A CUB test split of one class scored 100% on every metric, trained or not, and exited
    0: now one line, exit 2, before any training, and nothing written."""
    from tests.reliability.test_bad_input import Setup, error_line

    monkeypatch.setenv("DMLBENCH_CACHE", str(tmp_path / "cache"))
    s = Setup(tmp_path)
    text = s.protocol.read_text().replace(
        f"data: {{root: {s.root}}}", "data: " + data.format(root=s.root)
    )
    s.protocol.write_text(text)
    assert main(s.argv()) == 2
    line = error_line(capsys)
    assert "test split" in line and says in line and "trivially 100%" in line
    assert not (s.results.exists() and list(s.results.rglob("*.json")))  # nothing written
