"""The leaderboard's boards: each embedded protocol under paper defaults and tuned.

Two boards per embedded protocol, because the literature's central finding is that they rank
methods differently (Musgrave et al., "A Metric Learning Reality Check", ECCV 2020, §4; Roth
et al., "Revisiting Training Strategies and Generalization Performance in Deep Metric
Learning", ICML 2020, §4):

- **defaults** (``<protocol>@defaults``): every method with its paper's default
  hyper-parameters, :meth:`~dmlbench.protocol.Protocol.without_search` (a zero tuning budget,
  its own hash): what papers compare. Seeds ``DEFAULTS_SEEDS``.
- **tuned** (``<protocol>``): the shipped protocol as ``dmlbench run --protocol <protocol>``
  runs it: each method's equal-budget search on validation classes carved out of the
  training classes, then the selection retrained on all training classes for every seed.
  Seeds ``TUNED_SEEDS``; the search trials' records are committed with the board.

A board's name is the protocol name its records carry, so a record says by itself which board
it belongs to.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dmlbench.errors import DmlbenchError

DEFAULTS = "defaults"
TUNED = "tuned"
DEFAULTS_SEEDS = (0, 1, 2)
TUNED_SEEDS = (0, 1, 2, 3, 4)


@dataclass(frozen=True)
class Board:
    """One board: ``protocol`` (a shipped protocol name or a YAML file) under ``kind``.

    ``base`` is the protocol's own name (``glyphs-mini``); ``name`` the board's, which is the
    protocol name in its records (``glyphs-mini@defaults`` or ``glyphs-mini``).
    """

    base: str
    protocol: str
    kind: str = DEFAULTS

    @property
    def name(self) -> str:
        return f"{self.base}@defaults" if self.kind == DEFAULTS else self.base

    @property
    def seeds(self) -> tuple[int, ...]:
        return DEFAULTS_SEEDS if self.kind == DEFAULTS else TUNED_SEEDS

    def load(self) -> Any:
        """The board's protocol: the shipped one (tuned) or its ``without_search()``."""
        from dmlbench.protocol import load_protocol

        protocol = load_protocol(self.protocol)
        return protocol if self.kind == TUNED else protocol.without_search()


def boards(*pairs: tuple[str, str]) -> dict[str, Board]:
    """Both boards of each (base name, protocol) pair, by board name."""
    out = [Board(base, spec, kind) for base, spec in pairs for kind in (DEFAULTS, TUNED)]
    return {b.name: b for b in out}


def select_boards(
    available: dict[str, Board], protocols: list[str] | None, kind: str | None
) -> list[str]:
    """The board names of ``protocols`` (base names; None: all) of ``kind`` (None: both)."""
    known = sorted({b.base for b in available.values()})
    unknown = sorted(set(protocols or []) - set(known))
    if unknown:
        raise DmlbenchError(
            f"--protocol {', '.join(unknown)}: not a leaderboard protocol ({', '.join(known)})"
        )
    return [
        name
        for name, b in available.items()
        if (protocols is None or b.base in protocols) and (kind is None or b.kind == kind)
    ]
