"""Paper defaults vs tuned: how much of a ranking is the tuning budget?

A protocol ``X`` and its zero-budget derivation ``X@defaults`` (every method with its paper's
hyper-parameters, :meth:`dmlbench.protocol.Protocol.without_search`) are two boards of the same
data, split, backbone and pipeline. Side by side they show what equal tuning changes: a method
that wins with its defaults and falls back once every method is tuned owed its lead to a
better-tuned default, not to its loss (Musgrave et al., ECCV 2020, on unequal tuning). The two
boards are only paired when their records were computed on the same data (equal data
fingerprints) under the same protocol version; runs with overrides are left out, as in the
rankings. Differences of means are shown, not tested: the two boards' seeds are different runs.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from dmlbench.records import ProtocolRef, Record, atomic_write_text
from dmlbench.report.board import board_metric, higher_is_better
from dmlbench.report.tables import UNTRAINED, records_frame, render_markdown, to_csv
from dmlbench.report.titles import search_trials

SUFFIX = "@defaults"
COLUMNS = [
    "metric", "defaults_mean", "defaults_n_seeds", "tuned_mean", "tuned_n_seeds", "difference",
    "defaults_rank", "tuned_rank", "rank_change",
]  # fmt: skip
TEXT = (
    "Headline metric, mean over seeds under the paper defaults ({defaults}) and under the tuned "
    "protocol ({tuned}); difference = tuned − defaults; rank 1 = best among the trained "
    "methods of that board; rank change = rank with defaults − rank tuned (positive: tuning "
    "moved the method up). Differences are not tested for significance."
)
log = logging.getLogger(__name__)

Board = tuple[str, int, str, str]  # protocol name, version, hash, data fingerprint


def board_pairs(records: Iterable[Record]) -> list[tuple[list[Record], list[Record]]]:
    """(tuned board, defaults board) for every ``X`` / ``X@defaults`` pair on the same data.

    Boards are the final records without overrides of one protocol hash. A pair whose data
    fingerprints differ is skipped with a warning: its gaps could come from the data.
    """
    boards: dict[Board, list[Record]] = defaultdict(list)
    for r in records:
        if r.stage == "final" and not r.overrides:
            key = (r.protocol.name, r.protocol.version, r.protocol.hash, r.data_fingerprint)
            boards[key].append(r)
    pairs = []
    for d in sorted(k for k in boards if k[0].endswith(SUFFIX)):
        base = d[0].removesuffix(SUFFIX)
        for t in sorted(k for k in boards if k[0] == base and k[1] == d[1]):
            if t[3] != d[3]:
                log.warning(
                    "%s and %s: computed on different data (fingerprints %s, %s); not compared",
                    t[0],
                    d[0],
                    t[3][:12],
                    d[3][:12],
                )
                continue
            pairs.append((boards[t], boards[d]))
    return pairs


def _means(records: list[Record], metric: str) -> tuple[pd.Series, pd.Series]:
    df = records_frame(records)
    if metric not in df.columns:
        return pd.Series(dtype=float), pd.Series(dtype=int)
    df = df[df[metric].notna()]
    g = df.groupby("method")
    return g[metric].mean(), g["seed"].nunique()


def _ranks(means: pd.Series, higher: bool) -> pd.Series:
    return means.drop(UNTRAINED, errors="ignore").rank(ascending=not higher, method="average")


def defaults_vs_tuned(tuned: list[Record], defaults: list[Record]) -> pd.DataFrame:
    """Per method: the headline metric's mean and seeds under both boards, the difference, the
    rank under each (trained methods only; the untrained row has none) and the rank change.

    NaN where a method is missing from a board. Sorted by tuned rank, then defaults rank.
    """
    metric = board_metric(records_frame(tuned))
    if metric is None:
        return pd.DataFrame(columns=COLUMNS).rename_axis("method")
    higher = higher_is_better(metric)
    (dm, dn), (tm, tn) = _means(defaults, metric), _means(tuned, metric)
    out = pd.DataFrame(
        {"defaults_mean": dm, "defaults_n_seeds": dn, "tuned_mean": tm, "tuned_n_seeds": tn}
    )
    out.insert(0, "metric", metric)
    out["difference"] = out["tuned_mean"] - out["defaults_mean"]
    out["defaults_rank"], out["tuned_rank"] = _ranks(dm, higher), _ranks(tm, higher)
    out["rank_change"] = out["defaults_rank"] - out["tuned_rank"]
    out = out.assign(_u=out.index == UNTRAINED).sort_values(
        ["_u", "tuned_rank", "defaults_rank"], na_position="last", kind="stable"
    )
    out.index.name = "method"
    return out.drop(columns="_u")[COLUMNS]


def display(frame: pd.DataFrame) -> pd.DataFrame:
    """Display strings: means in % (label distances as they are), ranks, blanks as —."""
    out = pd.DataFrame(index=frame.index)
    metric = str(frame["metric"].iloc[0]) if len(frame) else ""
    digits, scale = (3, 1.0) if metric.startswith("mld@") else (1, 100.0)

    def fmt(v: float, spec: str, factor: float = 1.0) -> str:
        return "—" if pd.isna(v) else format(v * factor, spec)

    for side in ("defaults", "tuned"):
        out[side] = [fmt(v, f".{digits}f", scale) for v in frame[f"{side}_mean"]]
        out[f"seeds ({side})"] = [fmt(v, ".0f") for v in frame[f"{side}_n_seeds"]]
    out["difference"] = [fmt(v, f"+.{digits}f", scale) for v in frame["difference"]]
    out["rank (defaults)"] = [fmt(v, "g") for v in frame["defaults_rank"]]
    out["rank (tuned)"] = [fmt(v, "g") for v in frame["tuned_rank"]]
    out["rank change"] = [fmt(v, "+g") if v else fmt(v, "g") for v in frame["rank_change"]]
    return out


def pair_title(tuned: ProtocolRef, records: list[Record]) -> str:
    """``glyphs-mini v3: paper defaults (no search) vs tuned (8-trial search per method)``."""
    trials = search_trials(tuned, records)
    budget = f" ({trials}-trial search per method)" if trials else ""
    return f"{tuned.name} v{tuned.version}: paper defaults (no search) vs tuned{budget}"


def write_defaults_vs_tuned(
    records: Iterable[Record], out_dir: Path
) -> tuple[list[Path], list[tuple[str, pd.DataFrame]]]:
    """``<X>-defaults-vs-tuned.md`` / ``.csv`` per base protocol ``X`` with a pair of boards.

    Returns the paths written and (title, display table) per pair, for the index page.
    """
    by_base: dict[str, list[tuple[str, str, pd.DataFrame]]] = defaultdict(list)
    for tuned, defaults in board_pairs(records):
        t, d = tuned[0].protocol, defaults[0].protocol
        frame = defaults_vs_tuned(tuned, defaults)
        if frame.empty:
            continue
        text = TEXT.format(defaults=f"{d.name} {d.hash[:12]}", tuned=f"{t.name} {t.hash[:12]}")
        frame = frame.assign(tuned_hash=t.hash, defaults_hash=d.hash)
        by_base[t.name].append((pair_title(t, tuned), text, frame))
    written, shown = [], []
    for base, sections in sorted(by_base.items()):
        md = "\n".join(
            f"## {title}\n\n{text}\n\n{render_markdown(display(frame))}\n"
            for title, text, frame in sections
        )
        md_path, csv_path = (out_dir / f"{base}-defaults-vs-tuned.{x}" for x in ("md", "csv"))
        atomic_write_text(md_path, md)
        atomic_write_text(csv_path, to_csv(pd.concat([frame for _, _, frame in sections])))
        written += [md_path, csv_path]
        shown += [(title, display(frame)) for title, _, frame in sections]
    return written, shown
