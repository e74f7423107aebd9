"""Wall time of regenerating the leaderboard (``dmlbench check --update``) and its sweeps.

``python -m dmlbench.perf.update --what leaderboard`` runs what ``dmlbench check --update``
runs (every board's searches and seeds, the tolerances and the report) and prints its wall
time against the target, 120 minutes on 2 CPU cores for every committed board, with the number
of runs it made; ``--what sweeps`` does the same for ``dmlbench check --update-sweeps``. A
resumed regeneration reuses the finished records of ``--work-dir``, so only a run from an
empty work folder measures the whole cost: the report says how many records were reused.

One run, not the median of rounds: the figure is an hour that a maintainer pays once. The load
average at the start and end, and the CPU share other processes used while it ran, are in the
report (``dmlbench.perf._common``); a report with a busy start is refused without ``--noisy``.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Sequence
from pathlib import Path

from dmlbench.leaderboard import boards
from dmlbench.leaderboard.tasks import default_jobs
from dmlbench.perf._common import (
    Row,
    add_common_options,
    emit,
    machine_info,
    markdown_table,
    refuse_if_busy,
)

TARGET_SECONDS = 120 * 60  # every board of every embedded protocol, 12 tuned seeds


def _count(folder: Path) -> int:
    return sum(1 for _ in folder.rglob("*.json")) if folder.is_dir() else 0


def _where(folder: Path) -> str:
    """The board folder as a report may name it: no path of the measuring machine."""
    default = Path("results/leaderboard")
    return str(default) if folder == default else f"a scratch folder (not {default})"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m dmlbench.perf.update",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--what", choices=["leaderboard", "sweeps"], default="leaderboard")
    parser.add_argument("--leaderboard-dir", type=Path, default=Path("results/leaderboard"))
    parser.add_argument("--reports-dir", type=Path, default=Path("reports/leaderboard"))
    parser.add_argument("--work-dir", type=Path, required=True, help="records of all runs")
    parser.add_argument("--jobs", type=int, default=0, help="as dmlbench check --jobs")
    add_common_options(parser)
    args = parser.parse_args(argv)
    refused = refuse_if_busy(args)
    if refused is not None:
        return refused
    info = machine_info()
    jobs = args.jobs or default_jobs()
    before = _count(args.work_dir)
    start = time.perf_counter()
    if args.what == "leaderboard":
        from dmlbench.leaderboard.update import update_leaderboard

        update_leaderboard(
            args.leaderboard_dir,
            args.reports_dir,
            args.work_dir,
            list(boards.LEADERBOARD),
            None,
            progress=False,
            jobs=jobs,
        )
    else:
        from dmlbench.leaderboard.sweeps import update_sweeps

        sweeps = args.leaderboard_dir.parent / "sweeps", args.reports_dir.parent / "sweeps"
        update_sweeps(*sweeps, args.work_dir, jobs=jobs)
    wall = time.perf_counter() - start
    made = _count(args.work_dir) - before
    table = [
        Row("records reused from the work folder (0: the whole cost was measured)", before),
        Row("records made (final runs, search trials, untrained rows)", made),
        Row(
            f"wall time, min (peer: the target; {os.cpu_count()} CPUs, {jobs} jobs)",
            wall / 60,
            TARGET_SECONDS / 60,
        ),
    ]
    body = (
        f"`dmlbench check --update{'-sweeps' if args.what == 'sweeps' else ''}` into "
        f"{_where(args.leaderboard_dir)} "
        f"(target: under {TARGET_SECONDS // 60} minutes on 2 cores):\n\n"
        + markdown_table(table)
        + "\n"
    )
    emit(f"dmlbench.perf.update --what {args.what}", info, body, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
