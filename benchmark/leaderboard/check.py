"""``dmlbench check``: re-run the embedded leaderboard and fail when a number moved.

The embedded leaderboard is ``glyphs-mini`` (every class-label method) and ``poses-mini``
(every continuous-label method), each with its ``untrained`` row, under
:meth:`~dmlbench.protocol.Protocol.without_search` (paper-default hyper-parameters, a zero
tuning budget, its own hash), seed 0. Its records are ordinary records under
``results/leaderboard/<protocol>/<hash12>/``; ``dmlbench report --results-dir
results/leaderboard --reports-dir reports/leaderboard`` renders them.

Tolerances come from measured seed-to-seed spread, not from a guess: ``dmlbench check
--update`` runs seeds 0, 1 and 2 of every entry and stores, per (protocol, method, metric), the
three values, their sample standard deviation (``ddof=1``), the protocol's typical std of that
metric (the median over its trained entries, :func:`typical_std`) and ``tolerance = K ·
max(std, typical std)`` (``K = 3``). Only a metric whose spread is exactly 0 everywhere (a
count such as ``queries``) gets the absolute floor ``FLOOR`` instead, so a re-run must
reproduce it. The committed numbers are the seed-0 records; seeds 1 and 2 stay in the work
folder, their values in ``tolerances.yaml``. Every run uses one torch thread
(:mod:`dmlbench.leaderboard.tasks` says why), so a re-run on the same kind of machine reproduces the
committed numbers exactly and the tolerance only matters when the code changed.

``dmlbench check`` re-runs seed 0 of every entry in a temporary folder with the committed
hyper-parameters, prints a diff table and exits 1 when a metric moved more than its tolerance.
It refuses (exit 2) when the shipped protocol's hash or the data fingerprint no longer matches
the committed leaderboard: that change needs a regenerated leaderboard, not a tolerance.

Cost: DREML with the paper's 12 learners takes ≈ 7 min of a CPU, alone half of the 15-minute
budget of a whole check (issue #8), so the leaderboard runs it with ``LEADERBOARD_HPARAMS``
(2 learners, the paper's D = 12 meta-classes). It is passed like ``--hparam``, so the runner
marks that record with ``overrides: {hparams: ...}`` and the report puts it in its own table;
every other entry runs its paper defaults with no override. A method whose defaults changed
since the leaderboard was made is re-run with the committed hyper-parameters, with a warning.
"""

from __future__ import annotations

import math
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dmlbench.errors import DmlbenchError
from dmlbench.leaderboard.tasks import UNTRAINED, Task, run_tasks
from dmlbench.leaderboard.tolerances import TOLERANCES, Spread, Tolerances, load_tolerances
from dmlbench.records import Record, load_records

LEADERBOARD: dict[str, str] = {"glyphs-mini": "glyphs-mini", "poses-mini": "poses-mini"}
LEADERBOARD_HPARAMS: dict[str, dict[str, Any]] = {"dreml": {"learners": 2}}
# Catalogue entries on the regression board, beside the seed papers' methods. None yet: each
# glyphs-mini entry adds about a minute of a core to every CI run, and the check must stay
# within CI's time budget; the catalogue's own tests guard those losses meanwhile.
LEADERBOARD_CATALOGUE: tuple[str, ...] = ()
SEED = 0


@dataclass
class Row:
    protocol: str
    method: str
    metric: str
    committed: float
    now: float
    tolerance: float

    @property
    def diff(self) -> float:
        return self.now - self.committed

    @property
    def ok(self) -> bool:
        if math.isnan(self.committed) and math.isnan(self.now):
            return True
        return abs(self.diff) <= self.tolerance  # False when either value is NaN


def leaderboard_protocol(name: str) -> Any:
    """The shipped protocol ``name`` with a zero tuning budget: the leaderboard's protocol."""
    from dmlbench.protocol import load_protocol

    if name not in LEADERBOARD:
        raise DmlbenchError(f"'{name}' is not a leaderboard protocol ({', '.join(LEADERBOARD)})")
    return load_protocol(LEADERBOARD[name]).without_search()


