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


def test_committed_defaults_entries_carry_the_defaults_restated_for_their_batch() -> None:
    """emoji-mini fixes 2 images per class: prototypical's default is 1 shot there, and its
    committed defaults records say so, so an update reuses them and the check re-runs them as
    defaults (not as changed hyper-parameters)."""
    from pathlib import Path

    from dmlbench.protocol import load_protocol
    from dmlbench.records import load_records

    root = Path(__file__).resolve().parents[2] / "results" / "leaderboard"
    seen = set()
    for name, board in boards.LEADERBOARD.items():
        if boards.is_tuned(name):
            continue
        k = load_protocol(board.base).batch.samples_per_class
        records, problems = load_records(root / name)
        assert not problems
        for record in records:
            if record.stage == "final" and not record.overrides:
                assert record.hparams == boards.expected_hparams(record.method, k), record.method
                seen.add((name, record.method))
    assert ("emoji-mini@defaults", "prototypical") in seen
    assert boards.expected_hparams("prototypical", 2)["n_support"] == 1
    assert boards.expected_hparams("prototypical", None)["n_support"] == 5
