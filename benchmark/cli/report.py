"""``dmlbench report``: tables, plots and pages from the records in a results folder."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dmlbench.errors import DmlbenchError, did_you_mean

if TYPE_CHECKING:
    from dmlbench.records import Record


def cmd_report(args: argparse.Namespace) -> int:
    from dmlbench.cli.options import reports_folder
    from dmlbench.records import load_records
    from dmlbench.report.build import build_reports

    root = Path(args.results_dir)
    if not root.is_dir():
        raise DmlbenchError(f"{root}: no results folder (run `dmlbench run` first)")
    reports = reports_folder(args)
    # The committed leaderboard (results/leaderboard) is its own board: mixed into a user's
    # results it would count its seeds a second time. Read only when asked for.
    skip = () if args.include_leaderboard else ("leaderboard",)
    read, problems = load_records(root, skip=skip)
    for p in problems:
        print(f"warning: {p}", file=sys.stderr)
    records = select_records(read, root, args)
    if args.format == "json":
        return _write_json(records, reports)
    from dmlbench.report.kept import find_kept

    written = build_reports(
        records, reports, root / "published", kept=find_kept(root), baseline=args.baseline
    )
    for path in written:  # every table, the published numbers they meet included
        if path.suffix == ".md":
            print(path.read_text(encoding="utf-8"))
    print(f"written: {len(written)} files to {args.reports_dir} (.md .csv .tex .html .png .svg)")
    return 0


def select_records(read: list[Record], root: Path, args: argparse.Namespace) -> list[Record]:
    """The records ``report`` tabulates: sweep points only with ``--sweeps`` (or a
    ``--protocol`` naming one), and only ``--protocol``'s.

    A sweep's points (``P@KEY=VALUE``, :func:`dmlbench.report.plots.is_sweep_point`) are one
    experiment with its own report (``dmlbench sweep``, or ``--sweeps``): mixed into the default
    report, a fresh clone's ``results/sweeps`` alone gave 177 files.

    Raises:
        DmlbenchError: nothing left; the one line names each filter applied, the folder read
            and the closest protocol name there, since "no records found" alone sends a user
            looking in the wrong place.
    """
    from dmlbench.report.plots import is_sweep_point

    sweeps = args.sweeps or (args.protocol is not None and is_sweep_point(args.protocol))
    swept = [r for r in read if is_sweep_point(r.protocol.name)]
    records = read if sweeps else [r for r in read if not is_sweep_point(r.protocol.name)]
    candidates = records
    if args.protocol:
        records = [r for r in records if r.protocol.name == args.protocol]
    if records:
        return records
    where = f"{root}: no records found"
    if args.protocol:
        names = sorted({r.protocol.name for r in candidates})
        hint = did_you_mean(args.protocol, names)
        shown = ", ".join(names[:8]) + (", …" if len(names) > 8 else "")
        there = f"; protocols there: {shown}" if names else ""
        where += f" for --protocol {args.protocol}{hint}{there}"
    left_out = []
    if not args.include_leaderboard and (root / "leaderboard").is_dir():
        left_out.append(f"{root / 'leaderboard'} (--include-leaderboard reads it)")
    if swept and not sweeps:
        left_out.append(f"{len(swept)} records of sweep points (--sweeps reports them)")
    if left_out:
        where += "; left out: " + ", ".join(left_out)
    if not read:
        where += "; `dmlbench run` writes records there"
    raise DmlbenchError(where)


def _write_json(records: list[Record], reports_dir: Path) -> int:
    """``<reports-dir>/results.json``: the rows of :func:`dmlbench.load_results` for the
    records this command read (so ``--protocol`` and ``--include-leaderboard`` apply).

    The data get the tables' checks: a run present twice is one row set (with the tables'
    warning), and a protocol hash computed on two copies of the data or in two precisions is
    refused, since a reader averaging the rows would otherwise count a seed twice or mix
    conditions.
    """
    from dmlbench.records import atomic_write_text
    from dmlbench.report.build import unique_records
    from dmlbench.report.results import results_frame, results_json
    from dmlbench.report.tables import check_one_condition

    records = unique_records(records)
    check_one_condition(records)
    frame = results_frame(records)
    reports_dir.mkdir(parents=True, exist_ok=True)
    path = reports_dir / "results.json"
    atomic_write_text(path, results_json(frame))
    print(f"written: {path} ({len(frame)} rows, one per record and metric)")
    return 0


# This command's place in ``dmlbench --help`` (:func:`dmlbench.cli.main.command_modules`).
ORDER = 60


def add_parser(subparsers: Any) -> None:
    report = subparsers.add_parser(
        "report",
        help="tables of the records in a results folder",
        description="Read every record under --results-dir, group by protocol hash and write "
        "per hash a Markdown/CSV/LaTeX table (a verdict per method against the best of the "
        "others; bold: not worse than the best), a bar plot, a forest plot, "
        "reported-vs-reproduced, confidence "
        "and budget tables and an HTML page, plus cross-dataset.md (each method's verdict and "
        "rank on every tuned board of its label kind, Kendall τ between data sets) and "
        "X-defaults-vs-tuned.md where X and X@defaults are both present; with --format json "
        "only REPORTS_DIR/results.json, one row per record and metric. Sweep points are left out "
        "unless --sweeps is given.",
    )
    report.add_argument(
        "--results-dir", default="results", help="records to read (default: results)"
    )
    report.add_argument("--reports-dir", default="reports", help="output folder (default: reports)")
    report.add_argument("--protocol", default=None, help="only this protocol name")
    report.add_argument(
        "--sweeps",
        action="store_true",
        help="also the records of sweep points (protocols named PROTOCOL@KEY=VALUE by "
        "`dmlbench sweep`): a table per point and a plot per sweep, never ranked; left out by "
        "default (`--results-dir results/sweeps --sweeps` reports the committed sweeps)",
    )
    report.add_argument(
        "--include-leaderboard",
        action="store_true",
        help="also read RESULTS_DIR/leaderboard (the committed board; by default left out so "
        "that its seeds are not counted beside yours; `--results-dir results/leaderboard` "
        "reports it alone)",
    )
    report.add_argument(
        "--baseline",
        default="untrained",
        metavar="METHOD",
        help="the method whose retrieval grid is drawn beside the best method's (default: "
        "untrained); grids and maps need seed 0's kept test embeddings (dmlbench run keeps "
        "them unless --no-keep)",
    )
    report.add_argument(
        "--format",
        choices=("all", "json"),
        default="all",
        help="all: every table, plot and page (default); json: only REPORTS_DIR/results.json, "
        "the records as data (one row per record and metric, as dmlbench.load_results)",
    )
    report.set_defaults(func=cmd_report)
