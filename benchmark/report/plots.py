"""Plots of results: the data by pure functions (tested), the drawing by thin renderers.

As in Optuna's ``visualization`` package, :func:`sweep_points` turns records into the exact
numbers a plot shows and :func:`draw_sweep` only draws them, so the data step is tested
without looking at pixels.

Sweeps (``dmlbench sweep``) name each derived protocol ``<base>@<key>=<value>``, e.g.
``poses@model.embedding_size=16``; the sweep plot is a metric against the swept value, one line
per method (Kim et al. Fig. 5: performance versus embedding dimension). Each method keeps one
colour (matplotlib's ``tab10``) and marker in every panel, so it reads in greyscale too; the
untrained baseline is a dashed black line, a floor rather than a competitor. Values are in %, as
in the tables (label distances ``mld@K`` as they are), and the legend sits outside the panels,
where it covers no line.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import yaml

from dmlbench.metrics import catalogue
from dmlbench.records import BASELINES, Record, is_baseline
from dmlbench.report.figures import save_png_svg
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
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "h", "<")
COLOURS = "tab10"
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
    """``("poses", "model.embedding_size", 16)`` from ``poses@model.embedding_size=16``.

    A sweep varies a protocol key, always a dotted path (``model.embedding_size``,
    ``batch.size``). The run's own derived names are not sweep points: ``@trials=N``
    (``--trials N``: another tuning budget) and ``@backbone=...`` / ``@pretrained=...``
    (``--backbone-override``, ``--pretrained``: smoke runs) are protocols of their own,
    reported like their base protocol.
    """
    base, at, rest = name.rpartition("@")
    key, eq, token = rest.partition("=")
    if not at or not eq or not base or "." not in key:
        return None
    return base, key, parse_value(token)


def is_sweep_point(name: str) -> bool:
    """Whether a protocol name is one point of a sweep (``dmlbench sweep``): such records are
    plotted against the swept value, and are not protocols of their own to rank or to report
    by default."""
    return parse_sweep_name(name) is not None


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
            if metric not in HIDDEN_METRICS and catalogue.interval_of(metric) is None:
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
    points: pd.DataFrame,
    protocol: str,
    key: str,
    metrics: list[str] | None = None,
    budget: str | None = None,
) -> Figure:
    """One panel per metric: mean ± std over seeds against the swept value, a line per method.

    ``budget`` (e.g. "paper defaults, no search") is added to the title: each point is a
    board of its own, and the title says which budget its methods had.
    """
    from matplotlib.figure import Figure

    part = points[(points["protocol"] == protocol) & (points["key"] == key)]
    metrics = metrics or sorted(part["metric"].unique(), key=_metric_order)
    cols = min(3, max(1, len(metrics)))
    rows = -(-len(metrics) // cols)
    fig = Figure(figsize=(4.2 * cols + 1.6, 3.4 * rows), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    values = list(dict.fromkeys(part["value"]))
    numeric = all(_numeric(v) for v in values)
    if numeric:
        values = sorted(values)
    styles = line_styles(sorted(part["method"].unique()))
    for ax, metric in zip(axes, metrics, strict=False):
        scale = catalogue.scale(metric)
        for method, line in part[part["metric"] == metric].groupby("method"):
            x = line["value"].to_numpy() if numeric else [values.index(v) for v in line["value"]]
            ax.errorbar(
                x,
                line["mean"] * scale,
                yerr=line["std"] * scale,
                label=method,
                capsize=3,
                markerfacecolor="white",
                **styles[str(method)],
            )
        _sweep_axes(ax, values, numeric, key, metric)
    for ax in axes[len(metrics) :]:
        ax.set_visible(False)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside right upper", fontsize="small", title="method")
    note = " — runs with overrides, not leaderboard numbers" if part["overridden"].any() else ""
    words = f", {budget}" if budget else ""
    fig.suptitle(f"{protocol}{words}: metrics vs {key} (mean ± std over seeds){note}")
    return fig


def line_styles(methods: list[str]) -> dict[str, dict[str, Any]]:
    """Colour, marker and line style per method, the same in every panel; the untrained
    baseline dashed black (``tab10`` has no black), a floor rather than a competitor."""
    from matplotlib import colormaps

    colours = colormaps[COLOURS].colors  # type: ignore[attr-defined]
    trained = [m for m in methods if not is_baseline(m)]
    out: dict[str, dict[str, Any]] = {
        m: {"color": colours[i % len(colours)], "marker": MARKERS[i % len(MARKERS)], "ls": "-"}
        for i, m in enumerate(trained)
    }
    lines = {"pixels": ":", "untrained": "--", "pretrained": "-."}
    for b in BASELINES:
        if b in methods:
            out[b] = {"color": "black", "marker": "x", "ls": lines[b]}
    return out


def _sweep_axes(ax: Any, values: list[Any], numeric: bool, key: str, metric: str) -> None:
    """Ticks at the swept values (log 2 for a wide numeric range), labels with the unit."""
    if numeric and min(values) > 0 and max(values) / min(values) >= 8:
        ax.set_xscale("log", base=2)
    positions = values if numeric else list(range(len(values)))
    ax.set_xticks(positions, [str(v) for v in values])
    ax.set_xlabel(key)
    better = "higher" if catalogue.higher_is_better(metric) else "lower"
    unit = catalogue.unit(metric)
    ax.set_ylabel(f"{metric} ({unit}, {better} is better)")
    ax.grid(True, color="0.85", linewidth=0.6)


def _metric_order(metric: str) -> tuple[int, float, str]:
    prefixes = (catalogue.NDCG.key, catalogue.MLD.key, catalogue.RECALL.key)  # plots' order
    for i, p in enumerate(prefixes):
        if metric.startswith(p) and metric[len(p) :].isdigit():
            return i, float(metric[len(p) :]), metric
    return len(prefixes), 0.0, metric


def write_sweep_plots(
    points: pd.DataFrame,
    out_dir: Path,
    metrics: list[str] | None = None,
    budgets: Mapping[str, str] | None = None,
) -> list[Path]:
    """``sweep-<protocol>-<key>.png`` and ``.svg`` per swept (protocol, key); the PNG paths.

    ``budgets``: the budget in words per base protocol, for the titles.
    """
    written = []
    pairs = points[["protocol", "key"]].drop_duplicates().itertuples(index=False)
    for protocol, key in pairs:
        fig = draw_sweep(points, protocol, key, metrics, (budgets or {}).get(protocol))
        out_dir.mkdir(parents=True, exist_ok=True)
        png, svg = (out_dir / f"sweep-{protocol}-{key}.{ext}" for ext in ("png", "svg"))
        save_png_svg(fig, png, svg)
        written.append(png)
    return written
