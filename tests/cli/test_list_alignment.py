"""``dmlbench list methods`` is a table: every row's columns start where the header's do."""

from __future__ import annotations

import pytest

from dmlbench.cli.main import main


def _offsets(header: str) -> tuple[int, int, int]:
    """Where the labels column starts, where the (right-aligned) lr× column ends, where papers start."""
    labels = header.index("labels")
    mult_end = header.index("lr×") + len("lr×")
    paper = header.index("paper")
    return labels, mult_end, paper


def _check_row(row: str, labels: int, mult_end: int, paper: int) -> str:
    """Asserts the row's cells sit on the header's offsets and returns its label kind."""
    assert row[labels - 1] == " " and row[labels] != " ", row
    kind = row[labels:].split()[0]
    assert row[mult_end - 1] != " " and row[mult_end] == " ", row  # lr× right-aligned
    assert row[paper - 1] == " " and row[paper] != " ", row
    return kind


def test_every_row_lines_up_with_the_header_including_continuous_ones(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["list", "methods"]) == 0
    lines = capsys.readouterr().out.splitlines()
    labels, mult_end, paper = _offsets(lines[0])
    rows = [r for r in lines[1:] if not r.startswith("pml:<Loss>")]
    kinds = [_check_row(r, labels, mult_end, paper) for r in rows]
    assert len(rows) >= 40
    # the rows that used to be pushed out of line are in the table being checked
    assert "continuous" in kinds and "class" in kinds


def test_sources_lines_start_at_the_paper_column(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "methods", "*triplet*", "--sources"]) == 0
    lines = capsys.readouterr().out.splitlines()
    _, _, paper = _offsets(lines[0])
    sources = [r for r in lines[1:] if r.lstrip().startswith("defaults:")]
    assert sources and len(sources) == len(lines[1:]) // 2
    assert all(r.index("defaults:") == paper for r in sources)


def test_library_listing_lines_up_including_refused_losses(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["list", "methods", "pml:*"]) == 0
    lines = capsys.readouterr().out.splitlines()
    labels, mult_end, paper = _offsets(lines[0])
    refused = [r for r in lines[1:] if " refused: " in r]
    listed = [r for r in lines[1:] if r not in refused]
    assert refused and len(listed) >= 20
    for row in listed:
        _check_row(row, labels, mult_end, paper)
    # a refused row's reason starts where the labels column does
    assert all(r.index("refused:") == labels for r in refused)
