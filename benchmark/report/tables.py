"""Tables of results, one per protocol hash.

Numbers obtained under different protocol hashes are never put in one table: a different hash
means a different data set, split, backbone, pipeline, budget or seed set, and a side-by-side
comparison would be exactly the unfair comparison this project exists to avoid.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from dmlbench.errors import DmlbenchError
from dmlbench.records import Record, atomic_write_text

METRIC_ORDER = ("recall@", "map@r", "r_precision", "nmi", "ndcg@", "mld@")
HIDDEN = {"queries", "lone_queries"}


class MixedProtocolsError(DmlbenchError):
    """Records of different protocol hashes were passed to one table."""


def records_frame(records: Iterable[Record]) -> pd.DataFrame:
    """One row per record: protocol, method, seed, stage, overrides flag and every metric."""
    rows = []
    for r in records:
        rows.append(
            {
                "protocol": r.protocol.name,
                "version": r.protocol.version,
                "protocol_hash": r.protocol.hash,
                "method": r.method,
                "seed": r.seed,
                "stage": r.stage,
                "overridden": bool(r.overrides),
                "train_seconds": r.timings.train_seconds,
                **{k: v for k, v in r.metrics.items() if k not in HIDDEN},
            }
        )
    return pd.DataFrame(rows)


def metric_columns(df: pd.DataFrame) -> list[str]:
    cols = [c for c in df.columns if c.startswith(METRIC_ORDER)]

    def key(c: str) -> tuple[int, float]:
        for i, prefix in enumerate(METRIC_ORDER):
            if c.startswith(prefix):
                tail = c[len(prefix) :]
                return i, float(tail) if tail.replace(".", "").isdigit() else 0.0
        return len(METRIC_ORDER), 0.0

    return sorted(cols, key=key)


def summary_table(df: pd.DataFrame) -> pd.DataFrame:
    """Mean and std over seeds per method, for the records of exactly one protocol hash.

    Returns a frame indexed by method with columns ``<metric>`` (mean), ``<metric>_std`` and
    ``seeds``; methods sorted by the first metric, best first, the untrained baseline last.
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
    std = grouped[metrics].std(ddof=1).fillna(0.0).add_suffix("_std")
    table = table.join(std)
    table["seeds"] = grouped["seed"].nunique()
    if metrics:
        table = table.sort_values(metrics[0], ascending=False)
    if "untrained" in table.index:
        table = pd.concat([table.drop(index="untrained"), table.loc[["untrained"]]])
    return table


def format_table(table: pd.DataFrame, percent: bool = True) -> pd.DataFrame:
    """Strings ``mean ± std`` (in %, as papers report them), best trained value in bold; a
    method with a single seed gets its value alone (no ``± 0.0`` that would claim no spread)."""
    metrics = [c for c in table.columns if not c.endswith("_std") and c != "seeds"]
    scale = 100.0 if percent else 1.0
    out = pd.DataFrame(index=table.index)
    trained = [m for m in table.index if m != "untrained"]
    for m in metrics:
        # mean label distance is in label units and lower is better; the rest are fractions
        lower = m.startswith("mld@")
        col = table.loc[trained, m] if trained else pd.Series(dtype=float)
        best = (col.min() if lower else col.max()) if trained else np.nan
        cells = []
        for method, row in table.iterrows():
            digits, factor = (3, 1.0) if lower else (1, scale)
            text = f"{row[m] * factor:.{digits}f}"
            if row["seeds"] > 1:  # one seed has no spread: show none rather than ± 0
                text += f" ± {row[m + '_std'] * factor:.{digits}f}"
            if method != "untrained" and np.isclose(row[m], best):
                text = f"**{text}**"
            cells.append(text)
        out[m] = cells
    out["seeds"] = table["seeds"].astype(int)
    return out


def render_markdown(formatted: pd.DataFrame, index_name: str = "method") -> str:
    headers = [index_name, *map(str, formatted.columns)]
    rows = [[str(i), *map(str, r)] for i, r in zip(formatted.index, formatted.values, strict=True)]
    widths = [
        max(len(h), *(len(r[j]) for r in rows)) if rows else len(h) for j, h in enumerate(headers)
    ]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    sep = "| " + " | ".join("-" * w for w in widths) + " |"
    return "\n".join([line(headers), sep, *(line(r) for r in rows)])


def write_reports(records: list[Record], out_dir: Path) -> list[tuple[str, Path, str]]:
    """Write ``<protocol>-<hash12>.md`` and ``.csv`` per protocol hash.

    Returns (title, markdown path, markdown text) per table.
    """
    if not records:
        return []
    df = records_frame(r for r in records if r.stage == "final")
    if df.empty:
        return []
    written = []
    for (h, overridden), part in df.groupby(["protocol_hash", "overridden"], sort=True):
        name, version = part["protocol"].iloc[0], int(part["version"].iloc[0])
        table = summary_table(part)
        stem = f"{name}-{h[:12]}" + ("-overrides" if overridden else "")
        csv_path = out_dir / f"{stem}.csv"
        md_path = out_dir / f"{stem}.md"
        out_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_text(csv_path, table.to_csv(float_format="%.6f"))
        title = f"{name} v{version} (protocol hash {h[:12]})"
        note = (
            "\n\n*Runs with overrides (e.g. --max-steps): smoke tests, not leaderboard numbers.*"
            if overridden
            else ""
        )
        md = (
            f"## {title}\n\nTest metrics in % (mld@K in label units, lower is better), "
            "mean ± std over seeds; best in bold."
            f"\n\n{render_markdown(format_table(table))}{note}\n"
        )
        atomic_write_text(md_path, md)
        written.append((title, md_path, md))
    return written
