"""The README's first screen shows the committed tuned board, cut from its report."""

from __future__ import annotations

from pathlib import Path

import pytest

from dmlbench.errors import DmlbenchError
from dmlbench.leaderboard import boards, readme

REPO = Path(__file__).resolve().parents[2]
REPORTS = REPO / "reports" / "leaderboard"


def test_readme_shows_the_committed_tuned_board() -> None:
    """The block between the markers is exactly the excerpt of the committed report: the
    tuned glyphs-mini board at the boards' seed count, its significance and stability lines and the link."""
    report = readme.report_path(REPORTS)
    expected = readme.excerpt(report, link="reports/leaderboard/index.html")
    shown = readme.block(REPO / "README.md")
    assert shown == expected, "README board is stale: python -m dmlbench.leaderboard.readme"
    seeds = len(boards.TUNED_SEEDS)
    version = boards.leaderboard_protocol("glyphs-mini").version
    assert (
        f"glyphs-mini v{version}, tuned: 3 searches of 4 trials" in shown
        and f"over {seeds} seeds" in shown
    )
    no_learning = [line for line in shown.splitlines() if readme._is_baseline_row(line)]
    assert no_learning and shown.count("\n|") == 2 + readme.ROWS + len(no_learning)
    assert any(line.startswith("| untrained ") for line in no_learning)
    assert (
        "Stability over seeds" in shown
        and "over the test queries' classes, crossed" in shown
        and "(reports/leaderboard/index.html)" in shown
    )
    head = (REPO / "README.md").read_text(encoding="utf-8").split(readme.BEGIN)[0]
    assert head.count("\n") < 20, "the board is on the README's first screen"


def test_write_replaces_only_the_block(tmp_path: Path) -> None:
    page = tmp_path / "README.md"
    page.write_text(
        f"# title\n\n{readme.BEGIN}\nSTALE BLOCK\n{readme.END}\n\n"
        f"{readme.GATE_BEGIN}\nSTALE\n{readme.GATE_END}\n\n"
        f"{readme.ACROSS_BEGIN}\nSTALE\n{readme.ACROSS_END}\n\nrest\n",
        encoding="utf-8",
    )
    assert readme.main(["--readme", str(page), "--reports-dir", str(REPORTS)]) == 0
    text = page.read_text(encoding="utf-8")
    assert text.startswith("# title\n\n") and text.endswith("\n\nrest\n")
    assert "STALE BLOCK" not in readme.block(page) and ", tuned: " in readme.block(page)
    across = readme.block(page, readme.ACROSS_BEGIN, readme.ACROSS_END)
    assert "STALE" not in across and "Across data sets" in across
    gates = readme.block(page, readme.GATE_BEGIN, readme.GATE_END)
    assert "STALE" not in gates and "rows that need no learning" in gates


def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "README.md"
    page.write_text("no markers\n", encoding="utf-8")
    assert readme.main(["--readme", str(page), "--reports-dir", str(REPORTS)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(page) in err and "markers" in err
    assert page.read_text(encoding="utf-8") == "no markers\n"
    with pytest.raises(DmlbenchError, match="no such report"):
        readme.excerpt(tmp_path / "missing.md", link="x")


def test_readme_shows_the_committed_comparison_across_data_sets() -> None:
    """The across block is the class-label section of the committed cross-data-set report:
    the data sets compared, the caveat, the top rows, and a link to the whole report."""
    expected = readme.across_excerpt(
        REPORTS / readme.ACROSS, link="reports/leaderboard/cross-dataset.md"
    )
    shown = readme.block(REPO / "README.md", readme.ACROSS_BEGIN, readme.ACROSS_END)
    assert shown == expected, "README is stale: python -m dmlbench.leaderboard.readme"
    assert "glyphs-mini" in shown and "not on CUB-200" in shown
    assert shown.count("\n|") == 2 + readme.ROWS
    section = (REPORTS / readme.ACROSS).read_text(encoding="utf-8").split("## Continuous")[0]
    methods = section.split("| method ")[1].split("\n\n")[0].count("\n|") - 1
    assert f"of {methods} methods" in shown  # the methods' table, not the τ table below it
    taus = section.split("Rank agreement")[1].split("\n\n")[1].count("\n|") - 1
    sets = int(shown.split(" data sets:")[0].split()[-1])  # "4 data sets: ..."
    assert shown.split("Rank agreement")[1].count(" vs ") == taus == sets * (sets - 1) // 2
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert text.index(readme.END) < text.index(readme.ACROSS_BEGIN), "beside the board"


def test_across_excerpt_refuses_a_report_without_its_section(tmp_path: Path) -> None:
    report = tmp_path / "cross-dataset.md"
    report.write_text("# Across data sets\n\n## Continuous labels\n\n| a |\n", encoding="utf-8")
    with pytest.raises(DmlbenchError, match="Class labels"):
        readme.across_excerpt(report, link="x")


def test_readme_shows_every_board_against_the_rows_that_need_no_learning() -> None:
    """The gate block is the committed gate table: one row per board of the leaderboard, each
    with its best method, its best row that needs no learning and the gain between them, on
    the first screen between the board and the comparison across data sets."""
    expected = readme.gate_excerpt(REPORTS / readme.GATE, link="reports/leaderboard/gate.md")
    shown = readme.block(REPO / "README.md", readme.GATE_BEGIN, readme.GATE_END)
    assert shown == expected, "README is stale: python -m dmlbench.leaderboard.readme"
    rows = [line for line in shown.splitlines() if line.startswith("| ")][2:]  # header, rule
    assert sorted(r.split("|")[1].split("(")[0].strip() for r in rows) == sorted(boards.LEADERBOARD)
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert text.index(readme.END) < text.index(readme.GATE_BEGIN) < text.index(readme.ACROSS_BEGIN)


def test_gate_excerpt_refuses_a_missing_report(tmp_path: Path) -> None:
    with pytest.raises(DmlbenchError, match="no such report"):
        readme.gate_excerpt(tmp_path / "gate.md", link="x")
