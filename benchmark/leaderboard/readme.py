"""The README's first screen: the top rows of the tuned ``glyphs-mini`` board.

The excerpt is cut from the committed report (``reports/leaderboard/glyphs-mini-<hash>.md``),
never typed by hand, so the README cannot drift from the board: a test compares the block
between the README's ``<!-- board:begin -->`` and ``<!-- board:end -->`` markers with
:func:`excerpt` of the committed report, and ``python -m dmlbench.leaderboard.readme``
rewrites the block after ``dmlbench check --update``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dmlbench.errors import DmlbenchError
from dmlbench.records import atomic_write_text

BEGIN, END = "<!-- board:begin -->", "<!-- board:end -->"
BOARD = "glyphs-mini"  # the tuned board of the default protocol
ROWS = 6


def report_path(reports_dir: Path, board: str = BOARD) -> Path:
    """The board's main Markdown table (not its confidence, budget or override tables)."""
    from dmlbench.leaderboard.boards import leaderboard_protocol

    protocol = leaderboard_protocol(board)
    return reports_dir / f"{protocol.name}-{protocol.short_hash}.md"


def excerpt(report: Path, link: str, rows: int = ROWS) -> str:
    """The report's caption, table header and first ``rows`` rows, its significance and
    stability lines, and a link to the whole board."""
    if not report.is_file():
        raise DmlbenchError(f"{report}: no such report (make it: dmlbench check --update)")
    lines = report.read_text(encoding="utf-8").splitlines()
    table = [i for i, line in enumerate(lines) if line.startswith("|")]
    if not table:
        raise DmlbenchError(f"{report}: no table in the report")
    start, end = table[0], table[-1]
    body = lines[start + 2 : end + 1]
    caption = [line for line in lines[:start] if line and not line.startswith("#")]
    notes = [
        line
        for line in lines[end + 1 :]
        if line.startswith(("Bold", "Not significantly", "Stability"))
    ]
    title = lines[0].lstrip("# ")
    more = f"[all {len(body)} rows, the defaults board and the sweeps]({link})"
    return "\n".join(
        [
            f"**{title}.** {' '.join(caption)}",  # the title names the board and budget
            "",
            *lines[start : start + 2 + rows],
            "",
            *(f"- {note}" for note in notes),  # one bullet each: lines would run together
            "",
            f"Top {rows} rows; {more}.",
        ]
    )


def block(readme: Path) -> str:
    """The text between the README's markers (without them)."""
    text = readme.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        raise DmlbenchError(f"{readme}: no {BEGIN} … {END} markers")
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n")


def write(readme: Path, reports_dir: Path) -> None:
    """Replace the README's block by the excerpt of the committed report (atomically)."""
    text = readme.read_text(encoding="utf-8")
    new = excerpt(report_path(reports_dir), link=f"{reports_dir.as_posix()}/index.html")
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    atomic_write_text(readme, f"{head}{BEGIN}\n{new}\n{END}{tail}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m dmlbench.leaderboard.readme",
        description="Rewrite the README's board excerpt from the committed leaderboard report.",
    )
    parser.add_argument("--readme", type=Path, default=Path("README.md"))
    parser.add_argument("--reports-dir", type=Path, default=Path("reports/leaderboard"))
    args = parser.parse_args(argv)
    try:
        block(args.readme)  # refuses a README without markers before anything is written
        write(args.readme, args.reports_dir)
    except (DmlbenchError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"written: the board excerpt of {args.readme}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
