"""``dmlbench check --update``: regenerate the embedded leaderboard and its tolerances.

Runs every board's seeds of every entry (:mod:`dmlbench.leaderboard.tasks`, ``--jobs`` at a
time; a tuned entry is one task: its search, trial after trial in one process, then its
seeds), derives each metric's tolerance from their spread
(:mod:`dmlbench.leaderboard.tolerances`), and writes every seed's records (the report's
spreads and paired tests need them; ``dmlbench check`` replays seed 0), the tuned boards'
search-trial records, ``tolerances.yaml`` (with the machine it ran on) and the report.

Resumable: every record is written to the work folder as it finishes and reused by the next
``--update``; the committed folder is only written once every task has finished (a whole
board's new folder is staged and swapped in by renames, :func:`_swap_in`), so an interrupted
regeneration leaves the committed leaderboard as it was.
What the leaderboard is and how it is checked: :mod:`dmlbench.leaderboard.check`.
"""

from __future__ import annotations

import os
import platform
import shutil
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

from dmlbench.errors import DmlbenchError
from dmlbench.leaderboard import boards, check
from dmlbench.leaderboard.boards import (
    LEADERBOARD_HPARAMS,
    expected_hparams,
    leaderboard_overrides,
)
from dmlbench.leaderboard.tasks import THREADS, Task, run_tasks
from dmlbench.leaderboard.tolerances import (
    CAP,
    FLOOR,
    RULE,
    TOLERANCES,
    K,
    ProtocolTolerances,
    SeedSpread,
    Tolerances,
    cap_for,
    load_tolerances,
    record_checksums,
    spread,
    typical_std,
)
from dmlbench.records import (
    Record,
    atomic_write_text,
    baselines_for,
    is_baseline,
    load_records,
    record_path,
    save_record,
)
from dmlbench.report.gate import gate, require

COMMAND = "dmlbench check --update"
STAGING = ".staging"  # a full update's new board folders, before they are swapped in


def machine(jobs: int) -> dict[str, Any]:
    from dmlbench.provenance import cpu_name, git_commit, package_versions

    return {
        "platform": platform.platform(),
        "processor": cpu_name(),
        "cpus": os.cpu_count(),
        "torch_threads": THREADS,
        "jobs": jobs,
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "packages": package_versions(),
        "git_commit": git_commit(),
    }


def update_leaderboard(
    lb_dir: Path,
    reports_dir: Path,
    work: Path,
    names: list[str],
    methods: list[str] | None,
    progress: bool = True,
    jobs: int = 1,
) -> Tolerances:
    """Run every board's seeds of every entry in ``work`` (resumable), write every seed's
    record (``dmlbench check`` replays seed 0), the search trials and ``tolerances.yaml``
    into ``lb_dir`` and the report into ``reports_dir``.

    A defaults entry's seed is one task, a tuned entry (its search, then its seeds) is one,
    ``jobs`` at a time (:func:`_tasks`, :mod:`dmlbench.leaderboard.tasks`)."""
    made_on = machine(jobs)  # before the new records make the checkout look edited (+dirty)
    old = _old_tolerances(lb_dir, whole=methods is None and set(names) == set(boards.LEADERBOARD))
    shutil.rmtree(lb_dir / STAGING, ignore_errors=True)  # left by an interrupted swap
    protocols_out = dict(old.protocols) if old else {}
    protocols = {n: boards.leaderboard_protocol(n) for n in names}
    chosen = check.select_entries(
        names,
        methods,
        {n: [*baselines_for(p), *boards.board_methods(n)] for n, p in protocols.items()},
    )
    fingerprints = _fingerprints(protocols, protocols_out, partial=methods is not None)
    tasks = _tasks(protocols, chosen, work)
    records: dict[tuple[str, str], dict[int, Record]] = {}
    count: list[Task] = []

    def finished(task: Task, seconds: float, done: list[Record]) -> None:
        records.setdefault((task.name, task.method), {}).update({r.seed: r for r in done})
        count.append(task)
        seeds = ",".join(map(str, task.seeds))
        print(
            f"[{len(count):2}/{len(tasks)}] {task.name} {task.method:22} seed {seeds:5} "
            f"{seconds:6.1f} s",
            file=sys.stderr,
            flush=True,
        )

    run_tasks(tasks, work, jobs, finished, progress)
    board_spreads: dict[str, dict[str, dict[str, SeedSpread]]] = {}
    for n in protocols:
        prev = protocols_out.get(n)
        spreads = dict(prev.methods) if methods is not None and prev else {}
        seeds = boards.LEADERBOARD[n].seeds
        board_spreads[n] = spreads | {m: _spreads(records[n, m], seeds) for m in chosen[n]}
    require(  # before anything is written
        [
            gate(n, means(s), protocols[n].report.gate_margin, baselines_for(protocols[n]))
            for n, s in board_spreads.items()
        ]
    )
    for n, protocol in protocols.items():
        spreads, seeds = board_spreads[n], boards.LEADERBOARD[n].seeds
        typical = typical_std(spreads)
        spreads = {
            m: {
                metric: s.with_typical(typical[metric], cap_for(metric))
                for metric, s in entry.items()
            }
            for m, entry in spreads.items()
        }
        # A full update rebuilds the protocol's folder (old hashes go) in a staging folder,
        # swapped in below; a partial one replaces its records one by one (each atomically).
        dest = lb_dir / STAGING if methods is None else lb_dir
        for m in chosen[n]:  # every seed: the report's spreads and paired tests need them
            for s in seeds:
                r = records[n, m][s]
                path = record_path(
                    dest, protocol.name, protocol.hash, r.method, s, "final", r.overrides
                )
                # The committed record names the generator, not this machine's work folder.
                save_record(r.model_copy(update={"command": COMMAND}), path)
        if boards.is_tuned(n):
            _copy_trials(work, dest, protocol, chosen[n])
        protocols_out[n] = ProtocolTolerances(
            seeds=list(seeds), hash=protocol.hash, data_fingerprint=fingerprints[n], methods=spreads
        )
    if methods is None:
        _swap_in(lb_dir, {p.name for p in protocols.values()})
    tolerances = _write_tolerances(lb_dir, protocols_out, made_on)
    write_report(lb_dir, reports_dir)
    return tolerances


