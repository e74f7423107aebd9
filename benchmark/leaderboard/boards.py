"""The leaderboard's boards: each embedded protocol under paper defaults and tuned.

Two boards per embedded protocol, because the literature's central finding is that they rank
methods differently (Musgrave et al., "A Metric Learning Reality Check", ECCV 2020, §4; Roth
et al., "Revisiting Training Strategies and Generalization Performance in Deep Metric
Learning", ICML 2020, §4):

- **defaults** (``<protocol>@defaults``): every method with its paper's default
  hyper-parameters, :meth:`~dmlbench.protocol.Protocol.without_search` (a zero tuning budget,
  its own hash): what papers compare. Seeds ``DEFAULTS_SEEDS`` (all of ``TUNED_SEEDS``
  where the protocol searches several studies: :attr:`BoardSpec.seeds`).
- **tuned** (``<protocol>``): the shipped protocol as ``dmlbench run --protocol <protocol>``
  runs it: each method's equal-budget search on validation classes carved out of the
  training classes, then the selection retrained on all training classes for every seed.
  Seeds ``TUNED_SEEDS``; the search trials' records are committed with the board.

A board's name is the protocol name its records carry, so a record says by itself which board
it belongs to.

Cost: DREML with the paper's 12 learners costs 12 networks per step, alone a large share of
CI's budget, so the defaults board runs it with ``LEADERBOARD_HPARAMS`` (2 learners, the
paper's D = 12 meta-classes). It is passed like ``--hparam``, so the runner marks that record
with ``overrides: {hparams: ...}`` and the report puts it in its own table; every other
defaults entry runs its paper defaults with no override. DREML is not on the tuned boards
(``DEFAULTS_ONLY`` says why): its search and seeds alone would take nearly a quarter of the
boards' budget. A method whose defaults changed since the leaderboard was made is re-run with
the committed hyper-parameters, with a warning.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dmlbench.errors import DmlbenchError
from dmlbench.records import is_baseline

DEFAULTS = "defaults"
TUNED = "tuned"
# 12 tuned seeds give a 3-point gap 0.86 power of a *worse* verdict (docs/reports.md, "The
# power calculation"); the defaults seeds are a subset, so defaults vs tuned is paired.
TUNED_SEEDS = tuple(range(12))
DEFAULTS_SEEDS = TUNED_SEEDS[:5]


@dataclass(frozen=True)
class BoardSpec:
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
        """``TUNED_SEEDS`` for the tuned board and for the defaults board of a protocol
        searched by several studies, else ``DEFAULTS_SEEDS``: defaults vs tuned nests the
        shared seeds in the tuned side's studies, and 5 seeds over 3 studies leave 2 df
        within them (every interval of that page t_2-wide); 12 leave 9."""
        if self.kind == TUNED or self.studies > 1:
            return TUNED_SEEDS
        return DEFAULTS_SEEDS

    @property
    def studies(self) -> int:
        """The shipped protocol's ``search.studies`` (its defaults board has no search)."""
        from dmlbench.protocol import load_protocol

        return int(load_protocol(self.protocol).search.studies)

    def load(self) -> Any:
        """The board's protocol: the shipped one (tuned) or its ``without_search()``."""
        from dmlbench.protocol import load_protocol

        protocol = load_protocol(self.protocol)
        return protocol if self.kind == TUNED else protocol.without_search()


def make_boards(*pairs: tuple[str, str]) -> dict[str, BoardSpec]:
    """Both boards of each (base name, protocol) pair, by board name."""
    out = [BoardSpec(base, spec, kind) for base, spec in pairs for kind in (DEFAULTS, TUNED)]
    return {b.name: b for b in out}


