"""``dmlbench check``: re-run the embedded leaderboard and fail when a number moved.

The embedded leaderboard is ``glyphs-mini`` (every class-label method) and ``poses-mini``
(every continuous-label method), each with its ``untrained`` row, on two boards
(:mod:`dmlbench.leaderboard.boards`): **defaults** (paper defaults, a zero tuning budget,
seeds 0-2) and **tuned** (each method's equal-budget search, then its selection retrained,
seeds 0-4). Their records are ordinary records under ``results/leaderboard/<board>/<hash12>/``
(the tuned board's search trials beside them); ``dmlbench report --results-dir
results/leaderboard --reports-dir reports/leaderboard`` renders them.

``dmlbench check`` re-runs seed 0 of every entry of both boards in a temporary folder (the
tuned board with its committed selections, no search: :attr:`~dmlbench.run.RunOptions.selections`),
prints a diff table and exits 1 when a metric moved more than its tolerance. Every run uses
one torch thread (:mod:`dmlbench.leaderboard.tasks` says why), and :mod:`dmlbench.simd` puts
every x86-64 machine of a vendor on one numeric path. A re-run is compared with the values of
this machine's path (:func:`dmlbench.leaderboard.fingerprint.locate`): the committed records
on the path they were made on, the path's recorded re-run on another
(``paths/<name>.yaml``, ``--record-path``). Either way it reproduces them bit for bit, and a
tolerance only matters when the code or a library changed.
The tolerances (:mod:`dmlbench.leaderboard.tolerances`) are the seed-to-seed spread, capped so
that a change costing any method 2 Recall@1 points (or 0.02 nDCG@10) fails; off that path
(another architecture), where re-runs drift by seed-like noise, the check uses the spread
uncapped and says so (:func:`off_path`). It refuses (exit 2) when the shipped protocol's hash
or the data fingerprint no longer matches the committed leaderboard: that change needs a
regenerated leaderboard, not a tolerance.

Which boards, methods and seeds make the leaderboard: :mod:`dmlbench.leaderboard.boards`.
"""

from __future__ import annotations

import logging
import math
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from dmlbench.atomic import atomic_write
from dmlbench.errors import DmlbenchError
from dmlbench.leaderboard import boards, fingerprint
from dmlbench.leaderboard.tasks import Task, run_tasks
from dmlbench.leaderboard.tolerances import (
    TOLERANCES,
    K,
    SeedSpread,
    Tolerances,
    load_tolerances,
    verify_checksums,
)
from dmlbench.provenance import cpu_name
from dmlbench.records import Record, load_records

if TYPE_CHECKING:
    from dmlbench.protocol import Protocol

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CheckedEntry:
    """One re-run entry, finished: what the caller shows as progress (the CLI prints a line)."""

    index: int
    total: int
    protocol: str
    method: str
    seconds: float
    record: Record
    failed: list[str]  # metrics beyond their tolerance


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


def load_leaderboard(lb_dir: Path) -> tuple[Tolerances, dict[str, dict[str, Record]]]:
    """The tolerances and the committed seed-0 final records, by board name and method."""
    tolerances = load_tolerances(lb_dir)
    if tolerances is None:
        raise DmlbenchError(f"{lb_dir}: no {TOLERANCES} (create it: dmlbench check --update)")
    verify_checksums(lb_dir, tolerances)
    records, problems = load_records(lb_dir)
    if problems:
        raise DmlbenchError(problems[0])
    board: dict[str, dict[str, Record]] = {}
    for r in records:
        if r.stage == "final" and r.seed == boards.SEED and set(r.overrides) <= {"hparams"}:
            board.setdefault(r.protocol.name, {})[r.method] = r
    return tolerances, board


