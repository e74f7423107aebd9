"""Boards staged for the leaderboard (results/staging/): each is an ``--update`` work folder,
finished (publishing it trains nothing) or partial (resuming it trains only what is missing),
whose records match today's shipped protocol; a protocol change that voids one fails here,
naming the folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from dmlbench.protocol import load_protocol
from dmlbench.records import load_records

STAGING = Path(__file__).resolve().parents[2] / "results" / "staging"
STAGED = sorted(p.name for p in STAGING.iterdir() if p.is_dir()) if STAGING.is_dir() else []


@pytest.mark.parametrize("name", STAGED)
def test_a_staged_board_matches_its_shipped_protocol(name: str) -> None:
    tuned = load_protocol(name)
    expected = {
        name: tuned.short_hash,
        f"{name}@defaults": tuned.without_search().short_hash,
    }
    for board, short in expected.items():
        folders = sorted(p.name for p in (STAGING / name / board).iterdir() if p.is_dir())
        assert folders == [short], (
            f"results/staging/{name}/{board}: made under {folders}, the shipped protocol "
            f"is {short}; remake the board or remove the folder"
        )
        records, problems = load_records(STAGING / name / board)
        assert not problems
        finals = [r for r in records if r.stage == "final"]
        assert finals and {r.protocol.hash[:12] for r in finals} == {short}
    assert (STAGING / name / "optuna.db").is_file()  # the searches, for a resumed update
    assert f"## {name}" in (STAGING / "README.md").read_text(encoding="utf-8")
