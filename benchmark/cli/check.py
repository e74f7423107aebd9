"""``dmlbench check``: the leaderboard regression check (and ``--update``) from the shell.

What is checked and how the tolerances are derived: :mod:`dmlbench.leaderboard.check`.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from dmlbench.leaderboard import boards
from dmlbench.leaderboard.boards import DEFAULTS, TUNED, select_boards
from dmlbench.leaderboard.check import CheckedEntry, Row, format_rows, record_path, run_check
from dmlbench.leaderboard.tasks import default_jobs
from dmlbench.leaderboard.tolerances import CAP, TOLERANCES, K

EPILOG = """examples:
  dmlbench check                                  # every board (a declared subset of some)
  dmlbench check --all                            # every entry of every board
  dmlbench check --protocol glyphs-mini --board tuned --method contrastive,untrained
  dmlbench check --update --jobs 2                # regenerate: searches, seeds, tolerances, report
  dmlbench check --record-path intel --jobs 2     # this machine's numeric path, for its re-runs
  dmlbench check --record-path intel --protocol glyphs-mini  # only its boards (added since)
  dmlbench check --keep-embeddings --jobs 2       # and keep the pictured entries' embeddings
"""


def cmd_check(args: argparse.Namespace) -> int:
    lb_dir = Path(args.leaderboard_dir)
    names = select_boards(
        boards.LEADERBOARD, [args.protocol] if args.protocol else None, args.board
    )
    start, cpu_start, load = time.perf_counter(), _cpu_seconds(), os.getloadavg()[0]
    jobs = args.jobs or default_jobs()
    progress = not args.no_progress and jobs == 1
    if args.update_sweeps:
        return _update_sweeps(args, lb_dir, jobs)
    if args.render:
        return _render(lb_dir, Path(args.reports_dir))
    if args.record_path:
        path = record_path(
            lb_dir, args.record_path, jobs, _print_entry,
            lambda line: print(line, file=sys.stderr),
            names if args.protocol or args.board else None,
        )  # fmt: skip
        print(f"written: {path}")
        return 0
    if args.update:
        from dmlbench.leaderboard.update import default_work_dir, update_leaderboard

        work = Path(args.work_dir) if args.work_dir else default_work_dir()
        update_leaderboard(
            lb_dir,
            Path(args.reports_dir),
            work,
            names,
            args.method,
            progress=progress,
            jobs=jobs,
        )
        print(f"written: {lb_dir / TOLERANCES}, every seed's records and {args.reports_dir}")
        failed: list[Row] = []
    else:
        rows = run_check(
            lb_dir, names, args.method, progress=progress, jobs=jobs, strict=args.strict,
            on_entry=_print_entry, on_note=lambda line: print(line, file=sys.stderr),
            everything=args.all, keep_embeddings=args.keep_embeddings,
        )  # fmt: skip
        print(format_rows(rows))
        failed = [r for r in rows if not r.ok]
        if failed:
            moved = "; ".join(
                f"{r.protocol}/{r.method} {r.metric} ({r.diff:+.4f}, tolerance {r.tolerance:.4f})"
                for r in failed
            )
            print(
                f"check FAILED: {len(failed)} of {len(rows)} metrics moved more than their "
                f"tolerance: {moved}"
            )
        else:
            print(f"check passed: {len(rows)} metrics within tolerance")
    wall, cpu = time.perf_counter() - start, _cpu_seconds() - cpu_start
    print(
        f"total wall time {wall // 60:.0f} min {wall % 60:04.1f} s, CPU time "
        f"{cpu // 60:.0f} min {cpu % 60:04.1f} s (load average {load:.2f} at start, "
        f"{os.getloadavg()[0]:.2f} at end, {os.cpu_count()} CPUs)"
    )
    return 1 if failed else 0


def _print_entry(e: CheckedEntry) -> None:
    verdict = f"FAIL {', '.join(e.failed)}" if e.failed else "ok"
    print(
        f"[{e.index:2}/{e.total}] {e.protocol} {e.method:22} {e.seconds:6.1f} s  {verdict}",
        file=sys.stderr,
        flush=True,
    )


def _update_sweeps(args: argparse.Namespace, lb_dir: Path, jobs: int) -> int:
    """``--update-sweeps``: the sweeps into ``<results>/sweeps`` and ``<reports>/sweeps``
    (beside the leaderboard's folders), then the leaderboard's index, which shows them."""
    from dmlbench.leaderboard.sweeps import update_sweeps
    from dmlbench.leaderboard.update import default_work_dir, write_report

    start = time.perf_counter()
    work = Path(args.work_dir) if args.work_dir else default_work_dir()
    reports = Path(args.reports_dir)
    update_sweeps(lb_dir.parent / "sweeps", reports.parent / "sweeps", work, jobs)
    if lb_dir.is_dir():
        write_report(lb_dir, reports)
    wall = time.perf_counter() - start
    print(
        f"written: {lb_dir.parent / 'sweeps'} and {reports.parent / 'sweeps'} "
        f"(total wall time {wall // 60:.0f} min {wall % 60:04.1f} s)"
    )
    return 0


def _render(lb_dir: Path, reports: Path) -> int:
    """``--render``: the sweeps' and the leaderboard's reports from the committed records."""
    from dmlbench.leaderboard.sweeps import write_sweep_reports
    from dmlbench.leaderboard.update import write_report

    sweeps = lb_dir.parent / "sweeps"
    written = write_sweep_reports(sweeps, reports.parent / "sweeps") if sweeps.is_dir() else []
    written += write_report(lb_dir, reports)
    print(f"written: {len(written)} report files from the committed records (no run)")
    return 0


def _cpu_seconds() -> float:
    """CPU time of this process and of its finished child processes (the ``--jobs``)."""
    import resource

    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def _csv(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


# This command's place in ``dmlbench --help`` (:func:`dmlbench.cli.main.command_modules`).
ORDER = 70


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "check",
        help="re-run the embedded leaderboard and fail when a metric moved",
        description="Re-run seed 0 of the committed leaderboard's entries (every protocol's "
        "defaults board with paper defaults, its tuned board with the committed search "
        "selections; --all for the entries boards.CHECK_SUBSET leaves out) in a temporary "
        "folder, print a diff table and exit 1 when a metric "
        f"moved more than its tolerance (k × the std over the board's seeds, k = {K:g}, capped "
        f"at {CAP:g} for 0-1 metrics so that a 2-point drop fails; stored in {TOLERANCES}). "
        "Exit 2 when the shipped protocol or the data changed since the leaderboard was made. "
        "--update regenerates the leaderboard.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--protocol",
        # read when the parser is built (tests patch it)
        choices=sorted({b.base for b in boards.LEADERBOARD.values()}),
        default=None,
        help="only this protocol's boards (default: every protocol's)",
    )
    p.add_argument(
        "--board",
        choices=[DEFAULTS, TUNED],
        default=None,
        help="only this board: paper defaults or tuned (default: both)",
    )
    p.add_argument(
        "--method",
        type=_csv,
        default=None,
        help="comma-separated subset of entries, e.g. contrastive,untrained",
    )
    p.add_argument(
        "--all",
        action="store_true",
        help="re-run every entry of every board; by default the boards in "
        "boards.CHECK_SUBSET re-run a declared subset, e.g. one entry per loss family "
        "(CI's time budget)",
    )
    p.add_argument(
        "--leaderboard-dir",
        default="results/leaderboard",
        help="committed leaderboard (default: results/leaderboard)",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="keep the capped tolerances off the portable numeric path too (x86-64 Linux "
        "with AVX2 replays the boards bit for bit on any CPU model; elsewhere the tolerances "
        "widen to 3 x the seed spread by default, since re-runs there drift by seed-like "
        "noise)",
    )
    p.add_argument(
        "--update",
        action="store_true",
        help="regenerate instead of checking: run each tuned method's search and every "
        f"board's seeds, write every seed's records, the search trials, {TOLERANCES} and the "
        "report (slow: hours on 2 cores, docs/leaderboard.md; resumable from --work-dir)",
    )
    p.add_argument(
        "--record-path",
        metavar="NAME",
        default=None,
        help="on a machine whose numeric path is not the board's (another CPU vendor: the "
        "fingerprint says), re-run every entry and write paths/NAME.yaml under the "
        "leaderboard folder, so that the check compares this path's re-runs with its own "
        "values (run it at the board's commit; docs/leaderboard.md); with --protocol or "
        "--board only those boards, keeping the file's values of the others",
    )
    p.add_argument(
        "--render",
        action="store_true",
        help="rewrite the leaderboard's and the sweeps' reports from the committed records, "
        "without running anything (after a change of the report code)",
    )
    p.add_argument(
        "--update-sweeps",
        action="store_true",
        help="regenerate the sweeps instead (embedding size and batch size on glyphs-mini, "
        "embedding size on poses-mini, 3 seeds; records into results/sweeps, report and plots "
        "into reports/sweeps, beside the leaderboard's folders; resumable from --work-dir)",
    )
    p.add_argument(
        "--reports-dir",
        default="reports/leaderboard",
        help="with --update: where the report goes (default: reports/leaderboard)",
    )
    p.add_argument(
        "--work-dir",
        default=None,
        help="with --update: records of all seeds, reused when the update is "
        "interrupted (default: $DMLBENCH_CACHE/leaderboard-runs)",
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=0,
        help="runs side by side, one torch thread each, as the leaderboard was made; the "
        "numbers do not depend on it (default: the number of CPUs, at most 8; 1 shows "
        "progress bars)",
    )
    p.add_argument(
        "--keep-embeddings",
        action="store_true",
        help="keep each passing re-run's test embeddings (float16) as the board's picture file "
        "(<board>/<hash>/pictures/<method>-seed0-test.npz), from which `dmlbench report` draws "
        "the retrieval grids and embedding maps; without --method only the entries the pictures "
        "need (each board's best method and untrained)",
    )
    p.add_argument("--no-progress", action="store_true", help="hide training progress bars")
    p.set_defaults(func=cmd_check)