def verify(
    name: str,
    protocol: Protocol,
    fingerprint: str,
    entries: dict[str, Record],
    tolerances: Tolerances,
) -> None:
    """Refuse (one line, exit 2) a leaderboard made under another protocol or data."""
    base = boards.LEADERBOARD[name].base if name in boards.LEADERBOARD else name
    fix = f"regenerate it: dmlbench check --update --protocol {base}"
    tol = tolerances.protocols.get(name)
    for what, committed in [("tolerances", tol.hash if tol else "missing")] + [
        (f"{m} record", r.protocol.hash) for m, r in sorted(entries.items())
    ]:
        if committed != protocol.hash:
            raise DmlbenchError(
                f"{name}: the committed leaderboard's protocol hash ({what}: {committed[:12]}) "
                f"differs from the shipped protocol's {protocol.short_hash}; the protocol "
                f"changed, {fix}"
            )
    for m, r in sorted(entries.items()):
        if r.data_fingerprint != fingerprint or (tol and tol.data_fingerprint != fingerprint):
            raise DmlbenchError(
                f"{name}: the data fingerprint differs from the committed leaderboard's "
                f"({m}: {r.data_fingerprint[:12]}, now {fingerprint[:12]}); {fix}"
            )


def off_path(tolerances: Tolerances) -> str | None:
    """Why a re-run here cannot be bit-identical to the leaderboard, or None where it can.

    Under the portable setting of :mod:`dmlbench.simd` (x86-64 Linux with AVX2, every variable
    at its portable value) a re-run at one thread reproduces the committed records on any
    CPU model, whichever vendor made the board. Elsewhere (another architecture, the opt-out,
    a user's own kernel level) training turns last-bit differences into seed-like noise, so
    the check tolerates that noise (:meth:`SeedSpread.seed_noise`), says so, and can catch a
    2-point change only where the seed spread is below 2/3 point; ``--strict`` keeps the
    capped tolerances.
    """
    from dmlbench import simd

    made_on, here = str(tolerances.machine.get("processor", "an unrecorded CPU")), cpu_name()
    where = f"the leaderboard was made on {made_on}, this machine is {here}"
    if not simd.applies():
        return f"{where}, outside the portable setting (x86-64 Linux with AVX2; dmlbench.simd)"
    if moved := [
        f"{k}={os.environ.get(k)}" for k, v in simd.PORTABLE_LEVEL.items() if os.environ.get(k) != v
    ]:
        return f"{where}, with {', '.join(moved)} instead of the portable setting"
    return None


def compare(
    name: str, method: str, reference: dict[str, float], now: Record, spreads: dict[str, SeedSpread]
) -> list[Row]:
    """One row per metric of the reference values; a metric gone (``now`` NaN) or without a
    tolerance fails. A metric new since the leaderboard was made has nothing to compare with
    (:func:`run_check` names it)."""
    rows = []
    for metric in sorted(reference):
        s = spreads.get(metric)
        rows.append(
            Row(
                name,
                method,
                metric,
                reference[metric],
                now.metrics.get(metric, math.nan),
                s.tolerance if s else math.nan,
            )
        )
    return rows


Reference = dict[tuple[str, str], dict[str, float]]  # (board, entry) -> metric -> value


def committed_metrics(board: dict[str, dict[str, Record]]) -> Reference:
    """The committed seed-0 records' metrics, by (board, entry)."""
    return {(n, m): r.metrics for n, entries in board.items() for m, r in entries.items()}


def reference_metrics(
    lb_dir: Path,
    tolerances: Tolerances,
    board: dict[str, dict[str, Record]],
    note: Callable[[str], None] = log.warning,
) -> tuple[Reference, tuple[str, ...]]:
    """The seed-0 values a re-run on this machine must reproduce, and the boards whose values
    nothing recorded on this machine's path: the committed records on the path they were
    made on, the recorded replay on another path; on an unknown path the committed records,
    with a warning that says how to record it (the check then fails where the paths differ,
    as it should: nothing vouches for this machine's numbers).

    On a recorded path, a board added or regenerated since the path was recorded (its
    records' digest is not the path's) is compared with its committed records, with a warning
    naming the command that records it; :func:`run_check` gives such a board the seed noise
    as its tolerance, as off the portable path. A board lands from one vendor's machine and
    its other path is recorded on the other's: until then the check still runs it there,
    loudly, rather than failing every board of that vendor."""
    committed = committed_metrics(board)
    where = fingerprint.locate(lb_dir, tolerances.checksums)
    if where.why_not:
        note(f"warning: {where.why_not}; comparing with the committed records")
        return committed, ()
    if where.replay is None:
        return committed, ()
    replay = where.replay
    note(
        f"note: this machine is on the numeric path '{replay.name}' (fingerprint "
        f"{replay.weights_sha256[:12]}): comparing with its recorded re-run "
        f"({fingerprint.PATHS}/{replay.name}.yaml), not with the board's records"
    )
    unrecorded = tuple(n for n in where.unrecorded if n in board)
    if unrecorded:
        note(
            f"warning: {', '.join(unrecorded)}: not recorded on the numeric path "
            f"'{replay.name}' (added or regenerated since); compared with the committed records "
            f"at {K:g} x the seed spread, uncapped, which cannot promise to catch a 2-point "
            f"change; record it here: dmlbench check --record-path {replay.name} "
            + " ".join(f"--protocol {b}" for b in sorted({_base(n) for n in unrecorded}))
        )
    out = {}
    for n, m in committed:
        if n in unrecorded:
            out[n, m] = committed[n, m]
            continue
        if m not in replay.metrics.get(n, {}):
            raise DmlbenchError(
                f"{lb_dir / fingerprint.PATHS / replay.name}.yaml: no {n}/{m}; record the path "
                f"again (dmlbench check --record-path {replay.name})"
            )
        out[n, m] = replay.metrics[n][m]
    return out, unrecorded


