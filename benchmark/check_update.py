"""``dmlbench check --update``: regenerate the embedded leaderboard and its tolerances.

Runs seeds ``SPREAD_SEEDS`` of every entry (:mod:`dmlbench.check_runs`, ``--jobs`` at a time,
resumable from the work folder), derives each metric's tolerance from their spread
(:func:`dmlbench.check.spread`, :func:`dmlbench.check.typical_std`), and writes the seed-0
records, ``tolerances.yaml`` (with the machine it ran on) and the report. What the leaderboard
is and how it is checked: :mod:`dmlbench.check`.
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

from dmlbench import check
from dmlbench.check import (
    FLOOR,
    LEADERBOARD_HPARAMS,
    RULE,
    SEED,
    SPREAD_SEEDS,
    TOLERANCES,
    K,
    ProtocolTolerances,
    Tolerances,
    expected_hparams,
    leaderboard_overrides,
    load_tolerances,
    spread,
    typical_std,
)
from dmlbench.check_runs import THREADS, UNTRAINED, Task, run_tasks
from dmlbench.errors import DmlbenchError
from dmlbench.records import Record, atomic_write_text, load_records, record_path, save_record

COMMAND = "dmlbench check --update"


def machine(jobs: int) -> dict[str, Any]:
    from dmlbench.records import cpu_name, git_commit, package_versions

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
    """Run seeds ``SPREAD_SEEDS`` of every entry in ``work`` (resumable), write the seed-0
    records and ``tolerances.yaml`` into ``lb_dir`` and the report into ``reports_dir``.

    Every (entry, seed) is one task, ``jobs`` at a time (:mod:`dmlbench.check_runs`)."""
    from dmlbench.data import load_data
    from dmlbench.records import load_record

    old = load_tolerances(lb_dir)
    protocols_out = dict(old.protocols) if old else {}
    protocols = {n: check.leaderboard_protocol(n) for n in names}
    chosen = check.select_entries(
        names,
        methods,
        {n: [UNTRAINED, *check.leaderboard_methods(p)] for n, p in protocols.items()},
    )
    fingerprints: dict[str, str] = {}
    tasks: list[Task] = []
    for n, protocol in protocols.items():
        fingerprints[n] = load_data(protocol).fingerprint
        prev = protocols_out.get(n)
        if methods is not None and (
            prev is None or (prev.hash, prev.data_fingerprint) != (protocol.hash, fingerprints[n])
        ):
            raise DmlbenchError(
                f"{n}: the protocol or data changed since the leaderboard was "
                f"made; regenerate all of it: dmlbench check --update --protocol {n}"
            )
        for m in chosen[n]:
            overrides = leaderboard_overrides(m)
            for s in SPREAD_SEEDS if m != UNTRAINED else ():
                path = record_path(work, protocol.name, protocol.hash, m, s, "final", overrides)
                stale = path.is_file() and load_record(path).hparams != expected_hparams(m)
                tasks.append(Task(n, protocol, m, (s,), LEADERBOARD_HPARAMS.get(m), stale))
            if m == UNTRAINED:
                tasks.append(Task(n, protocol, m, SPREAD_SEEDS))
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
    for n, protocol in protocols.items():
        prev = protocols_out.get(n)
        spreads = dict(prev.methods) if methods is not None and prev else {}
        for m in chosen[n]:
            by_seed = records[n, m]
            common = set.intersection(*(set(by_seed[s].metrics) for s in SPREAD_SEEDS))
            spreads[m] = {
                metric: spread([by_seed[s].metrics[metric] for s in SPREAD_SEEDS])
                for metric in sorted(common)
            }
        typical = typical_std(spreads)
        spreads = {
            m: {metric: s.with_typical(typical[metric]) for metric, s in entry.items()}
            for m, entry in spreads.items()
        }
        if methods is None:  # a full update rebuilds the protocol's folder (old hashes go)
            for folder in {n, protocol.name}:  # before derived names, the folder was n
                shutil.rmtree(lb_dir / folder, ignore_errors=True)
        for m in chosen[n]:
            r = records[n, m][SEED]
            path = record_path(
                lb_dir, protocol.name, protocol.hash, r.method, SEED, "final", r.overrides
            )
            # The committed record names the generator, not this machine's work folder.
            save_record(r.model_copy(update={"command": COMMAND}), path)
        protocols_out[n] = ProtocolTolerances(
            hash=protocol.hash, data_fingerprint=fingerprints[n], methods=spreads
        )
    tolerances = Tolerances(
        seeds=list(SPREAD_SEEDS),
        k=K,
        floor=FLOOR,
        rule=RULE,
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        machine=machine(jobs),
        hparams=LEADERBOARD_HPARAMS,
        protocols=protocols_out,
    )
    header = (
        "# Tolerances of the embedded leaderboard (dmlbench check). Generated by\n"
        "# `dmlbench check --update`; do not edit by hand.\n"
    )
    body = yaml.safe_dump(tolerances.model_dump(mode="json"), sort_keys=False)
    atomic_write_text(lb_dir / TOLERANCES, header + body)
    write_report(lb_dir, reports_dir)
    return tolerances


def write_report(lb_dir: Path, reports_dir: Path) -> list[Path]:
    """``dmlbench report`` of the leaderboard; stale files of earlier hashes are removed."""
    from dmlbench.report.build import build_reports

    records, _ = load_records(lb_dir)
    written = build_reports(records, reports_dir, lb_dir / "published")  # as `dmlbench report`
    keep = {p.resolve() for p in written}
    for p in reports_dir.glob("*"):
        if p.is_file() and p.resolve() not in keep and p.name.startswith(tuple(check.LEADERBOARD)):
            p.unlink()
    return written


def default_work_dir() -> Path:
    from dmlbench.data.base import cache_dir

    return cache_dir() / "leaderboard-runs"
