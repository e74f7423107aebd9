"""Plots of results: the data by pure functions (tested), the drawing by thin renderers.

As in Optuna's ``visualization`` package, :func:`sweep_points` turns records into the exact
numbers a plot shows and :func:`draw_sweep` only draws them, so the data step is tested
without looking at pixels.

Sweeps (``dmlbench sweep``) name each derived protocol ``<base>@<key>=<value>``, e.g.
``poses@model.embedding_size=16``; the sweep plot is a metric against the swept value, one line
per method (Kim et al. Fig. 5: performance versus embedding dimension). Lines are black and grey
with distinct markers and dash patterns, so the figure reads in greyscale too.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import yaml

from dmlbench.records import Record
from dmlbench.report.tables import MixedProtocolsError

if TYPE_CHECKING:
    from matplotlib.figure import Figure

SWEEP_COLUMNS = [
    "protocol",
    "key",
    "value",
    "method",
    "metric",
    "mean",
    "std",
    "seeds",
    "overridden",
]
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
DASHES = ("-", "--", "-.", ":")
GREYS = ("0.0", "0.35", "0.6")
LOWER_IS_BETTER = ("mld@",)
HIDDEN_METRICS = {"queries", "lone_queries"}


def sweep_name(base: str, key: str, token: str) -> str:
    return f"{base}@{key}={token}"


def parse_value(token: str) -> Any:
    """A swept value from its text: int, float (``1e-3`` too, which YAML 1.1 leaves a string),
    else YAML (``true``, ``null``, strings)."""
    for kind in (int, float):
        try:
            return kind(token)
        except ValueError:
            pass
    return yaml.safe_load(token)


def parse_sweep_name(name: str) -> tuple[str, str, Any] | None:
    """``("poses", "model.embedding_size", 16)`` from ``poses@model.embedding_size=16``."""
    base, at, rest = name.rpartition("@")
    key, eq, token = rest.partition("=")
    if not at or not eq or not base or not key:
        return None
    return base, key, parse_value(token)


def sweep_points(records: Iterable[Record]) -> pd.DataFrame:
    """Mean and std over seeds of every metric, per (base protocol, key, value, method).

    Only final-stage records of sweep-derived protocols are used. Each derived protocol must
    come with one hash: two hashes under one name mean two different conditions, and averaging
    them would be the unfair comparison reports never make (:class:`MixedProtocolsError`).
    """
    rows: list[dict[str, Any]] = []
    hashes: dict[str, str] = {}
    for r in records:
        parsed = parse_sweep_name(r.protocol.name)
        if parsed is None or r.stage != "final":
            continue
        if hashes.setdefault(r.protocol.name, r.protocol.hash) != r.protocol.hash:
            raise MixedProtocolsError(
                f"{r.protocol.name}: records of two protocol hashes "
                f"({hashes[r.protocol.name][:12]}, {r.protocol.hash[:12]}); keep one results "
                "folder per protocol version"
            )
        base, key, value = parsed
        for metric, v in r.metrics.items():
            if metric not in HIDDEN_METRICS and not metric.startswith("ci_"):
                rows.append(
                    {
                        "protocol": base,
                        "key": key,
                        "value": value,
                        "method": r.method,
                        "metric": metric,
                        "score": float(v),
                        "seed": r.seed,
                        "overridden": bool(r.overrides),
                    }
                )
    if not rows:
        return pd.DataFrame(columns=SWEEP_COLUMNS)
    df = pd.DataFrame(rows)
    df["value_key"] = df["value"].map(repr)  # values may mix types; group by their text
    group = df.groupby(["protocol", "key", "value_key", "method", "metric"], sort=False)
    out = group.agg(
        value=("value", "first"),
        mean=("score", "mean"),
        std=("score", lambda s: float(s.std(ddof=1)) if len(s) > 1 else 0.0),
        seeds=("seed", "nunique"),
        overridden=("overridden", "any"),
    ).reset_index()
    out = out[SWEEP_COLUMNS]
    order = out["value"].map(lambda v: (0, float(v), "") if _numeric(v) else (1, 0.0, str(v)))
    out = out.assign(_order=order).sort_values(["protocol", "key", "method", "metric", "_order"])
    return out.drop(columns="_order").reset_index(drop=True)


def _numeric(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def draw_sweep(
    points: pd.DataFrame, protocol: str, key: str, metrics: list[str] | None = None
) -> Figure:
    """One panel per metric: mean ± std over seeds against the swept value, a line per method."""
    from matplotlib.figure import Figure

    part = points[(points["protocol"] == protocol) & (points["key"] == key)]
    metrics = metrics or sorted(part["metric"].unique(), key=_metric_order)
    cols = min(3, max(1, len(metrics)))
    rows = -(-len(metrics) // cols)
    fig = Figure(figsize=(4.2 * cols, 3.4 * rows), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    values = list(dict.fromkeys(part["value"]))
    numeric = all(_numeric(v) for v in values)
    if numeric:
        values = sorted(values)
    for ax, metric in zip(axes, metrics, strict=False):
        for i, (method, line) in enumerate(part[part["metric"] == metric].groupby("method")):
            x = line["value"].to_numpy() if numeric else [values.index(v) for v in line["value"]]
            ax.errorbar(
                x,
                line["mean"],
                yerr=line["std"],
                label=method,
                capsize=3,
                marker=MARKERS[i % len(MARKERS)],
                linestyle=DASHES[i % len(DASHES)],
                color=GREYS[i % len(GREYS)],
                markerfacecolor="white",
            )
        if numeric and min(values) > 0 and max(values) / min(values) >= 8:
            ax.set_xscale("log", base=2)
        if numeric:
            ax.set_xticks(values, [str(v) for v in values])
        else:
            ax.set_xticks(range(len(values)), [str(v) for v in values])
        ax.set_xlabel(key)
        better = "lower" if metric.startswith(LOWER_IS_BETTER) else "higher"
        ax.set_ylabel(f"{metric} ({better} is better)")
        ax.grid(True, color="0.85", linewidth=0.6)
    for ax in axes[len(metrics) :]:
        ax.set_visible(False)
    axes[0].legend(fontsize="small")
    note = " — runs with overrides, not leaderboard numbers" if part["overridden"].any() else ""
    fig.suptitle(f"{protocol}: metrics vs {key} (mean ± std over seeds){note}")
    return fig


def _metric_order(metric: str) -> tuple[int, float, str]:
    prefixes = ("ndcg@", "mld@", "recall@")
    for i, p in enumerate(prefixes):
        if metric.startswith(p) and metric[len(p) :].isdigit():
            return i, float(metric[len(p) :]), metric
    return len(prefixes), 0.0, metric


def write_sweep_plots(
    points: pd.DataFrame, out_dir: Path, metrics: list[str] | None = None
) -> list[Path]:
    """``sweep-<protocol>-<key>.png`` and ``.svg`` per swept (protocol, key); the PNG paths."""
    written = []
    pairs = points[["protocol", "key"]].drop_duplicates().itertuples(index=False)
    for protocol, key in pairs:
        fig = draw_sweep(points, protocol, key, metrics)
        out_dir.mkdir(parents=True, exist_ok=True)
        png, svg = (out_dir / f"sweep-{protocol}-{key}.{ext}" for ext in ("png", "svg"))
        fig.savefig(png, dpi=120)
        fig.savefig(svg)
        written.append(png)
    return written
