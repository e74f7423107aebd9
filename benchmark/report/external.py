"""External models on a board: shown in a section of their own, never ranked.

An ``external`` record (``dmlbench evaluate``, ``dmlbench.evaluate_external``) scores a model
trained elsewhere, on other data and with another budget, on a protocol's test split. Its
numbers are measured exactly as a method's, but ranking it against methods held to the
protocol's equal budget would be the unfair comparison the boards exist to avoid: it gets no
verdict, no bold and no P(rank), and enters no ranking, defaults-vs-tuned table or budget.
Each table names who trained the model, on what, and its embedding size instead.

Per protocol hash with external records: ``<protocol>-<hash12>-external.md`` / ``.csv``; the
board's own Markdown (``<stem>.md``) ends with the same section, and its HTML page's results
frame carries the rows with ``section`` = :data:`EXTERNAL` (:func:`with_external_rows`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from dmlbench.records import Record, atomic_write_text
from dmlbench.report.tables import (
    format_table,
    numeric_summary,
    records_frame,
    render_markdown,
    summary_table,
    to_csv,
)

TITLE = "External models: not trained under this protocol's budget"
TEXT = (
    "Models trained elsewhere (their own data, budget and tuning), scored with this protocol's "
    "metrics on its test split (dmlbench evaluate). Never ranked against the methods trained "
    "under the protocol: no verdict, no bold, no P(rank)."
)
PROTOCOL, EXTERNAL = "protocol", "external"  # the ``section`` of a page's results rows
ABOUT = ["trained_by", "trained_on", "embedding_size"]


def split_external(records: Iterable[Record]) -> tuple[list[Record], list[Record]]:
    """(records of runs under the protocol, external records)."""
    runs: list[Record] = []
    external: list[Record] = []
    for r in records:
        (external if r.stage == "external" else runs).append(r)
    return runs, external


def by_hash(records: Iterable[Record]) -> dict[str, list[Record]]:
    out: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        out[r.protocol.hash].append(r)
    return dict(out)


def _about(records: list[Record]) -> pd.DataFrame:
    """Who trained each model, on what, its embedding size (the latest record's words)."""
    rows = {r.method: r.external.model_dump(include=set(ABOUT)) for r in records if r.external}
    return pd.DataFrame.from_dict(rows, orient="index", columns=ABOUT)


def external_table(records: list[Record]) -> pd.DataFrame:
    """Display strings of one protocol hash's external models: metrics in %, as the board
    shows them (mean ± std over evaluation seeds), then who trained each on what."""
    shown = format_table(summary_table(records_frame(records)))
    return shown.join(_about(records).astype(str))


def external_numbers(records: list[Record]) -> pd.DataFrame:
    """The CSV: the board's numeric summary columns, then who trained each model on what."""
    return numeric_summary(records_frame(records)).join(_about(records))


def external_markdown(records: list[Record]) -> str:
    """The section that ends a board's Markdown (empty without external records)."""
    if not records:
        return ""
    return f"\n## {TITLE}\n\n{TEXT}\n\n{render_markdown(external_table(records), 'model')}\n"


def write_external(records: Iterable[Record], out_dir: Path) -> list[Path]:
    """``<protocol>-<hash12>-external.md`` / ``.csv`` per protocol hash with external records."""
    written = []
    for h, group in sorted(by_hash(records).items()):
        stem = f"{group[0].protocol.name}-{h[:12]}-external"
        md, csv = out_dir / f"{stem}.md", out_dir / f"{stem}.csv"
        out_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_text(md, external_markdown(group).lstrip("\n"))
        atomic_write_text(csv, to_csv(external_numbers(group).rename_axis("model")))
        written += [md, csv]
    return written


def with_external_rows(results: pd.DataFrame, records: list[Record]) -> pd.DataFrame:
    """A page's results with the external models' rows after the board's, told apart by a
    first column ``section`` (:data:`PROTOCOL` or :data:`EXTERNAL`), so a page renders them
    as a table of their own; unchanged without external records."""
    if not records:
        return results
    board = results.assign(**{s: "" for s in ABOUT})
    rows = pd.concat([board, external_table(records)]).astype(object).fillna("")
    section = [PROTOCOL] * len(results) + [EXTERNAL] * (len(rows) - len(results))
    rows.insert(0, "section", section)
    return rows