def _swap_in(lb_dir: Path, folders: set[str]) -> None:
    """Replace each board folder of ``lb_dir`` by its copy under ``STAGING`` with renames, so
    that an interruption leaves every folder whole, old or new (never half-written).
    ``STAGING`` is removed afterwards."""
    staging = lb_dir / STAGING
    for folder in sorted(folders):
        old = lb_dir / f".{folder}.old"
        shutil.rmtree(old, ignore_errors=True)
        if (lb_dir / folder).exists():
            os.replace(lb_dir / folder, old)
        if (staging / folder).exists():
            os.replace(staging / folder, lb_dir / folder)
        shutil.rmtree(old, ignore_errors=True)
    shutil.rmtree(staging, ignore_errors=True)


def _old_tolerances(lb_dir: Path, whole: bool) -> Tolerances | None:
    """The committed tolerances, kept for the boards not regenerated; a file in an older
    format is replaced by a whole regeneration and refused (one line) by a partial one."""
    from pydantic import ValidationError

    try:
        return load_tolerances(lb_dir)
    except ValidationError as err:
        if whole:
            return None
        raise DmlbenchError(
            f"{lb_dir / TOLERANCES} is in an older format ({err.error_count()} problems); "
            "regenerate the whole leaderboard: dmlbench check --update"
        ) from None


def _fingerprints(
    protocols: dict[str, Any], committed: dict[str, ProtocolTolerances], partial: bool
) -> dict[str, str]:
    """Each protocol's data fingerprint; a partial update (some methods) of a board made
    under another protocol hash or data is refused: the whole board must be regenerated."""
    from dmlbench.data import load_data

    out = {}
    for n, protocol in protocols.items():
        out[n] = load_data(protocol).fingerprint
        prev = committed.get(n)
        if partial and (
            prev is None or (prev.hash, prev.data_fingerprint) != (protocol.hash, out[n])
        ):
            raise DmlbenchError(
                f"{n}: the protocol or data changed since the leaderboard was "
                f"made; regenerate all of it: dmlbench check --update --protocol {n}"
            )
    return out


