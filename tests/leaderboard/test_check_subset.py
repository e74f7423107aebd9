"""CI's check re-runs a declared subset of the boards listed in CHECK_SUBSET;
``dmlbench check --all`` re-runs every entry."""

from __future__ import annotations

import pytest

from dmlbench.cli.main import build_parser
from dmlbench.leaderboard import boards

ENTRIES = ["contrastive", "log-ratio", "triplet-dense", "untrained"]


def test_a_listed_protocol_re_runs_its_subset_and_the_untrained_row(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(boards, "CHECK_SUBSET", {"poses-mini@defaults": ("log-ratio",)})
    assert boards.check_entries("poses-mini@defaults", ENTRIES) == ["log-ratio", "untrained"]
    assert boards.check_entries("poses-mini@defaults", ENTRIES, everything=True) == ENTRIES
    assert boards.check_entries("poses-mini", ENTRIES) == ENTRIES  # not listed: whole


def test_every_subset_entry_is_on_its_board() -> None:
    for name, subset in boards.CHECK_SUBSET.items():
        assert set(subset) <= set(boards.board_methods(name)), name


EXCEPTIONS = ("emoji-mini", "icons-mini", "hanzi-mini", "hangul-mini")


def test_every_method_of_a_protocol_is_re_run_by_a_plain_check() -> None:
    """A board left to its subset leaves no method out of CI: the protocol's other board
    re-runs it (glyphs-mini's tuned board holds every method of its defaults board but dreml,
    which its subset names; poses-mini's tuned board all of its defaults board's); emoji-mini,
    icons-mini, hanzi-mini and hangul-mini are the declared exception, one entry per loss
    family on their tuned boards, two on their defaults boards."""
    for name, board in boards.LEADERBOARD.items():
        if board.base in EXCEPTIONS or name not in boards.CHECK_SUBSET:
            continue
        others = [n for n, b in boards.LEADERBOARD.items() if b.base == board.base and n != name]
        covered = set(boards.CHECK_SUBSET[name])
        for other in others:
            covered |= set(boards.check_entries(other, boards.board_methods(other)))
        left = set(boards.board_methods(name)) - covered
        assert not left, (name, sorted(left))


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