def leaderboard_methods(protocol: Any) -> list[str]:
    """The protocol's label kind's methods on the board: every method with a module of its own
    in ``methods/`` (the seed papers' methods) plus the catalogue entries in
    ``LEADERBOARD_CATALOGUE``; the other catalogue entries are left off to keep the check
    within its time budget (each glyphs-mini entry costs about a minute of a core)."""
    from dmlbench.data import DATASETS
    from dmlbench.methods import METHODS
    from dmlbench.methods._catalogue import CatalogueMethod

    kind = DATASETS.get(protocol.data.dataset).label_kind
    return [
        m
        for m in METHODS.list()
        if METHODS.get(m).label_kind == kind
        and (not issubclass(METHODS.get(m), CatalogueMethod) or m in LEADERBOARD_CATALOGUE)
    ]


def expected_hparams(method: str) -> dict[str, Any]:
    """A method's resolved hyper-parameters on the leaderboard (defaults + leaderboard's)."""
    from dmlbench.methods import METHODS

    if method == UNTRAINED:
        return {}
    cls = METHODS.get(method)
    return {
        **cls.defaults,
        "samples_per_class": cls.samples_per_class,
        **LEADERBOARD_HPARAMS.get(method, {}),
    }


def load_leaderboard(lb_dir: Path) -> tuple[Tolerances, dict[str, dict[str, Record]]]:
    """The tolerances and the committed seed-0 records, by protocol name and method."""
    tolerances = load_tolerances(lb_dir)
    if tolerances is None:
        raise DmlbenchError(f"{lb_dir}: no {TOLERANCES} (create it: dmlbench check --update)")
    records, problems = load_records(lb_dir)
    if problems:
        raise DmlbenchError(problems[0])
    board: dict[str, dict[str, Record]] = {}
    for r in records:
        if r.stage == "final" and r.seed == SEED and set(r.overrides) <= {"hparams"}:
            board.setdefault(r.protocol.name.partition("@")[0], {})[r.method] = r  # @defaults
    return tolerances, board


def verify(
    name: str, protocol: Any, fingerprint: str, entries: dict[str, Record], tolerances: Tolerances
) -> None:
    """Refuse (one line, exit 2) a leaderboard made under another protocol or data."""
    fix = f"regenerate it: dmlbench check --update --protocol {name}"
    tol = tolerances.protocols.get(name)
    for what, committed in [("tolerances", tol.hash if tol else "missing")] + [
        (f"{m} record", r.protocol.hash) for m, r in sorted(entries.items())
    ]:
        if committed != protocol.hash:
            raise DmlbenchError(
                f"{name}: the committed leaderboard's protocol hash ({what}: {committed[:12]}) "
                f"differs from the shipped protocol's without_search() hash "
                f"{protocol.short_hash}; the protocol changed, {fix}"
            )
    for m, r in sorted(entries.items()):
        if r.data_fingerprint != fingerprint or (tol and tol.data_fingerprint != fingerprint):
            raise DmlbenchError(
                f"{name}: the data fingerprint differs from the committed leaderboard's "
                f"({m}: {r.data_fingerprint[:12]}, now {fingerprint[:12]}); {fix}"
            )


def compare(name: str, committed: Record, now: Record, spreads: dict[str, Spread]) -> list[Row]:
    """One row per metric of the committed record; a metric gone (``now`` NaN) or without a
    tolerance fails. A metric new since the leaderboard was made has nothing to compare with
    (:func:`run_check` names it)."""
    rows = []
    for metric in sorted(committed.metrics):
        s = spreads.get(metric)
        rows.append(
            Row(
                name,
                committed.method,
                metric,
                committed.metrics.get(metric, math.nan),
                now.metrics.get(metric, math.nan),
                s.tolerance if s else math.nan,
            )
        )
    return rows


def leaderboard_overrides(method: str) -> dict[str, Any]:
    """The overrides the runner records for an entry: only hand-set hyper-parameters."""
    return {"hparams": LEADERBOARD_HPARAMS[method]} if method in LEADERBOARD_HPARAMS else {}


def select_entries(
    names: list[str], methods: list[str] | None, available: dict[str, list[str]]
) -> dict[str, list[str]]:
    """Per protocol, the entries to handle; a requested method on no protocol is an error."""
    chosen = {n: [m for m in available[n] if methods is None or m in methods] for n in names}
    missing = sorted(set(methods or []) - {m for ms in chosen.values() for m in ms})
    if missing:
        raise DmlbenchError(
            f"--method: {', '.join(missing)} not on the leaderboard of {', '.join(names)}"
        )
    return chosen