def _base(name: str) -> str:
    """The protocol of board ``name`` (``glyphs-mini@defaults`` -> ``glyphs-mini``)."""
    return name.split("@", 1)[0]


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
    on_entry: Callable[[CheckedEntry], None] | None = None,
    jobs: int = 1,
    strict: bool = False,
    on_note: Callable[[str], None] | None = None,
    everything: bool = False,
    keep_embeddings: bool = False,
) -> list[Row]:
    """Re-run the chosen entries in a temporary folder; one row per metric.

    With ``keep_embeddings`` (``dmlbench check --keep-embeddings``) each re-run that passes
    leaves its test embeddings as the board's picture file
    (:func:`dmlbench.report.kept.picture_path`, read by ``dmlbench report`` for the
    retrieval grids and maps); without ``methods`` only the entries the pictures need are
    re-run (:func:`dmlbench.report.kept.pictured_methods`: the best method and
    ``untrained``). A note says whether the re-run's metrics equal the reference values bit
    for bit.

    Without ``methods``, a board listed in ``CHECK_SUBSET`` re-runs only its
    subset unless ``everything`` (``dmlbench check --all``), with a note naming what was left.

    Off the portable path the tolerances are the seed noise (uncapped), with a note, unless
    ``strict`` (:func:`off_path` says why).

    ``jobs`` entries run side by side, longest first (by the committed record's wall time),
    one torch thread each (:mod:`dmlbench.leaderboard.tasks`), so the numbers do not depend on it.
    ``on_entry(entry)`` is called after each entry (the CLI prints a progress line,
    ``dmlbench.perf.check`` times them), ``on_note(line)`` with what the user should read
    (tolerances off the portable path, entries not yet on the board, new metrics, changed
    defaults); this module prints nothing.
    """
    from dmlbench.data import load_data

    note = on_note or log.warning
    tolerances, board = load_leaderboard(lb_dir)
    names = names or sorted(board)
    for n in names:
        if n not in board:
            raise DmlbenchError(f"{lb_dir}: no leaderboard for {n} (dmlbench check --update)")
    chosen = select_entries(names, methods, {n: sorted(board[n]) for n in names})
    if methods is None and keep_embeddings:
        chosen = {n: _pictured(lb_dir, n) for n in names}
    elif methods is None:
        for n in names:
            subset = boards.check_entries(n, chosen[n], everything)
            if len(subset) < len(chosen[n]):
                note(
                    f"note: {n}: {len(subset)} of {len(chosen[n])} entries re-run (a declared "
                    "subset, boards.CHECK_SUBSET); dmlbench check --all re-runs every entry"
                )
            chosen[n] = subset
    protocols = {n: boards.leaderboard_protocol(n) for n in names}
    tasks: list[Task] = []
    for n in names:  # refuse before any training
        verify(n, protocols[n], load_data(protocols[n]).fingerprint, board[n], tolerances)
        tasks += [
            replace(check_task(n, protocols[n], board[n][m], note), keep=keep_embeddings)
            for m in chosen[n]
        ]
        for m in sorted(set(boards.board_methods(n)) - set(board[n])):
            note(f"warning: {n}: {m} is not on the leaderboard yet")
    if why := off_path(tolerances):  # after the refusals: they come first, alone
        reference = committed_metrics(board)
        if not strict:
            tolerances = _seed_noise(tolerances)
            note(
                f"note: {why}: re-runs here are not bit-identical, so each tolerance is {K:g} x "
                "the seed spread, uncapped (--strict: the capped ones)"
            )
    else:
        reference, unrecorded = reference_metrics(lb_dir, tolerances, board, note)
        if unrecorded and not strict:
            tolerances = _seed_noise(tolerances, unrecorded)
    tasks.sort(key=lambda t: -board[t.name][t.method].timings.wall_seconds)
    results: dict[tuple[str, str], Record] = {}

    def finished(task: Task, seconds: float, records: list[Record]) -> None:
        n, m, [now] = task.name, task.method, records
        results[n, m] = now
        old = reference[n, m]
        if extra := sorted(set(now.metrics) - set(old)):
            note(
                f"note: {n}/{m}: new metric(s) {', '.join(extra)} not on the leaderboard "
                "(not compared; --update adds them)"
            )
        bad = [
            r.metric
            for r in compare(n, m, old, now, tolerances.protocols[n].methods.get(m, {}))
            if not r.ok
        ]
        if keep_embeddings and not bad:
            _keep_embeddings(lb_dir, Path(tmp), protocols[n], now, old, note)
        if on_entry is not None:
            on_entry(CheckedEntry(len(results), len(tasks), n, m, seconds, now, bad))

    with tempfile.TemporaryDirectory(prefix="dmlbench-check-") as tmp:
        run_tasks(tasks, Path(tmp), jobs, finished, progress)
    return [
        row
        for n in names
        for m in chosen[n]
        for row in compare(
            n, m, reference[n, m], results[n, m], tolerances.protocols[n].methods.get(m, {})
        )
    ]


