"""The leaderboard's sweeps: embedding size and batch size under paper defaults, over 3 seeds.

The conditions the founding papers (Fehervari et al. 2019; Kim et al., CVPR 2019) show to
move results, re-run under one protocol each:

- glyphs-mini, embedding size 16-512 and batch size 32-256, for contrastive, triplet-semihard,
  multi-similarity, proxy-nca and proxy-softmax (as Fehervari, Ravichandran & Appalaraju,
  "Unbiased Evaluation of Deep Metric Learning Algorithms", 2019, Figures 1-2);
- poses-mini, embedding size 16-128, for log-ratio, triplet-dense and triplet-binary (as Kim et
  al., "Deep Metric Learning Beyond Binary Supervision", CVPR 2019, Fig. 5).

Every point is a derived protocol of the board's defaults protocol
(:func:`dmlbench.run.sweep_protocols`: ``<protocol>@defaults@<key>=<value>``, its own hash),
so a sweep's numbers never mix with a board's. The batch-size sweep fixes 4 images per class
for every method (``batch.samples_per_class``, named in its protocol name): 32-256 must be
exact batches for every method, and the methods' own 2 or 5 per class do not divide them all.
Epochs stay the protocol's, so a larger batch also means fewer steps, as in Roth et al.

``dmlbench check --update-sweeps`` regenerates them (resumable from ``--work-dir``, ``--jobs``
side by side at one thread each); the records go to ``results/sweeps/`` and ``dmlbench
report``'s output, the plots included, to ``reports/sweeps/``. The committed folder is
replaced only when every run has finished.
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dmlbench.leaderboard.tasks import Task, run_tasks

SEEDS = (0, 1, 2)
CLASS_METHODS = (
    "contrastive",
    "triplet-semihard",
    "multi-similarity",
    "proxy-nca",
    "proxy-softmax",
)
CONTINUOUS_METHODS = ("log-ratio", "triplet-dense", "triplet-binary")
COMMAND = "dmlbench check --update-sweeps"


@dataclass(frozen=True)
class Sweep:
    """``methods`` under ``protocol``'s defaults at each of ``values`` of ``key``; ``fixed``
    overrides apply to every point (and are named in its protocol name)."""

    protocol: str
    key: str
    values: tuple[Any, ...]
    methods: tuple[str, ...]
    fixed: tuple[tuple[str, Any], ...] = ()

    def base(self) -> Any:
        from dmlbench.protocol import load_protocol
        from dmlbench.report.plots import sweep_name

        protocol = load_protocol(self.protocol).without_search()
        for key, value in self.fixed:
            name = sweep_name(protocol.name, key, str(value))
            protocol = protocol.with_overrides({key: value}, name=name)
        return protocol

    def protocols(self) -> list[Any]:
        from dmlbench.run import sweep_protocols

        return sweep_protocols(self.base(), self.key, [(str(v), v) for v in self.values])


SWEEPS: tuple[Sweep, ...] = (
    Sweep("glyphs-mini", "model.embedding_size", (16, 32, 64, 128, 256, 512), CLASS_METHODS),
    Sweep(
        "glyphs-mini",
        "batch.size",
        (32, 64, 128, 256),
        CLASS_METHODS,
        fixed=(("batch.samples_per_class", 4),),
    ),
    Sweep("poses-mini", "model.embedding_size", (16, 32, 64, 128), CONTINUOUS_METHODS),
)


def sweep_tasks(sweeps: tuple[Sweep, ...] = SWEEPS) -> list[Task]:
    """One task per (point, method, seed)."""
    return [
        Task(p.name, p, m, (s,))
        for sweep in sweeps
        for p in sweep.protocols()
        for m in sweep.methods
        for s in SEEDS
    ]


def update_sweeps(
    results_dir: Path,
    reports_dir: Path,
    work: Path,
    jobs: int = 1,
    sweeps: tuple[Sweep, ...] = SWEEPS,
) -> list[Path]:
    """Run every sweep's tasks in ``work`` (resumable), then replace ``results_dir`` with
    their final records and write the report into ``reports_dir``; the written paths."""
    from dmlbench.records import load_records, save_record

    tasks = sweep_tasks(sweeps)
    done: list[Task] = []

    def finished(task: Task, seconds: float, _records: list[Any]) -> None:
        done.append(task)
        print(
            f"[{len(done):3}/{len(tasks)}] {task.name} {task.method:18} seed {task.seeds[0]} "
            f"{seconds:6.1f} s",
            file=sys.stderr,
            flush=True,
        )

    run_tasks(tasks, work, jobs, finished)
    hashes = {t.protocol.name: t.protocol.hash for t in tasks}
    records, _ = load_records(work)
    keep = [
        r
        for r in records
        if r.stage == "final" and hashes.get(r.protocol.name) == r.protocol.hash and not r.overrides
    ]
    shutil.rmtree(results_dir, ignore_errors=True)
    for r in keep:
        from dmlbench.records import record_path

        path = record_path(results_dir, r.protocol.name, r.protocol.hash, r.method, r.seed)
        save_record(r.model_copy(update={"command": COMMAND}), path)
    return write_sweep_reports(results_dir, reports_dir)


def write_sweep_reports(results_dir: Path, reports_dir: Path) -> list[Path]:
    """The sweeps' report and plots from the records in ``results_dir`` (no run), replacing
    ``reports_dir``'s files: the end of ``--update-sweeps``, and ``dmlbench check --render``
    after a change of the report code."""
    from dmlbench.records import load_records
    from dmlbench.report.build import build_reports

    records, _ = load_records(results_dir)
    for stale in reports_dir.glob("*") if reports_dir.is_dir() else []:
        if stale.is_file():
            stale.unlink()
    return build_reports(records, reports_dir)
