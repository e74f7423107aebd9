"""How ``dmlbench check`` runs leaderboard entries: one torch thread each, side by side.

The leaderboard is defined at ``THREADS = 1`` torch thread per run. Training is
deterministic for a given thread count, but not across thread counts: the split of a
parallel reduction (a convolution's backward pass, say) changes the last bits, and epochs of
training grow them (measured: poses-mini's triplet-dense moved ndcg@1 by more than 3 times
its 3-seed std between 1 and 2 threads; 24 of the then leaderboard's 204 metrics differed). One
thread per run makes the numbers independent of the machine's core count and lets ``--jobs
N`` fill N cores with N runs at once, the same numbers as one after the other.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dmlbench.records import Record, is_baseline

THREADS = 1


@dataclass(frozen=True)
class Task:
    """One leaderboard entry's runs: ``seeds`` of ``method`` under ``protocol``.

    ``hparams`` are passed like ``--hparam`` (the record says so); None runs the method as
    ``dmlbench run`` does (its defaults, or its search when the protocol has a budget).
    ``selection`` (a record's ``search``) replays a finished search's choice instead of
    searching. ``force`` recomputes records found on disk. ``keep`` keeps the runs' test
    embeddings in the work folder (``dmlbench check --keep-embeddings`` copies them out).
    """

    name: str
    protocol: Any
    method: str
    seeds: tuple[int, ...]
    hparams: dict[str, Any] | None = None
    force: bool = False
    selection: dict[str, Any] | None = None
    keep: bool = False


def default_jobs() -> int:
    """The usable CPUs, at most 8 (each job holds a data set and a model in memory)."""
    from dmlbench.provenance import usable_cpus

    return max(1, min(usable_cpus(), 8))


def leaderboard_threads() -> AbstractContextManager[None]:
    """``THREADS`` torch threads inside, the caller's count restored after (the runner's
    :func:`~dmlbench.options.torch_threads`)."""
    from dmlbench.options import torch_threads

    return torch_threads(THREADS)


def run_task(task: Task, work: Path, progress: bool = False) -> tuple[float, list[Record]]:
    """Seconds and the task's records in seed order (the rows that need no learning are
    reused from ``work`` when another task made them, and computed otherwise)."""
    from dmlbench.options import RunOptions, Selection
    from dmlbench.run import run_protocol

    start = time.perf_counter()
    run_options = RunOptions(
        results_dir=work,
        progress=progress,
        hparams={task.method: task.hparams} if task.hparams else {},
        force=task.force,
        keep=task.keep,  # only when asked: in a temporary folder kept files are thrown away
        selections={task.method: Selection.from_record(task.selection)} if task.selection else {},
    )
    trained = [] if is_baseline(task.method) else [task.method]
    with leaderboard_threads():
        records = run_protocol(task.protocol, trained, list(task.seeds), run_options)
    return time.perf_counter() - start, [r for r in records if r.method == task.method]


def exit_with_parent(poll_seconds: float = 1.0) -> None:
    """Worker initializer: end this worker once the process that spawned it is gone.

    A pool worker outlives a killed parent: it finishes the task it holds and the one queued
    behind it (a method's whole search and finals, tens of minutes), writing records beside
    whatever runs next. Records are written atomically, so ending the worker loses at most
    its run in flight, which a resumed update redoes.
    """
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_seconds)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def run_tasks(
    tasks: list[Task],
    work: Path,
    jobs: int,
    finished: Callable[[Task, float, list[Record]], None],
    progress: bool = False,
) -> None:
    """Every task, ``jobs`` at a time in spawned processes (in this one when ``jobs == 1``,
    with progress bars if asked); ``finished`` is called in this process as each one ends.
    Untrained tasks run first, here: they take seconds and the others reuse their records."""
    here = [t for t in tasks if is_baseline(t.method) or jobs == 1]
    rest = [t for t in tasks if not is_baseline(t.method) and jobs > 1]
    for task in here:
        finished(task, *run_task(task, work, progress))
    if not rest:
        return
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(jobs, mp_context=spawn, initializer=exit_with_parent) as pool:
        pending = {pool.submit(run_task, task, work): task for task in rest}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                finished(pending.pop(future), *future.result())
