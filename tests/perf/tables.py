"""Reading a benchmark script's printed table back: a helper of the perf tests only (the
scripts write their tables with :func:`dmlbench.perf._common.markdown_table`)."""

from __future__ import annotations


def parse_table(text: str) -> list[dict[str, str]]:
    """The rows of every ``figure | ours | peer | ratio`` table in ``text`` (what a benchmark
    script printed)."""
    rows: list[dict[str, str]] = []
    header: list[str] | None = None
    for line in text.splitlines():
        if not line.startswith("|"):
            header = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None:
            header = cells
        elif header[:4] == ["figure", "ours", "peer", "ratio"] and any(
            set(c) - {"-", " "} for c in cells
        ):
            rows.append(dict(zip(header, cells, strict=False)))
    return rows
