"""Wall time of regenerating the leaderboard (``dmlbench check --update``) and its sweeps.

``python -m dmlbench.perf.update --what leaderboard`` runs what ``dmlbench check --update``
runs (every board's searches and seeds, the tolerances and the report) and prints its wall
time against the target, 4 hours on 2 CPU cores for every committed board, with the number
of runs it made; ``--what sweeps`` does the same for ``dmlbench check --update-sweeps``. A
resumed regeneration reuses the finished records of ``--work-dir``, so only a run from an
empty work folder measures the whole cost: the report says how many records were reused.
``--from-records`` trains nothing and reports instead what the committed boards' own records
say that regeneration costs (:func:`records_cost`), the figure a resumed regeneration can give.
``--protocol NAME`` regenerates that protocol's boards only (measured one at a time, the
whole cost is their sum); ``--compare-with DIR`` (the committed boards, when the regeneration
went into a scratch copy of them) adds how many of the new records' metrics equal DIR's to the
last bit (:func:`bit_equal`): a regeneration from an empty work folder replays every search
and every seed, so this is the strongest reproducibility check the boards have.

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
from dmlbench.records import atomic_write_text, load_record

# every board of every embedded protocol from an empty work folder at 2 jobs (issue "Boards that
# measure metric learning", its cost item; 120 minutes before the boards were fine-tuned)
TARGET_SECONDS = 240 * 60


def _count(folder: Path) -> int:
    return sum(1 for _ in folder.rglob("*.json")) if folder.is_dir() else 0


def _where(folder: Path, default: Path = Path("results/leaderboard")) -> str:
    """The results folder as a report may name it: no path of the measuring machine."""
    return str(default) if folder == default else f"a scratch folder (not {default})"


def records_cost(lb_dir: Path, names: Sequence[str], jobs: int) -> list[Row]:
    """Per board and in all: the runs its committed records hold (final runs, search trials,
    untrained rows) and their summed ``timings.wall_seconds`` divided by ``jobs``.

    Each run trains on one torch thread, ``jobs`` at a time, so the sum over ``jobs`` is the
    wall time of a regeneration from an empty work folder that keeps every job busy. It leaves
    out the tolerances and the report (seconds), and a run's time includes whatever ran beside
    it: an upper bound for a quiet machine of the CPU that made the records.
    """
    rows, total = [], 0.0
    for name in names:
        seconds = [
            load_record(p).timings.wall_seconds for p in sorted((lb_dir / name).rglob("*.json"))
        ]
        total += sum(seconds)
        rows.append(Row(f"{name}: records", len(seconds)))
        rows.append(Row(f"{name}: summed run time / {jobs} jobs, min", sum(seconds) / jobs / 60))
    rows.append(
        Row(
            f"every board: summed run time / {jobs} jobs, min (peer: the target)",
            total / jobs / 60,
            TARGET_SECONDS / 60,
        )
    )
    return rows


def bit_equal(new: Path, committed: Path, names: Sequence[str]) -> tuple[int, int, int]:
    """(metrics equal to the last bit, metrics compared, records without a committed twin)
    over the records of boards ``names`` in ``new``. Records pair by their path inside the
    board, which names the protocol hash, method, seed, stage, trial and overrides
    (:func:`dmlbench.records.record_path`); a pair must also agree on its hyper-parameters."""
    equal = total = unmatched = 0
    for name in names:
        for path in sorted((new / name).rglob("*.json")):
            twin_path = committed / path.relative_to(new)
            if not twin_path.is_file():
                unmatched += 1
                continue
            record, twin = load_record(path), load_record(twin_path)
            total += len(record.metrics)
            if record.hparams == twin.hparams:
                equal += sum(twin.metrics.get(m) == v for m, v in record.metrics.items())
    return equal, total, unmatched


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m dmlbench.perf.update",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--what", choices=["leaderboard", "sweeps"], default="leaderboard")
    parser.add_argument("--leaderboard-dir", type=Path, default=Path("results/leaderboard"))
    parser.add_argument("--reports-dir", type=Path, default=Path("reports/leaderboard"))
    parser.add_argument("--work-dir", type=Path, help="records of all runs (required to run)")
    parser.add_argument(
        "--from-records",
        action="store_true",
        help="train nothing: the cost the committed records' run times add up to",
    )
    parser.add_argument(
        "--made-on", default="a CPU not named", help="with --from-records: the CPU that made them"
    )
    parser.add_argument("--jobs", type=int, default=0, help="as dmlbench check --jobs")
    parser.add_argument(
        "--protocol",
        choices=sorted({b.base for b in boards.LEADERBOARD.values()}),
        help="only this protocol's boards (default: every board)",
    )
    parser.add_argument(
        "--compare-with",
        type=Path,
        metavar="DIR",
        help="count the new records' metrics equal to DIR's to the last bit",
    )
    add_common_options(parser)
    args = parser.parse_args(argv)
    jobs = args.jobs or default_jobs()
    if args.from_records:  # nothing runs, so the machine's load does not matter
        if args.what != "leaderboard":
            parser.error("--from-records reports the leaderboard's boards only")
        body = (
            f"Regenerating every board of {_where(args.leaderboard_dir)} from an empty work "
            f"folder, from its records' run times ({jobs} jobs; target: under "
            f"{TARGET_SECONDS // 60} minutes on 2 cores). The runs ran on {args.made_on} (the "
            "records do not name their CPU; this machine's load does not enter):\n\n"
            + markdown_table(records_cost(args.leaderboard_dir, list(boards.LEADERBOARD), jobs))
            + "\n"
        )
        text = f"# dmlbench.perf.update --from-records\n\n{body}"
        print(text)
        if args.out is not None:
            atomic_write_text(args.out, text)
        return 0
    if args.work_dir is None:
        parser.error("--work-dir is required unless --from-records")
    if args.what == "sweeps" and (args.protocol or args.compare_with):
        parser.error("--protocol and --compare-with apply to --what leaderboard")
    refused = refuse_if_busy(args)
    if refused is not None:
        return refused
    info = machine_info()
    names = boards.select_boards(
        boards.LEADERBOARD, [args.protocol] if args.protocol else None, None
    )
    before = _count(args.work_dir)
    start = time.perf_counter()
    if args.what == "leaderboard":
        from dmlbench.leaderboard.update import update_leaderboard

        update_leaderboard(
            args.leaderboard_dir,
            args.reports_dir,
            args.work_dir,
            names,
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
    peer = "" if args.what == "sweeps" else "peer: the target for every board; "
    table = [
        Row("records reused from the work folder (0: the whole cost was measured)", before),
        Row("records made (final runs, search trials, untrained rows)", made),
        Row(
            f"wall time, min ({peer}{os.cpu_count()} CPUs, {jobs} jobs)",
            wall / 60,
            None if args.protocol or args.what == "sweeps" else TARGET_SECONDS / 60,
        ),
    ]
    if args.compare_with is not None:
        equal, total, unmatched = bit_equal(args.leaderboard_dir, args.compare_with, names)
        # The folder as a role, not its path: a report names no path of the measuring machine.
        table.append(Row("metrics equal to --compare-with's to the last bit", equal, total))
        table.append(Row("records --compare-with has no twin of", unmatched))
    only = f" --protocol {args.protocol}" if args.protocol else ""
    if args.what == "sweeps":  # not boards: the sweeps have no share of the boards' budget
        into = _where(args.leaderboard_dir.parent / "sweeps", Path("results/sweeps"))
        what = f"`dmlbench check --update-sweeps` into {into} (no target: not a board)"
    else:
        what = (
            f"`dmlbench check --update{only}` into {_where(args.leaderboard_dir)} (target: under "
            f"{TARGET_SECONDS // 60} minutes on 2 cores for every board)"
        )
    body = f"{what}:\n\n" + markdown_table(table) + "\n"
    emit(f"dmlbench.perf.update --what {args.what}", info, body, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