def record_path(
    lb_dir: Path,
    name: str,
    jobs: int = 1,
    on_entry: Callable[[CheckedEntry], None] | None = None,
    on_note: Callable[[str], None] | None = None,
    names: list[str] | None = None,
) -> Path:
    """``dmlbench check --record-path NAME``: re-run every entry of every board (of the
    boards ``names``, ``--protocol``/``--board``) here and write ``paths/NAME.yaml``, this
    machine's numeric path and its values; the values the file already holds for the other
    boards are kept where those boards are unchanged.

    Run it at the commit the board was made at (or one that still reproduces the board on the
    board's own path: ``dmlbench check`` passes there), on a machine of the path to record;
    the values then vouch for that path exactly as the records vouch for theirs.

    Raises:
        DmlbenchError: this machine is on the board's own path (nothing to record), ``name``
            is taken by another path, or this machine is off the portable setting.
    """
    from datetime import datetime, timezone

    import yaml

    from dmlbench.provenance import git_commit

    if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", name):
        raise DmlbenchError(f"--record-path {name!r}: use lower-case letters, digits and '-'")
    tolerances = load_leaderboard(lb_dir)[0]
    if why := off_path(tolerances):
        raise DmlbenchError(f"--record-path: {why}; a path is recorded under that setting only")
    here = fingerprint.this_machine()
    where = fingerprint.locate(lb_dir, tolerances.checksums, here)
    if where.why_not is None and where.replay is None:
        raise DmlbenchError(
            "--record-path: this machine reproduces the board's own records; nothing to record"
        )
    cpus = [cpu_name()]
    digests = fingerprint.board_digests(tolerances.checksums)
    kept: dict[str, str] = {}
    values: dict[str, dict[str, dict[str, float]]] = {}
    for other in fingerprint.load_paths(lb_dir):
        same = (other.weights_sha256, other.metrics_sha256) == (
            here["weights_sha256"],
            here["metrics_sha256"],
        )
        if other.name == name and not same:
            raise DmlbenchError(
                f"--record-path {name}: {lb_dir / fingerprint.PATHS / name}.yaml holds another "
                "numeric path; choose another name"
            )
        if other.name != name and same:
            raise DmlbenchError(f"--record-path {name}: this machine is on '{other.name}'")
        if other.name == name:
            cpus = sorted({*other.cpus, *cpus})
            kept = {b: d for b, d in other.boards.items() if digests.get(b) == d}
            values = {b: other.metrics[b] for b in kept if b in other.metrics}
    chosen = sorted(digests) if names is None else sorted(names)
    for b in chosen:
        kept.pop(b, None)
        values.pop(b, None)

    def keep(entry: CheckedEntry) -> None:
        values.setdefault(entry.protocol, {})[entry.method] = entry.record.metrics
        if on_entry is not None:
            on_entry(entry)

    run_check(lb_dir, chosen, None, False, keep, jobs, on_note=on_note, everything=True)
    replay = fingerprint.ReplayPath(
        name=name,
        cpus=cpus,
        setting=here["setting"],
        weights_sha256=here["weights_sha256"],
        metrics_sha256=here["metrics_sha256"],
        boards={b: digests[b] for b in sorted({*kept, *chosen}) if b in digests},
        git_commit=git_commit(),
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        metrics={n: dict(sorted(es.items())) for n, es in sorted(values.items())},
    )
    path = lb_dir / fingerprint.PATHS / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    header = (
        f"# The numeric path '{name}': its fingerprint and its re-run of every leaderboard "
        "entry.\n# Written by `dmlbench check --record-path`; do not edit by hand.\n"
    )
    text = header + yaml.safe_dump(replay.model_dump(), sort_keys=False)
    atomic_write(path, lambda fh: fh.write(text.encode()))
    return path


