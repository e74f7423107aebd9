"""The README's first screen: the top rows of the tuned ``glyphs-mini`` board with its rows
that need no learning, every board against those rows (``gate.md``), and the class-label
section of the cross-data-set report (each method's verdict and rank on every tuned
class-label board, and how far the boards agree).

The excerpt is cut from the committed report (``reports/leaderboard/glyphs-mini-<hash>.md``),
never typed by hand, so the README cannot drift from the board: a test compares the block
between the README's ``<!-- board:begin -->`` and ``<!-- board:end -->`` markers with
:func:`excerpt` of the committed report (and the ``across`` block with :func:`across_excerpt`
of ``cross-dataset.md``), and ``python -m dmlbench.leaderboard.readme`` rewrites both blocks
after ``dmlbench check --update``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dmlbench.errors import DmlbenchError
from dmlbench.records import atomic_write_text

BEGIN, END = "<!-- board:begin -->", "<!-- board:end -->"
ACROSS_BEGIN, ACROSS_END = "<!-- across:begin -->", "<!-- across:end -->"
GATE_BEGIN, GATE_END = "<!-- gate:begin -->", "<!-- gate:end -->"
GATE = "gate.md"
ACROSS = "cross-dataset.md"
ACROSS_SECTION = "## Class labels"
BOARD = "glyphs-mini"  # the tuned board of the default protocol
ROWS = 6


def report_path(reports_dir: Path, board: str = BOARD) -> Path:
    """The board's main Markdown table (not its confidence, budget or override tables)."""
    from dmlbench.leaderboard.boards import leaderboard_protocol

    protocol = leaderboard_protocol(board)
    return reports_dir / f"{protocol.name}-{protocol.short_hash}.md"


def excerpt(report: Path, link: str, rows: int = ROWS) -> str:
    """The report's caption, table header, first ``rows`` trained rows and every row that
    needs no learning, its significance and stability lines, and a link to the whole board."""
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
            *lines[start : start + 2],
            *[line for line in body if not _is_baseline_row(line)][:rows],
            *[line for line in body if _is_baseline_row(line)],
            "",
            *(f"- {note}" for note in notes),  # one bullet each: lines would run together
            "",
            f"Top {rows} rows and the rows that need no learning; {more}.",
        ]
    )


def _is_baseline_row(line: str) -> bool:
    from dmlbench.records import is_baseline

    return is_baseline(line.strip("|").split("|")[0].strip())


def gate_excerpt(report: Path, link: str) -> str:
    """The gate table (every board against the rows that need no learning) and its rule."""
    if not report.is_file():
        raise DmlbenchError(f"{report}: no such report (make it: dmlbench check --render)")
    lines = report.read_text(encoding="utf-8").splitlines()
    table = [line for line in lines if line.startswith("|")]
    if not table:
        raise DmlbenchError(f"{report}: no table in the report")
    rule = [line for line in lines if line.startswith("A board is published")]
    return "\n".join(
        [
            "**Every board against the rows that need no learning** (headline metric, mean "
            f"over seeds, in %; [the table]({link})).",
            "",
            *table,
            "",
            *rule,
        ]
    )


def across_excerpt(report: Path, link: str, rows: int = ROWS) -> str:
    """The class-label section of the cross-data-set report: its lines before the table (which
    data sets, the agreement between them, the caveat), the header and first ``rows`` rows,
    and a link to the whole report."""
    if not report.is_file():
        raise DmlbenchError(f"{report}: no such report (make it: dmlbench check --render)")
    text = report.read_text(encoding="utf-8")
    if ACROSS_SECTION not in text:
        raise DmlbenchError(f"{report}: no '{ACROSS_SECTION}' section")
    lines = text.split(ACROSS_SECTION, 1)[1].split("\n## ", 1)[0].strip("\n").splitlines()
    table = [i for i, line in enumerate(lines) if line.startswith("|")]
    if not table:
        raise DmlbenchError(f"{report}: no table under '{ACROSS_SECTION}'")
    lead = [line for line in lines[: table[0]] if line]
    first = [i for n, i in enumerate(table) if i == table[0] + n]  # the methods' table only
    body = len(first) - 2
    return "\n".join(
        [
            "**Across data sets (class labels, tuned boards).** " + " ".join(lead),
            "",
            *lines[table[0] : table[0] + 2 + rows],
            "",
            f"Top {min(rows, body)} of {body} methods; [the whole comparison]({link}).",
            *_agreement(lines[first[-1] + 1 :]),
        ]
    )


def _agreement(lines: list[str]) -> list[str]:
    """The Kendall τ table's rows as one sentence (none when there is one data set): τ with
    its permutation p-value, Holm-adjusted over the pairs."""
    rows = [line for line in lines if line.startswith("|")][2:]
    cells = [[c.strip() for c in row.strip("|").split("|")] for row in rows]
    pairs = [f"{c[0]} {c[2]} (p {c[4]})" for c in cells if len(c) == 6]
    if not pairs:
        return []
    return [
        "",
        "Rank agreement, Kendall τ with its permutation p-value (Holm over the pairs; a "
        "sample of these data sets, not of data sets in general): " + "; ".join(pairs) + ".",
    ]


def block(readme: Path, begin: str = BEGIN, end: str = END) -> str:
    """The text between the README's markers (without them)."""
    text = readme.read_text(encoding="utf-8")
    if begin not in text or end not in text:
        raise DmlbenchError(f"{readme}: no {begin} … {end} markers")
    return text.split(begin, 1)[1].split(end, 1)[0].strip("\n")


def _replace(text: str, begin: str, end: str, new: str) -> str:
    head, rest = text.split(begin, 1)
    return f"{head}{begin}\n{new}\n{end}{rest.split(end, 1)[1]}"


def write(readme: Path, reports_dir: Path) -> None:
    """Replace the README's blocks by the excerpts of the committed reports (atomically)."""
    text = readme.read_text(encoding="utf-8")
    board = excerpt(report_path(reports_dir), link=f"{reports_dir.as_posix()}/index.html")
    across = across_excerpt(reports_dir / ACROSS, link=f"{reports_dir.as_posix()}/{ACROSS}")
    gates = gate_excerpt(reports_dir / GATE, link=f"{reports_dir.as_posix()}/{GATE}")
    text = _replace(text, BEGIN, END, board)
    text = _replace(text, GATE_BEGIN, GATE_END, gates)
    atomic_write_text(readme, _replace(text, ACROSS_BEGIN, ACROSS_END, across))


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
        block(args.readme, ACROSS_BEGIN, ACROSS_END)
        block(args.readme, GATE_BEGIN, GATE_END)
        write(args.readme, args.reports_dir)
    except (DmlbenchError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"written: the board and across-data-sets excerpts of {args.readme}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
