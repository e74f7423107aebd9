"""Tables of results, one per protocol hash.

Numbers obtained under different protocol hashes are never put in one table: a different hash
means a different data set, split, backbone, pipeline, budget or seed set, and a side-by-side
comparison would be exactly the unfair comparison this project exists to avoid.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dmlbench.errors import DmlbenchError
from dmlbench.metrics import catalogue
from dmlbench.metrics.stats import t_interval
from dmlbench.records import (
    BASELINES,
    CONTROL_CHARACTERS,
    Record,
    atomic_write_text,
    record_precision,
)

HIDDEN = {"queries", "lone_queries"}


class MixedProtocolsError(DmlbenchError):
    """Records of different protocol hashes were passed to one table."""


def check_one_condition(records: Iterable[Record]) -> None:
    """Refuse a protocol hash whose records were made under different conditions that the hash
    does not cover: different data, or a different training precision.

    ``data.root`` is not part of the protocol hash (it is machine-specific), so two copies of
    a data set (one damaged or re-packed) give the same hash; the data fingerprint in every
    record tells them apart. Neither is the precision (``--amp``, a run option): bf16 on CUDA
    and fp32 on the CPU give different numbers under one hash, told apart by ``env.precision``
    (``fp32`` where a record predates it). One table must never average over either.

    Raises:
        DmlbenchError: one line naming the protocol, its hash and both values.
    """
    conditions: dict[str, tuple[str, set[str], set[str]]] = {}
    for r in records:
        name, prints, precisions = conditions.setdefault(
            r.protocol.hash, (r.protocol.name, set(), set())
        )
        prints.add(r.data_fingerprint)
        precisions.add(record_precision(r))
    for h, (name, prints, precisions) in conditions.items():
        if len(prints) > 1:
            shown = ", ".join(sorted(f[:12] for f in prints))
            raise DmlbenchError(
                f"{name} ({h[:12]}): records computed on different data (fingerprints "
                f"{shown}); report them from separate results folders"
            )
        if len(precisions) > 1:
            raise DmlbenchError(
                f"{name} ({h[:12]}): records trained in different precisions "
                f"({', '.join(sorted(precisions))}); report them from separate results folders "
                "(`--amp off` trains in fp32 on CUDA too)"
            )


def variant_label(overrides: Mapping[str, Any]) -> str:
    """The overrides of a run as ``key=value`` pairs (nested keys dotted), sorted."""

    def flat(prefix: str, value: Any) -> list[str]:
        if isinstance(value, Mapping):
            return [p for k, v in sorted(value.items()) for p in flat(f"{prefix}{k}.", v)]
        return [f"{prefix[:-1]}={value}"]

    return ", ".join(flat("", overrides))


def row_labels(records: Sequence[Record]) -> list[str]:
    """The row each record belongs to: its method, and its overrides where the same method
    was run with other overrides too.

    Two runs that differ in what was run (``--max-steps 3`` and ``--max-steps 150``, two
    ``--hparam`` values) must never be averaged into one row: every table, test and plot
    groups by this label, so each variant is its own row, named by what sets it apart.
    """
    variants: dict[str, set[str]] = {}
    for r in records:
        variants.setdefault(r.method, set()).add(variant_label(r.overrides))
    return [
        f"{r.method} ({variant_label(r.overrides) or 'no overrides'})"
        if len(variants[r.method]) > 1
        else r.method
        for r in records
    ]


def records_frame(records: Iterable[Record]) -> pd.DataFrame:
    """One row per record: protocol, method (its row label, :func:`row_labels`), seed, stage,
    overrides flag and every metric."""
    records = list(records)
    rows = []
    for r, label in zip(records, row_labels(records), strict=True):
        rows.append(
            {
                "protocol": r.protocol.name,
                "version": r.protocol.version,
                "protocol_hash": r.protocol.hash,
                "method": label,
                "seed": r.seed,
                "stage": r.stage,
                "overridden": bool(r.overrides),
                "train_seconds": r.timings.train_seconds,
                **{k: v for k, v in r.metrics.items() if k not in HIDDEN},
            }
        )
    return pd.DataFrame(rows)


def metric_columns(df: pd.DataFrame) -> list[str]:
    cols = [c for c in df.columns if catalogue.is_metric_column(c)]
    return sorted(cols, key=catalogue.order_key)


class Shown(str):
    """A table cell's display string that keeps the number it shows (``value``, in the
    frame's units: fractions, label distances, counts).

    Markdown, LaTeX and CSV use the string as it is; the HTML page writes ``value`` into the
    cell's ``data-value`` so its script sorts by the number, never by re-reading the text.
    """

    value: float

    def __new__(cls, text: str, value: float) -> Shown:
        cell = super().__new__(cls, text)
        cell.value = float(value)
        return cell


def summary_table(df: pd.DataFrame) -> pd.DataFrame:
    """Mean and std over seeds per method, for the records of exactly one protocol hash.

    Returns a frame indexed by method with columns ``<metric>`` (mean), ``<metric>_std`` (NaN
    for one seed) and ``seeds``; methods sorted by the first metric, best first, the untrained
    baseline last.
    """
    hashes = df["protocol_hash"].unique()
    if len(hashes) > 1:
        raise MixedProtocolsError(
            f"refusing to put {len(hashes)} protocol hashes in one table "
            f"({', '.join(h[:12] for h in hashes)}): different hashes mean different conditions"
        )
    metrics = metric_columns(df)
    grouped = df.groupby("method")
    table = grouped[metrics].mean()
    std = grouped[metrics].std(ddof=1).add_suffix("_std")  # NaN with one seed: no spread
    table = table.join(std)
    table["seeds"] = grouped["seed"].nunique()
    if metrics:
        table = table.sort_values(metrics[0], ascending=False)
    last = [b for b in BASELINES if b in table.index]  # the rows that need no learning, last
    table = pd.concat([table.drop(index=last), table.loc[last]])
    return table


def format_table(
    table: pd.DataFrame, percent: bool = True, bold: Mapping[str, Collection[str]] | None = None
) -> pd.DataFrame:
    """Display strings: ``mean ± std`` (in %, as papers report them), or the value alone for a
    method with one seed (no ``± 0.0`` that would claim no spread).

    ``bold`` maps a metric to the methods whose cell is bold (the methods not significantly
    worse than the best, :mod:`dmlbench.report.board`); nothing is bold without it, because a
    higher mean alone is no evidence of a better method. A row that needs no learning is never
    bold.
    """
    metrics = [c for c in table.columns if not c.endswith("_std") and c != "seeds"]
    bold = bold or {}
    out = pd.DataFrame(index=table.index)
    for m in metrics:
        # mean label distance is in label units and lower is better; the rest are fractions
        digits, factor = catalogue.digits(m), catalogue.scale(m, percent)
        chosen = set(bold.get(m, ())) - set(BASELINES)
        cells = []
        for method, row in table.iterrows():
            if pd.isna(row[m]):
                cells.append("—")
                continue
            text = f"{row[m] * factor:.{digits}f}"
            std = row.get(m + "_std", math.nan)
            if row["seeds"] > 1 and pd.notna(std):
                text += f" ± {std * factor:.{digits}f}"
            cells.append(Shown(f"**{text}**" if method in chosen else text, row[m]))
        out[m] = cells
    out["seeds"] = table["seeds"].astype(int)
    return out


def numeric_summary(df: pd.DataFrame) -> pd.DataFrame:
    """The machine-readable summary of one protocol hash, for its CSV.

    Per metric ``<metric>_mean``, ``_std`` and the 95% Student-t interval of the mean over seeds
    ``_lo`` / ``_hi`` (in the records' units: fractions, label distances for ``mld@K``), then
    ``n_seeds``. A value that does not exist (the std or interval of one seed, a metric a
    method lacks) is NaN, an empty cell in the CSV, never 0 or "n/a".
    """
    order = summary_table(df).index
    metrics = metric_columns(df)
    rows = {}
    for method, part in df.groupby("method"):
        row: dict[str, float] = {}
        for m in metrics:
            values = part[m].dropna().to_numpy(dtype=np.float64)
            mean, half = t_interval(values)
            std = float(values.std(ddof=1)) if values.size > 1 else math.nan
            row |= {
                f"{m}_mean": mean,
                f"{m}_std": std,
                f"{m}_lo": mean - half,
                f"{m}_hi": mean + half,
            }
        rows[method] = row | {"n_seeds": part["seed"].nunique()}
    columns = [f"{m}_{s}" for m in metrics for s in ("mean", "std", "lo", "hi")] + ["n_seeds"]
    out = pd.DataFrame.from_dict(rows, orient="index", columns=columns).loc[order]
    out.index.name = "method"
    return out


def to_csv(frame: pd.DataFrame) -> str:
    """CSV text: floats as Python prints them (they read back exactly), missing values empty."""
    return frame.to_csv(na_rep="")


def markdown_cell(value: object) -> str:
    """``value`` as the text of one Markdown table cell, whatever it holds.

    A ``|`` would end the cell (``--trained-by 'x | 99.9 | ...'`` once added columns), a line
    break the row, and HTML renders on GitHub: so ``|`` is escaped, ``&``, ``<`` and ``>``
    become entities and control characters a space. Text without them is unchanged (every
    committed table).
    """
    text = CONTROL_CHARACTERS.sub(" ", str(value))
    if not _MARKDOWN_SPECIAL.search(text):
        return text
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace("|", "\\|")


_MARKDOWN_SPECIAL = re.compile(r"[|&<>]")


def render_markdown(formatted: pd.DataFrame, index_name: str = "method") -> str:
    headers = [markdown_cell(index_name), *map(markdown_cell, formatted.columns)]
    rows = [
        [markdown_cell(i), *map(markdown_cell, r)]
        for i, r in zip(formatted.index, formatted.values, strict=True)
    ]
    widths = [
        max(len(h), *(len(r[j]) for r in rows)) if rows else len(h) for j, h in enumerate(headers)
    ]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    sep = "| " + " | ".join("-" * w for w in widths) + " |"
    return "\n".join([line(headers), sep, *(line(r) for r in rows)])


BoardRow = Callable[[str, str, list[Record]], "dict[str, object] | None"]


def board_rows(
    boards: Mapping[tuple[str, str], list[Record]], row: BoardRow, columns: Sequence[str]
) -> pd.DataFrame:
    """One row per board ``(name, hash) -> records`` by board name, from ``row`` (a board
    it returns None for is left out): the tables that put every board side by side."""
    rows = [row(name, h, recs) for (name, h), recs in sorted(boards.items())]
    return pd.DataFrame([r for r in rows if r is not None], columns=list(columns))


def write_board_table(
    table: pd.DataFrame, render: Callable[[pd.DataFrame], str], out_dir: Path, stem: str
) -> list[Path]:
    """``stem.md`` (``render(table)``) and ``stem.csv`` (by board) in ``out_dir``; nothing
    for an empty table."""
    if table.empty:
        return []
    md, csv = out_dir / f"{stem}.md", out_dir / f"{stem}.csv"
    atomic_write_text(md, render(table))
    atomic_write_text(csv, to_csv(table.set_index("board")))
    return [md, csv]


def board_page(heading: str, intro: str, table: pd.DataFrame, rule: str) -> str:
    """The Markdown page of a table of boards: heading, what is compared, the table, the rule."""
    body = render_markdown(table.set_index("board").astype(str), index_name="board")
    return "\n".join([f"## {heading}", "", intro, "", body, "", rule, ""])
