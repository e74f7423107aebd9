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

``python -m dmlbench.leaderboard.convergence --protocol NAME --seeds 0,1,2 --jobs 2`` writes
``NAME-convergence.csv`` (every training), ``.md`` (means over the seeds, and the verdict on
them) and ``.png`` (one line per method's mean against steps, each seed a dot).
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
    se: float = math.nan  # of ``moved``, over the seeds (each seed's own change); NaN with one

    def sentence(self, name: str) -> str:
        state = "converged" if self.converged else "NOT converged"
        swaps = ", ".join(f"{a}/{b}" for a, b in self.swapped) or "none"
        se = "" if math.isnan(self.se) else f", standard error {100 * self.se:.1f} over the seeds"
        return (
            f"{name}: {state} — doubling the epochs moves the best method ({self.best}) by "
            f"{100 * self.moved:+.1f} points (limit ±{100 * TOLERANCE:.0f}{se}); order changes "
            f"between methods more than {100 * TOLERANCE:.0f} point apart: {swaps}"
        )


def scaled(protocol: Protocol, factor: float) -> Protocol:
    """The protocol with ``factor`` times its epochs (at least one)."""
    epochs = max(1, math.ceil(protocol.optim.epochs * factor))
    return protocol.with_overrides({"optim.epochs": epochs})


_COLUMNS = ("method", "factor", "seed", "epochs", "steps", "seconds")


def metric_of(frame: pd.DataFrame) -> str:
    """The selection metric's column: the one that is not bookkeeping."""
    return next(c for c in frame.columns if c not in _COLUMNS)


def _one(protocol: Protocol, method: str, factor: float, seed: int, threads: int) -> dict:
    """One training at ``factor`` times the epochs, scored on the validation classes."""
    import torch

    from dmlbench.engine.evaluation import evaluate_model
    from dmlbench.engine.train import train
    from dmlbench.methods import method_for
    from dmlbench.metrics.selection import validation_spec
    from dmlbench.search.validation import objective_metric

    torch.set_num_threads(threads)
    tr, va = _folds(protocol)
    metric = objective_metric(protocol, tr.label_kind)
    p = scaled(protocol, factor)
    result = train(p, method_for(p, method, None, tr.num_classes), tr, seed, progress=False)
    score = evaluate_model(validation_spec(protocol.metrics, metric), result.model, va, "cpu", seed)
    print(f"{method} ×{factor:g} seed {seed}: {metric} {100 * score[metric]:.1f}", file=sys.stderr)
    row = {"method": method, "factor": factor, "seed": seed, "epochs": p.optim.epochs}
    return {**row, "steps": result.steps, metric: score[metric], "seconds": result.train_seconds}


def _folds(protocol: Protocol) -> tuple:
    """The validation fold's training and validation classes (the search's first fold)."""
    from dmlbench.data.base import load_data
    from dmlbench.search.validation import validation_folds

    data = load_data(protocol)
    v = protocol.search.validation
    tr_idx, va_idx = validation_folds(data.train, 1, v.fraction, protocol.seeds[0])[0]
    return data.train.subset(tr_idx), data.train.subset(va_idx)


def measure(
    protocol: Protocol, methods: list[str], seeds: tuple[int, ...] = (0,), jobs: int = 1
) -> pd.DataFrame:
    """One row per (method, factor, seed): epochs, steps and the validation score. With
    ``jobs`` > 1 the trainings run in that many processes of one thread each."""
    tasks = [(m, f, s) for m in methods for f in FACTORS for s in seeds]
    if jobs <= 1:
        rows = [_one(protocol, m, f, s, 1) for m, f, s in tasks]
    else:
        from concurrent.futures import ProcessPoolExecutor

        from dmlbench.leaderboard.tasks import exit_with_parent

        with ProcessPoolExecutor(jobs, initializer=exit_with_parent) as pool:
            futures = [pool.submit(_one, protocol, m, f, s, 1) for m, f, s in tasks]
            rows = [f.result() for f in futures]
    return pd.DataFrame(rows)


def means(frame: pd.DataFrame) -> pd.DataFrame:
    """Each (method, factor)'s mean score over the seeds: method × factor."""
    return frame.pivot_table(index="method", columns="factor", values=metric_of(frame))


def verdict(frame: pd.DataFrame) -> Verdict:
    """The module docstring's rule, on the means over seeds (one seed's noise alone can move
    a method by more than the tolerance). The standard error of the best method's move, from
    each seed's own 1× to 2× change, says how far the rule's 1 point is above that noise; it
    does not enter the rule."""
    at = means(frame)
    best = str(at[1.0].idxmax())
    moved = float(at.loc[best, 2.0] - at.loc[best, 1.0])
    own = frame[frame["method"] == best].pivot_table(
        index="seed", columns="factor", values=metric_of(frame)
    )
    change = (own[2.0] - own[1.0]).dropna()
    se = float(change.std(ddof=1) / math.sqrt(len(change))) if len(change) > 1 else math.nan
    swapped = [
        (a, b)
        for a in at.index
        for b in at.index
        if at.loc[a, 1.0] > at.loc[b, 1.0] + TOLERANCE and at.loc[a, 2.0] < at.loc[b, 2.0]
    ]
    return Verdict(abs(moved) < TOLERANCE and not swapped, best, moved, swapped, se)


def write(frame: pd.DataFrame, name: str, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dmlbench.records import atomic_write_text
    from dmlbench.report.plots import line_styles
    from dmlbench.report.tables import render_markdown

    out.mkdir(parents=True, exist_ok=True)
    metric = metric_of(frame)
    seeds = sorted(frame["seed"].unique())
    csv, md, png = (out / f"{name}-convergence.{ext}" for ext in ("csv", "md", "png"))
    atomic_write_text(csv, frame.to_csv(index=False))
    table = means(frame).mul(100).round(1)
    epochs = frame.groupby("factor")["epochs"].first()
    table.columns = [f"{f:g}× ({epochs[f]} epochs)" for f in table.columns]
    spread = frame.groupby(["method", "factor"])[metric].std().mean() if len(seeds) > 1 else None
    text = f"# {name}: validation {metric} against training length\n\n"
    text += f"Mean over seeds {', '.join(str(s) for s in seeds)} ({len(seeds)})"
    if spread is not None:
        text += f"; a single seed's sd around it is {100 * spread:.1f} points on average"
    text += ".\n\n"
    text += render_markdown(table.astype(str)) + f"\n\n{verdict(frame).sentence(name)}\n"
    atomic_write_text(md, text)
    fig, ax = plt.subplots(figsize=(7.6, 4.0), dpi=120)
    styles = line_styles(sorted(frame["method"].unique()))
    for method, rows in frame.groupby("method"):
        mean = rows.groupby("steps")[metric].mean()
        ax.plot(mean.index, 100 * mean.values, label=method, **styles[str(method)])
        style = {k: v for k, v in styles[str(method)].items() if k == "color"}
        ax.scatter(rows["steps"], 100 * rows[metric], s=8, alpha=0.4, **style)
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
    parser.add_argument("--seeds", default="0", help="comma-separated seeds (the table: means)")
    parser.add_argument("--jobs", type=int, default=1, help="processes of one thread each")
    parser.add_argument("--out", type=Path, default=Path("reports/convergence"))
    args = parser.parse_args(argv)
    protocol = load_protocol(args.protocol).without_search()
    methods = args.method.split(",") if args.method else list(protocol.methods)
    seeds = tuple(int(s) for s in args.seeds.split(","))
    frame = measure(protocol, methods, seeds, args.jobs)
    for path in write(frame, load_protocol(args.protocol).name, args.out):
        print(f"written: {path}")
    print(verdict(frame).sentence(protocol.name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
