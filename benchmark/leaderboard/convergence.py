"""Has a board's schedule converged? Its default methods at ½×, 1×, 2× and 4× the epochs.

A board ranks methods after a fixed number of steps; if that number is too small, it ranks
speed of convergence (glyphs-mini v4 put lifted and npairs at 40% of multi-similarity after 4
epochs, while fine-tuning comparisons find them within a few points). The check: each of the
protocol's default methods, with its paper's hyper-parameters, trains on the validation fold's
training classes for ½, 1, 2 and 4 times the protocol's epochs (each its own cosine schedule)
and is scored on the validation classes, never the test classes. The schedule has converged
when doubling it moves the best method by less than :data:`TOLERANCE` (1 point of the
selection metric) and changes the order of no two methods whose 1× scores differ by more
than that.

``python -m dmlbench.leaderboard.convergence --protocol NAME`` writes
``NAME-convergence.csv``, ``.md`` and ``.png`` (one line per method against steps).
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from dmlbench.protocol import Protocol

FACTORS = (0.5, 1.0, 2.0, 4.0)
TOLERANCE = 0.01


@dataclass(frozen=True)
class Verdict:
    converged: bool
    best: str
    moved: float  # the best method's change from 1x to 2x
    swapped: list[tuple[str, str]]

    def sentence(self, name: str) -> str:
        state = "converged" if self.converged else "NOT converged"
        swaps = ", ".join(f"{a}/{b}" for a, b in self.swapped) or "none"
        return (
            f"{name}: {state} — doubling the epochs moves the best method ({self.best}) by "
            f"{100 * self.moved:+.1f} points (limit ±{100 * TOLERANCE:.0f}); order changes "
            f"between methods more than {100 * TOLERANCE:.0f} point apart: {swaps}"
        )


def scaled(protocol: Protocol, factor: float) -> Protocol:
    """The protocol with ``factor`` times its epochs (at least one)."""
    epochs = max(1, math.ceil(protocol.optim.epochs * factor))
    return protocol.with_overrides({"optim.epochs": epochs})


def measure(protocol: Protocol, methods: list[str], seed: int = 0) -> pd.DataFrame:
    """One row per (method, factor): epochs, steps and the validation score."""
    from dmlbench.data.base import load_data
    from dmlbench.engine.evaluation import evaluate_model
    from dmlbench.engine.train import train
    from dmlbench.methods import method_for
    from dmlbench.metrics.selection import validation_spec
    from dmlbench.search.validation import objective_metric, validation_folds

    data = load_data(protocol)
    v = protocol.search.validation
    tr_idx, va_idx = validation_folds(data.train, 1, v.fraction, protocol.seeds[0])[0]
    tr, va = data.train.subset(tr_idx), data.train.subset(va_idx)
    metric = objective_metric(protocol, tr.label_kind)
    spec = validation_spec(protocol.metrics, metric)
    rows = []
    for method in methods:
        for factor in FACTORS:
            p = scaled(protocol, factor)
            result = train(p, method_for(p, method, None, tr.num_classes), tr, seed, progress=False)
            score = evaluate_model(spec, result.model, va, "cpu", seed)[metric]
            rows.append(
                {"method": method, "factor": factor, "epochs": p.optim.epochs,
                 "steps": result.steps, metric: score, "seconds": result.train_seconds}
            )  # fmt: skip
            print(f"{method} ×{factor:g}: {metric} {100 * score:.1f}", file=sys.stderr)
    return pd.DataFrame(rows)


def verdict(frame: pd.DataFrame) -> Verdict:
    metric = frame.columns[4]
    at = frame.pivot(index="method", columns="factor", values=metric)
    best = str(at[1.0].idxmax())
    moved = float(at.loc[best, 2.0] - at.loc[best, 1.0])
    swapped = [
        (a, b)
        for a in at.index
        for b in at.index
        if at.loc[a, 1.0] > at.loc[b, 1.0] + TOLERANCE and at.loc[a, 2.0] < at.loc[b, 2.0]
    ]
    return Verdict(abs(moved) < TOLERANCE and not swapped, best, moved, swapped)


def write(frame: pd.DataFrame, name: str, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dmlbench.records import atomic_write_text
    from dmlbench.report.plots import line_styles
    from dmlbench.report.tables import render_markdown

    out.mkdir(parents=True, exist_ok=True)
    metric = frame.columns[4]
    csv, md, png = (out / f"{name}-convergence.{ext}" for ext in ("csv", "md", "png"))
    atomic_write_text(csv, frame.to_csv(index=False))
    table = frame.pivot(index="method", columns="factor", values=metric).mul(100).round(1)
    epochs = frame.groupby("factor")["epochs"].first()
    table.columns = [f"{f:g}× ({epochs[f]} epochs)" for f in table.columns]
    text = f"# {name}: validation {metric} against training length\n\n"
    text += render_markdown(table.astype(str)) + f"\n\n{verdict(frame).sentence(name)}\n"
    atomic_write_text(md, text)
    fig, ax = plt.subplots(figsize=(7.6, 4.0), dpi=120)
    styles = line_styles(sorted(frame["method"].unique()))
    for method, rows in frame.groupby("method"):
        ax.plot(rows["steps"], 100 * rows[metric], label=method, **styles[str(method)])
    ax.set_xscale("log", base=2)
    ax.set_xlabel("training steps (½×, 1×, 2×, 4× the protocol's)")
    ax.set_ylabel(f"validation {metric} (%)")
    ax.set_title(f"{name}: has the schedule converged?")
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.tight_layout()
    fig.savefig(png, bbox_inches="tight")
    plt.close(fig)
    return [csv, md, png]


def main(argv: list[str] | None = None) -> int:
    from dmlbench.protocol import load_protocol

    parser = argparse.ArgumentParser(prog="python -m dmlbench.leaderboard.convergence")
    parser.add_argument("--protocol", required=True, help="protocol name or file")
    parser.add_argument("--method", help="comma-separated (default: the protocol's methods)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("reports/convergence"))
    args = parser.parse_args(argv)
    protocol = load_protocol(args.protocol).without_search()
    methods = args.method.split(",") if args.method else list(protocol.methods)
    frame = measure(protocol, methods, args.seed)
    for path in write(frame, load_protocol(args.protocol).name, args.out):
        print(f"written: {path}")
    print(verdict(frame).sentence(protocol.name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
