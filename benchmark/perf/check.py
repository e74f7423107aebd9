"""Wall time of ``dmlbench check``: the whole embedded leaderboard, re-run (issue #8.4).

``python -m dmlbench.perf.check`` runs what ``dmlbench check`` runs (every committed entry
of ``results/leaderboard``, or a board's ``CHECK_SUBSET``, seed 0, in a temporary folder;
``--all`` every entry, as ``dmlbench check --all``) and prints, per entry, the
seconds of the re-run and how many of them were training (the record's ``train_seconds``;
the rest is data loading, evaluation and records). The last rows compare the whole check
with its target, 15 minutes on 2 CPU cores (ratio = ours / target, ≤ 1 meets it), and say
whether the check itself passed. It has no peer: nothing else runs this leaderboard.

One run, not the median of rounds: the figure is a wall time of about ten minutes that
``dmlbench check`` users pay once, and three runs would keep a shared machine busy for half an
hour. The load average at the start and end, and the refusal to write ``--out`` on a busy
machine (see ``dmlbench.perf._common``), apply as to the other scripts.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Sequence
from pathlib import Path

from dmlbench.leaderboard import boards
from dmlbench.leaderboard.boards import DEFAULTS, TUNED, select_boards
from dmlbench.leaderboard.check import format_rows, run_check
from dmlbench.leaderboard.tasks import default_jobs
from dmlbench.perf._common import (
    Row,
    add_common_options,
    emit,
    machine_info,
    markdown_table,
    refuse_if_busy,
)
from dmlbench.records import Record

TARGET_SECONDS = 15 * 60


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m dmlbench.perf.check",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--protocol",
        choices=sorted({b.base for b in boards.LEADERBOARD.values()}),
        default=None,
    )
    parser.add_argument("--board", choices=[DEFAULTS, TUNED], default=None)
    parser.add_argument("--method", action="append", help="only these entries (repeatable)")
    parser.add_argument(
        "--all",
        action="store_true",
        help="as dmlbench check --all: every entry, also those CHECK_SUBSET leaves to it "
        "(timed without a target: the target is CI's plain check)",
    )
    parser.add_argument("--leaderboard-dir", type=Path, default=Path("results/leaderboard"))
    parser.add_argument(
        "--jobs", type=int, default=0, help="as dmlbench check --jobs (default: the CPUs, ≤ 8)"
    )
    add_common_options(parser)
    args = parser.parse_args(argv)
    refused = refuse_if_busy(args)
    if refused is not None:
        return refused
    info = machine_info()
    entries: list[tuple[str, str, float, Record]] = []
    start = time.perf_counter()
    rows = run_check(
        args.leaderboard_dir,
        select_boards(boards.LEADERBOARD, [args.protocol] if args.protocol else None, args.board),
        args.method,
        progress=False,
        on_entry=lambda e: entries.append((e.protocol, e.method, e.seconds, e.record)),
        jobs=args.jobs or default_jobs(),
        everything=args.all,
    )
    wall = time.perf_counter() - start
    table = [
        Row(
            f"{n} {m}: s (peer column: of which training)",
            seconds,
            record.timings.train_seconds,
            ratio=record.timings.train_seconds / seconds if seconds else None,
        )
        for n, m, seconds, record in entries
    ]
    training = sum(r.timings.train_seconds for *_, r in entries)
    failed = [r for r in rows if not r.ok]
    table += [
        Row(
            "whole check: training summed over the jobs, min (ratio = that / wall time)",
            training / 60,
            ratio=training / wall if wall else None,
        ),
        Row(
            f"whole check: wall time, min (peer: the target; {os.cpu_count()} CPUs)",
            wall / 60,
            None if args.all else TARGET_SECONDS / 60,
        ),
        Row(
            "metrics equal to the committed value (to the last bit)",
            f"{sum(r.diff == 0 for r in rows)} of {len(rows)}",
        ),
        Row(
            "check verdict",
            f"{'FAILED' if failed else 'passed'}: {len(rows) - len(failed)} of {len(rows)} "
            "metrics within tolerance",
        ),
    ]
    body = (
        f"`dmlbench check{' --all' if args.all else ''}` of {args.leaderboard_dir}, "
        f"{len(entries)} entries, "
        f"{args.jobs or default_jobs()} job(s) (target: the whole check under 15 minutes on 2 "
        "cores):\n\n"
        + markdown_table(table)
        + (f"\n\nMoved beyond tolerance:\n\n```\n{format_rows(failed)}\n```" if failed else "")
        + "\n"
    )
    emit("dmlbench.perf.check", info, body, args.out)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