def run_check(
    lb_dir: Path,
    names: list[str] | None,
    methods: list[str] | None,
    progress: bool = True,
    on_entry: Callable[[str, str, float, Record], None] | None = None,
    jobs: int = 1,
) -> list[Row]:
    """Re-run the chosen entries in a temporary folder; one row per metric.

    ``jobs`` entries run side by side, longest first (by the committed record's wall time),
    one torch thread each (:mod:`dmlbench.leaderboard.tasks`), so the numbers do not depend on it.
    ``on_entry(protocol, method, seconds, record)`` is called after each entry
    (``dmlbench.perf.check`` times them with it).
    """
    from dmlbench.data import load_data

    tolerances, board = load_leaderboard(lb_dir)
    names = names or sorted(board)
    for n in names:
        if n not in board:
            raise DmlbenchError(f"{lb_dir}: no leaderboard for {n} (dmlbench check --update)")
    chosen = select_entries(names, methods, {n: sorted(board[n]) for n in names})
    protocols = {n: leaderboard_protocol(n) for n in names}
    tasks = []
    for n in names:  # refuse before any training
        verify(n, protocols[n], load_data(protocols[n]).fingerprint, board[n], tolerances)
        for m in chosen[n]:
            old = board[n][m]
            same = old.hparams == expected_hparams(m)
            if not same:
                print(
                    f"warning: {n}/{m}: the committed hyper-parameters differ from the "
                    "method's defaults (+ LEADERBOARD_HPARAMS); re-running the committed ones; "
                    "regenerate the leaderboard if the change is deliberate",
                    file=sys.stderr,
                )
            hparams = LEADERBOARD_HPARAMS.get(m) if same else old.hparams
            tasks.append(Task(n, protocols[n], m, (old.seed,), hparams))
        for m in sorted(set(leaderboard_methods(protocols[n])) - set(board[n])):
            print(f"warning: {n}: {m} is not on the leaderboard yet", file=sys.stderr)
    tasks.sort(key=lambda t: -board[t.name][t.method].timings.wall_seconds)
    results: dict[tuple[str, str], Record] = {}

    def finished(task: Task, seconds: float, records: list[Record]) -> None:
        n, m, [now] = task.name, task.method, records
        results[n, m] = now
        if on_entry is not None:
            on_entry(n, m, seconds, now)
        old = board[n][m]
        if extra := sorted(set(now.metrics) - set(old.metrics)):
            print(
                f"note: {n}/{m}: new metric(s) {', '.join(extra)} not on the leaderboard "
                "(not compared; --update adds them)",
                file=sys.stderr,
            )
        bad = [
            r.metric
            for r in compare(n, old, now, tolerances.protocols[n].methods.get(m, {}))
            if not r.ok
        ]
        verdict = f"FAIL {', '.join(bad)}" if bad else "ok"
        print(
            f"[{len(results):2}/{len(tasks)}] {n} {m:22} {seconds:6.1f} s  {verdict}",
            file=sys.stderr,
            flush=True,
        )

    with tempfile.TemporaryDirectory(prefix="dmlbench-check-") as tmp:
        run_tasks(tasks, Path(tmp), jobs, finished, progress)
    return [
        row
        for n in names
        for m in chosen[n]
        for row in compare(
            n, board[n][m], results[n, m], tolerances.protocols[n].methods.get(m, {})
        )
    ]


def format_rows(rows: list[Row]) -> str:
    head = ("protocol", "method", "metric", "committed", "now", "diff", "tolerance", "")
    body = [
        (
            r.protocol,
            r.method,
            r.metric,
            f"{r.committed:.4f}",
            f"{r.now:.4f}",
            f"{r.diff:+.4f}",
            f"{r.tolerance:.4f}",
            "ok" if r.ok else "FAIL",
        )
        for r in rows
    ]
    widths = [max(len(line[i]) for line in [head, *body]) for i in range(len(head))]
    return "\n".join(
        "  ".join(
            c.ljust(w) if i < 3 else c.rjust(w)
            for i, (c, w) in enumerate(zip(line, widths, strict=True))
        ).rstrip()
        for line in [head, *body]
    )
