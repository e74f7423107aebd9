"""Which seeds a board trains (dmlbench.leaderboard.boards)."""

from __future__ import annotations

from dmlbench.leaderboard.boards import DEFAULTS, DEFAULTS_SEEDS, TUNED, TUNED_SEEDS, BoardSpec


def test_defaults_boards_of_multi_study_protocols_take_every_tuned_seed() -> None:
    """hanzi-mini searches 3 studies: its defaults board shares 4 seeds with each study;
    emoji-mini (one study) keeps the first five, and every tuned board all twelve."""
    assert BoardSpec("hanzi-mini", "hanzi-mini", DEFAULTS).studies == 3
    assert BoardSpec("hanzi-mini", "hanzi-mini", DEFAULTS).seeds == TUNED_SEEDS
    assert BoardSpec("emoji-mini", "emoji-mini", DEFAULTS).studies == 1
    assert BoardSpec("emoji-mini", "emoji-mini", DEFAULTS).seeds == DEFAULTS_SEEDS
    assert BoardSpec("emoji-mini", "emoji-mini", TUNED).seeds == TUNED_SEEDS
    assert len(DEFAULTS_SEEDS) == 5 and set(DEFAULTS_SEEDS) < set(TUNED_SEEDS)