def _tasks(protocols: dict[str, Any], chosen: dict[str, list[str]], work: Path) -> list[Task]:
    """One task per defaults entry and seed; one per tuned entry (search, then every seed),
    first, as the longest; the rows that need no learning, cheap, as one task per board and
    row. A defaults record in ``work`` made with other hyper-parameters than today's is stale
    (a tuned record is reused only with its study's selection: :func:`dmlbench.run._reusable`).

    Why a tuned entry's seeds are not tasks of their own: they would share the study as
    parallel workers, and which trials had finished when the next one was proposed, or when
    the pruner compared a trial with the others, would depend on timing. A regeneration from
    an empty folder then chose another configuration for margin (61.0 to 59.2 Recall@1).
    One process per study makes the search a function of the protocol and the code only."""
    from dmlbench.records import load_record

    tuned_tasks: list[Task] = []
    tasks: list[Task] = []
    for n, protocol in protocols.items():
        seeds, tuned = boards.LEADERBOARD[n].seeds, boards.is_tuned(n)
        for m in chosen[n]:
            if is_baseline(m):
                tasks.append(Task(n, protocol, m, seeds))
                continue
            if tuned:
                tuned_tasks.append(Task(n, protocol, m, seeds))
                continue
            overrides, hparams = leaderboard_overrides(m), LEADERBOARD_HPARAMS.get(m)
            expected = expected_hparams(m, protocol.batch.samples_per_class)
            for s in seeds:
                path = record_path(work, protocol.name, protocol.hash, m, s, "final", overrides)
                stale = path.is_file() and load_record(path).hparams != expected
                tasks.append(Task(n, protocol, m, (s,), hparams, stale))
    cheap = [t for t in tasks if is_baseline(t.method)]
    return cheap + tuned_tasks + [t for t in tasks if not is_baseline(t.method)]


def means(spreads: dict[str, dict[str, SeedSpread]]) -> dict[str, dict[str, float]]:
    """Each entry's mean over seeds per metric (what the gate compares)."""
    return {
        m: {metric: sum(s.values) / len(s.values) for metric, s in entry.items()}
        for m, entry in spreads.items()
    }


def _spreads(by_seed: dict[int, Record], seeds: tuple[int, ...]) -> dict[str, SeedSpread]:
    """Per metric the entry has on every seed, its values over ``seeds``."""
    common = set.intersection(*(set(by_seed[s].metrics) for s in seeds))
    return {
        metric: spread([by_seed[s].metrics[metric] for s in seeds]) for metric in sorted(common)
    }


def _copy_trials(work: Path, lb_dir: Path, protocol: Any, methods: list[str]) -> None:
    """The search-trial records of ``methods`` under ``protocol``, from ``work`` into the
    committed board: what each method's budget bought (parameters, validation curve, state)."""
    folder = Path(protocol.name) / protocol.hash[:12]
    for path in sorted((work / folder).glob("*-search-trial.json")):
        from dmlbench.records import load_record

        r = load_record(path)
        if r.method in methods and r.protocol.hash == protocol.hash and not r.overrides:
            save_record(r.model_copy(update={"command": COMMAND}), lb_dir / folder / path.name)


def _write_tolerances(
    lb_dir: Path, protocols: dict[str, ProtocolTolerances], made_on: dict[str, Any]
) -> Tolerances:
    tolerances = Tolerances(
        k=K,
        floor=FLOOR,
        cap=CAP,
        rule=RULE,
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        machine=made_on,
        hparams=LEADERBOARD_HPARAMS,
        protocols=protocols,
        checksums=record_checksums(lb_dir, sorted(protocols)),
    )
    header = (
        "# Tolerances of the embedded leaderboard (dmlbench check). Generated by\n"
        "# `dmlbench check --update`; do not edit by hand.\n"
    )
    body = yaml.safe_dump(tolerances.model_dump(mode="json"), sort_keys=False)
    atomic_write_text(lb_dir / TOLERANCES, header + body)
    return tolerances


def write_report(lb_dir: Path, reports_dir: Path) -> list[Path]:
    """``dmlbench report`` of the leaderboard; stale files of earlier hashes are removed."""
    from dmlbench.leaderboard import readme
    from dmlbench.report.build import build_reports
    from dmlbench.report.kept import find_kept

    records, _ = load_records(lb_dir)
    sweeps = sorted((reports_dir.parent / "sweeps").glob("sweep-*.png"))  # --update-sweeps'
    linked = [f"../sweeps/{p.name}" for p in sweeps]
    written = build_reports(
        records,
        reports_dir,
        lb_dir / "published",
        linked,
        boards.board_notes(),
        kept=find_kept(lb_dir),
        headline=readme.BOARD,
    )
    keep = {p.resolve() for p in written}
    for p in sorted(reports_dir.glob("**/*"), reverse=True):  # a board's folder after its files
        name = p.relative_to(reports_dir).parts[0]
        if not name.startswith(tuple(boards.LEADERBOARD)) or p.resolve() in keep:
            continue
        if p.is_file():
            p.unlink()
        elif p.is_dir() and not any(p.iterdir()):
            p.rmdir()
    return written


def default_work_dir() -> Path:
    from dmlbench.data.base import cache_dir

    return cache_dir() / "leaderboard-runs"