def _seed_noise(tolerances: Tolerances, only: tuple[str, ...] | None = None) -> Tolerances:
    """The tolerances of the boards ``only`` (None: all) widened to the seed noise."""
    protocols = {
        n: p.model_copy(
            update={
                "methods": {
                    m: {metric: s.seed_noise() for metric, s in entry.items()}
                    for m, entry in p.methods.items()
                }
            }
        )
        if only is None or n in only
        else p
        for n, p in tolerances.protocols.items()
    }
    return tolerances.model_copy(update={"protocols": protocols})


def check_task(name: str, protocol: Protocol, old: Record, note: Callable[[str], None]) -> Task:
    """The re-run of a committed entry: the tuned board's with its committed selection (no
    search), a defaults entry with today's defaults, or its committed ones if they changed."""
    m = old.method
    if boards.is_tuned(name):
        return Task(name, protocol, m, (old.seed,), selection=old.search or None)
    if old.hparams == boards.expected_hparams(m, protocol.batch.samples_per_class):
        return Task(name, protocol, m, (old.seed,), boards.LEADERBOARD_HPARAMS.get(m))
    note(
        f"warning: {name}/{m}: the committed hyper-parameters differ from the method's "
        "defaults (+ LEADERBOARD_HPARAMS); re-running the committed ones; regenerate the "
        "leaderboard if the change is deliberate"
    )
    return Task(name, protocol, m, (old.seed,), old.hparams)


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


def _pictured(lb_dir: Path, name: str) -> list[str]:
    """The entries of board ``name`` whose embeddings its pictures need."""
    from dmlbench.report.kept import pictured_methods

    records, _ = load_records(lb_dir)
    finals = [r for r in records if r.protocol.name == name and r.stage == "final"]
    return pictured_methods([r for r in finals if not r.overrides])


def _keep_embeddings(
    lb_dir: Path,
    work: Path,
    protocol: Protocol,
    now: Record,
    reference: dict[str, float],
    note: Callable[[str], None],
) -> None:
    """Copy the re-run's kept test embeddings into the board's picture file, and say whether
    its metrics equal ``reference`` (this machine's values of the entry) bit for bit."""
    import numpy as np

    from dmlbench.engine.artifacts import EMBEDDINGS
    from dmlbench.records import record_path as run_record
    from dmlbench.report.kept import picture_path, save_picture_file

    folder = run_record(
        work, protocol.name, protocol.hash, now.method, now.seed, "final", now.overrides
    ).parent
    with np.load(folder / now.artifacts[EMBEDDINGS].path, allow_pickle=False) as npz:
        embeddings, labels = npz["embeddings"], npz["labels"]
    path = picture_path(lb_dir, protocol.name, protocol.hash, now.method)
    save_picture_file(
        path, embeddings, labels, protocol.model_dump(mode="json"), now.data_fingerprint,
        now.method, now.metrics,
    )  # fmt: skip
    moved = sorted(k for k, v in reference.items() if now.metrics.get(k) != v)
    same = "equal the reference bit for bit" if not moved else f"differ in {', '.join(moved)}"
    note(f"kept: {path} ({path.stat().st_size} bytes; the re-run's metrics {same})")
