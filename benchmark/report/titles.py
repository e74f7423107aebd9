"""Titles that say which board a table is and which tuning budget its numbers had.

A protocol ``X`` and its derivation ``X@defaults`` differ only in ``search.trials``, yet their
tables rank methods differently: the tuned board gave every method an equal search on
validation classes, the defaults board gave none. A title that named only the protocol and its
hash left the reader to decode the budget from a 12-character hash, so every per-protocol title
(Markdown, LaTeX, HTML, bar plot, forest plot) states it in words.

A record names its protocol by name, version and hash only. The budget is therefore read from
the protocol itself when it can be rebuilt from a shipped protocol and the name's derivations
(``@defaults``, ``@trials=N``, a sweep's ``@key=value``) *and* the rebuilt hash equals the
record's, which proves the budget is the one the records ran under. Otherwise (a user's
protocol file, a shipped protocol changed since) the records say what was spent: the trial count
each final run's selection reports, else the search-trial records; no trace of a search means
none was run.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from functools import lru_cache
from textwrap import fill
from typing import TYPE_CHECKING

from dmlbench.errors import DmlbenchError
from dmlbench.metrics import catalogue
from dmlbench.records import ProtocolRef, Record
from dmlbench.report.plots import parse_sweep_name, parse_value

if TYPE_CHECKING:
    from dmlbench.protocol import Protocol

DEFAULTS_WORDS = "paper defaults, no search"
HASH_PART = " (protocol hash "


@lru_cache(maxsize=256)
def rebuilt_protocol(name: str, protocol_hash: str) -> Protocol | None:
    """The protocol ``name`` rebuilt from a shipped protocol and the name's derivations, or
    None when it cannot be rebuilt or its hash is not ``protocol_hash`` (a different
    protocol)."""
    from dmlbench.protocol import builtin_names, load_protocol

    base, *derivations = name.split("@")
    if base not in builtin_names():  # never a path: a name must not read a file in the cwd
        return None
    try:
        protocol = load_protocol(base)
        for step in derivations:
            key, eq, token = step.partition("=")
            if step == "defaults":
                protocol = protocol.with_trials(0)
            elif key == "trials" and eq:
                protocol = protocol.with_trials(int(token))
            elif eq:
                protocol = protocol.with_overrides({key: parse_value(token)})
            else:
                return None
        protocol = protocol.with_overrides({}, name=name)
    except (DmlbenchError, ValueError):
        return None
    return protocol if protocol.hash == protocol_hash else None


def declared_trials(name: str, protocol_hash: str) -> int | None:
    """``search.trials`` of the protocol ``name`` rebuilt from a shipped protocol, or None when
    it cannot be rebuilt or its hash is not ``protocol_hash`` (a different protocol)."""
    protocol = rebuilt_protocol(name, protocol_hash)
    return protocol.search.trials if protocol is not None else None


def equivalence_margin(ref: ProtocolRef) -> float:
    """The verdicts' practical-equivalence margin δ of the board of ``ref``: the protocol's
    ``report.equivalence_margin`` where it can be rebuilt (a report setting, outside the hash,
    so the shipped file's current value applies to records made before it changed), else the
    default the power calculation chose (docs/reports.md)."""
    from dmlbench.protocol import DEFAULT_EQUIVALENCE_MARGIN

    protocol = rebuilt_protocol(ref.name, ref.hash)
    return protocol.report.equivalence_margin if protocol else DEFAULT_EQUIVALENCE_MARGIN


def margin_words(metric: str, margin: float) -> str:
    """``equivalence margin ±3 points`` (label distances in their own units)."""
    if not catalogue.is_percent(metric):
        return f"equivalence margin ±{margin:g}"
    return f"equivalence margin ±{100 * margin:g} points"


def spent_trials(records: Iterable[Record]) -> int:
    """The search trials per method the records show: the most any final run's selection
    counted, else the most search-trial records of one method, else 0 (no search was run)."""
    records = list(records)
    finals = [r for r in records if r.stage == "final"]
    selected = [int(r.search["trials"]) for r in finals if "trials" in r.search]
    if selected:
        return max(selected)
    per_method = Counter(r.method for r in records if r.stage == "search-trial")
    return max(per_method.values(), default=0)


def search_trials(ref: ProtocolRef, records: Iterable[Record] = ()) -> int:
    """Search trials per method of the board of ``ref``: the protocol's declared budget when the
    protocol can be rebuilt with the same hash, else what ``records`` (the board's) spent."""
    declared = declared_trials(ref.name, ref.hash)
    return declared if declared is not None else spent_trials(records)


def search_studies(ref: ProtocolRef, records: Iterable[Record] = ()) -> int:
    """Independent searches per method of the board of ``ref`` (``search.studies``): the
    protocol's where it can be rebuilt with the same hash, else the most any final run's
    record names (1 where none does)."""
    protocol = rebuilt_protocol(ref.name, ref.hash)
    if protocol is not None:
        return protocol.search.studies if protocol.search.trials > 0 else 1
    finals = [r for r in records if r.stage == "final"]
    return max((int(r.search.get("studies", 1)) for r in finals), default=1)


def budget_words(trials: int, studies: int = 1) -> str:
    """The board and its budget in words, for titles and captions: with several studies the
    budget is each study's trials, and the reader must see that a method was searched more
    than once."""
    if trials <= 0:
        return DEFAULTS_WORDS
    if studies > 1:
        return f"tuned: {studies} searches of {trials} trials per method on validation classes"
    return f"tuned: {trials}-trial search per method on validation classes"


def board_title(ref: ProtocolRef, records: Iterable[Record] = (), margin: str = "") -> str:
    """``glyphs-mini v4, tuned: 8-trial search per method on validation classes (protocol hash
    13eb26e7aa5d)``: the title of every per-protocol table, page and plot; ``margin`` (the
    verdicts' equivalence margin in words, :func:`margin_words`) is added before the hash
    where the board prints verdicts, since a verdict *equivalent* means nothing without it."""
    records = list(records)
    words = budget_words(search_trials(ref, records), search_studies(ref, records))
    extra = f"; {margin}" if margin else ""
    return f"{ref.name} v{ref.version}, {words}{extra}{HASH_PART}{ref.hash[:12]})"


def wrap_title(title: str, width: int) -> str:
    """``title`` in lines of at most ``width`` characters for a plot, broken before the
    protocol hash first, so that neither the budget nor the hash is cut in two."""
    if len(title) <= width:
        return title
    head, sep, tail = title.partition(HASH_PART)
    parts = [head, sep.lstrip() + tail] if sep else [title]
    return "\n".join(fill(part, width) for part in parts)


def sweep_budgets(records: Iterable[Record]) -> dict[str, str]:
    """The budget in words per swept base protocol (``glyphs-mini@defaults``), for the sweep
    plots' titles; points of one sweep with different budgets are all named."""
    boards: dict[tuple[str, str, str], list[Record]] = defaultdict(list)
    for r in records:
        parsed = parse_sweep_name(r.protocol.name)
        if r.stage == "final" and parsed is not None:
            boards[(parsed[0], r.protocol.name, r.protocol.hash)].append(r)
    words: dict[str, set[str]] = defaultdict(set)
    for (base, _, _), group in boards.items():
        ref = group[0].protocol
        words[base].add(budget_words(search_trials(ref, group), search_studies(ref, group)))
    return {base: " / ".join(sorted(w)) for base, w in words.items()}
