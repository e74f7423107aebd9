"""CI's check re-runs one entry per loss family on the boards listed in CHECK_SUBSET;
``dmlbench check --all`` re-runs every entry."""

from __future__ import annotations

import pytest

from dmlbench.cli.main import build_parser
from dmlbench.leaderboard import boards

ENTRIES = ["contrastive", "log-ratio", "triplet-dense", "untrained"]


def test_a_listed_protocol_re_runs_its_subset_and_the_untrained_row(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(boards, "CHECK_SUBSET", {"poses-mini": ("log-ratio",)})
    assert boards.check_entries("poses-mini", ENTRIES) == ["log-ratio", "untrained"]
    assert boards.check_entries("poses-mini@defaults", ENTRIES) == ["log-ratio", "untrained"]
    assert boards.check_entries("poses-mini", ENTRIES, everything=True) == ENTRIES
    assert boards.check_entries("glyphs-mini", ENTRIES) == ENTRIES  # not listed: whole


def test_every_subset_entry_is_on_its_boards() -> None:
    for base, subset in boards.CHECK_SUBSET.items():
        for name, board in boards.LEADERBOARD.items():
            if board.base == base:
                assert set(subset) <= set(boards.board_methods(name)), name


def test_check_all_flag() -> None:
    args = build_parser().parse_args(["check", "--all"])
    assert args.all is True
    assert build_parser().parse_args(["check"]).all is False