def select_boards(
    available: dict[str, BoardSpec], protocols: list[str] | None, kind: str | None
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


# --------------------------------------------------------------------------- the boards

LEADERBOARD: dict[str, BoardSpec] = make_boards(
    ("glyphs-mini", "glyphs-mini"),
    ("emoji-mini", "emoji-mini"),
    ("icons-mini", "icons-mini"),
    ("poses-mini", "poses-mini"),
    ("hanzi-mini", "hanzi-mini"),
    ("hangul-mini", "hangul-mini"),
)
LEADERBOARD_HPARAMS: dict[str, dict[str, Any]] = {"dreml": {"learners": 2}}
# Catalogue entries on the boards beside the founding papers' methods: the later losses a
# researcher compares with first (issue "Every loss by name"). Each glyphs-mini entry adds
# about 20 s of a core per board to every CI run; the other entries' own tests guard them.
LEADERBOARD_CATALOGUE: tuple[str, ...] = (
    "proxy-anchor",
    "soft-triple",
    "circle",
    "supcon",
    "arcface",
    "smooth-ap",
)
SEED = 0
# Methods on the defaults board only, with the reason (printed under the tuned board's table).
DEFAULTS_ONLY: dict[str, str] = {
    "dreml": "its paper's 12-learner ensemble trains 12 networks per step: 8 search trials and "
    "12 seeds would cost about 35 core-minutes alone (six times its 2-learner runs), some 17 "
    "minutes of a regeneration at 2 jobs; the "
    "defaults board's 2-learner run is a hand-set override, which a tuned board does not take"
}


# Entries a plain `dmlbench check` re-runs on these boards, so that CI stays within 30 minutes on
# 2 cores; `dmlbench check --all` re-runs every entry. Boards not listed are re-run whole:
# glyphs-mini's tuned board and poses-mini's, so that every method's code runs in CI. The
# defaults board beside each then re-runs what its tuned board does not cover: glyphs-mini's
# one entry per loss family (pair, triplet, pair weighting, proxy, softmax classification,
# list-wise AP) and dreml (which has no tuned entry), poses-mini's log-ratio (its three methods
# cost a minute each). emoji-mini, icons-mini and hanzi-mini re-run one entry per family on
# their tuned boards and two (a pair and a proxy loss) on their defaults boards. The untrained
# row is always re-run (it is cheap and it checks the data and the backbone).
_FAMILIES = (
    "contrastive",
    "triplet-semihard",
    "multi-similarity",
    "proxy-anchor",
    "proxy-softmax",
    "smooth-ap",
)
CHECK_SUBSET: dict[str, tuple[str, ...]] = {
    "glyphs-mini@defaults": (*_FAMILIES, "dreml"),
    "poses-mini@defaults": ("log-ratio",),
    "emoji-mini": _FAMILIES,
    "emoji-mini@defaults": ("contrastive", "proxy-anchor"),
    "icons-mini": _FAMILIES,
    "icons-mini@defaults": ("contrastive", "proxy-anchor"),
    "hanzi-mini": _FAMILIES,
    "hanzi-mini@defaults": ("contrastive", "proxy-anchor"),
    "hangul-mini": _FAMILIES,
    "hangul-mini@defaults": ("contrastive", "proxy-anchor"),
}


def check_entries(name: str, entries: list[str], everything: bool = False) -> list[str]:
    """The entries of board ``name`` a check re-runs: all with ``everything``, else
    ``CHECK_SUBSET``'s for that board (plus the rows that need no learning) when it has one."""
    subset = CHECK_SUBSET.get(name)
    if everything or subset is None:
        return entries
    return [m for m in entries if m in subset or is_baseline(m)]


def leaderboard_protocol(name: str) -> Any:
    """The protocol of board ``name`` (:meth:`BoardSpec.load`)."""
    if name not in LEADERBOARD:
        raise DmlbenchError(f"'{name}' is not a leaderboard board ({', '.join(LEADERBOARD)})")
    return LEADERBOARD[name].load()


def is_tuned(name: str) -> bool:
    return LEADERBOARD[name].kind == TUNED


def leaderboard_methods(protocol: Any) -> list[str]:
    """The protocol's label kind's methods on the board: every method with a module of its own
    in ``methods/`` (the methods of Fehervari et al. 2019, Kim et al. CVPR 2019 and Wang et
    al. CVPR 2019) plus the catalogue entries in
    ``LEADERBOARD_CATALOGUE``; the other catalogue entries are left off to keep the check
    within its time budget."""
    from dmlbench.data import DATASETS
    from dmlbench.methods import METHODS, is_catalogue_entry

    kind = DATASETS.get(protocol.data.dataset).label_kind
    return [
        m
        for m in METHODS.list()
        if METHODS.get(m).label_kind == kind
        and (not is_catalogue_entry(m) or m in LEADERBOARD_CATALOGUE)
    ]


def board_methods(name: str) -> list[str]:
    """The trained entries of board ``name``: :func:`leaderboard_methods` of its protocol,
    without ``DEFAULTS_ONLY`` on a tuned board."""
    methods = leaderboard_methods(leaderboard_protocol(name))
    return [m for m in methods if not (is_tuned(name) and m in DEFAULTS_ONLY)]


def expected_hparams(method: str, samples_per_class: int | None) -> dict[str, Any]:
    """A method's resolved hyper-parameters on a defaults board whose protocol samples
    ``samples_per_class`` images per class (defaults + leaderboard's, restated for the batch)."""
    from dmlbench.methods import METHODS

    if is_baseline(method):
        return {}
    given = LEADERBOARD_HPARAMS.get(method, {})
    return METHODS.get(method).resolved_hparams(given, samples_per_class)


def leaderboard_overrides(method: str) -> dict[str, Any]:
    """The overrides the runner records for an entry: only hand-set hyper-parameters."""
    return {"hparams": LEADERBOARD_HPARAMS[method]} if method in LEADERBOARD_HPARAMS else {}


def board_notes() -> dict[str, list[str]]:
    """Lines printed under each board's table: the registered methods of its label kind that
    are not on it, and why, so a reader never takes a missing method for a bad one."""
    from dmlbench.data import DATASETS
    from dmlbench.methods import METHODS, is_catalogue_entry

    notes: dict[str, list[str]] = {}
    for n in LEADERBOARD:
        protocol = leaderboard_protocol(n)
        kind = DATASETS.get(protocol.data.dataset).label_kind
        on = set(board_methods(n))
        lines = [
            f"Not on this board: {m} ({why})."
            for m, why in DEFAULTS_ONLY.items()
            if is_tuned(n) and m in leaderboard_methods(protocol)
        ]
        off = [
            m
            for m in METHODS.list()
            if METHODS.get(m).label_kind == kind
            and m not in on
            and m not in DEFAULTS_ONLY
            and is_catalogue_entry(m)
        ]
        if off:
            lines.append(
                f"Not on the boards: {len(off)} further catalogue losses of this label kind "
                f"({', '.join(off)}), left off so that `dmlbench check` stays within CI's "
                "time; run one under this protocol with `dmlbench run --method NAME`."
            )
        notes[protocol.name] = lines
    return notes
