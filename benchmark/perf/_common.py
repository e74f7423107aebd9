"""What the ``dmlbench.perf`` scripts share: the machine, timing, peak memory, the table.

Every script prints one Markdown table with the columns ``figure | ours | peer | ratio`` (the
ratio is ours / peer unless the figure says otherwise), preceded by the machine it ran on
(cores, CPU model, package versions, load average when it started), and can write the same
text to a file with ``--out``.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import resource
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch


@dataclass
class Row:
    """One line of the table; ``ratio`` defaults to ours / peer when both are numbers."""

    figure: str
    ours: float | str | None
    peer: float | str | None = None
    ratio: float | None = None
    digits: int = 3

    def cells(self) -> list[str]:
        ratio = self.ratio
        if ratio is None and isinstance(self.ours, float) and isinstance(self.peer, float):
            ratio = self.ours / self.peer if self.peer else None
        return [
            self.figure,
            _fmt(self.ours, self.digits),
            _fmt(self.peer, self.digits),
            "—" if ratio is None else f"{ratio:.2f}",
        ]


def _fmt(value: float | str | None, digits: int) -> str:
    if value is None:
        return "—"
    if isinstance(value, str):
        return value
    if value != 0 and (abs(value) < 10 ** -(digits - 1) or abs(value) >= 10**6):
        return f"{value:.2e}"
    return (
        f"{value:.{digits}g}" if abs(value) < 1 else f"{value:.{digits}f}".rstrip("0").rstrip(".")
    )


def markdown_table(
    rows: Sequence[Row], header: Sequence[str] = ("figure", "ours", "peer", "ratio")
) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(row.cells()) + " |" for row in rows]
    return "\n".join(lines)


def parse_table(text: str) -> list[dict[str, str]]:
    """The rows of every ``figure | ours | peer | ratio`` table in ``text`` (tests use it)."""
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


def machine_info() -> dict[str, str]:
    """Cores, CPU model, versions and the load average now (call it before timing)."""
    import faiss
    import pytorch_metric_learning

    from dmlbench.records import cpu_name, usable_cpus

    load = ", ".join(f"{v:.2f}" for v in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    return {
        "cores": f"{usable_cpus()} (torch threads {torch.get_num_threads()})",
        "cpu": cpu_name(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "faiss": getattr(faiss, "__version__", "?"),
        "pytorch-metric-learning": pytorch_metric_learning.__version__,
        "numpy": np.__version__,
        "load average at start (1, 5, 15 min)": load,
    }


def machine_markdown(info: dict[str, str]) -> str:
    return "\n".join(f"- {key}: {value}" for key, value in info.items())


def load_now() -> str:
    return f"{os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else "?"


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def interleaved(
    fns: dict[str, Callable[[], Any]], repeats: int, warmup: int = 1
) -> tuple[dict[str, list[float]], dict[str, Any]]:
    """Seconds of each call and its last result. The functions take turns, in reverse order
    every other round (A B, B A, ...), so a change of load on a shared machine, or an
    advantage of going first or second, hits all of them alike."""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    results: dict[str, Any] = {}
    for round_ in range(repeats):
        for name in list(fns) if round_ % 2 == 0 else list(reversed(fns)):
            seconds, results[name] = timed(fns[name])
            times[name].append(seconds)
    return times, results


def best(values: Sequence[float]) -> float:
    """The fastest of repeated timings: what the code costs when nothing else gets in the way
    (other processes on a shared machine only ever add time)."""
    return float(min(values))


def peak_rss_now() -> float:
    """Peak resident memory of this process so far, in bytes.

    ``VmHWM`` of ``/proc/self/status`` where it exists: unlike ``ru_maxrss``, which Linux
    carries across ``exec`` (a spawned child would start at its parent's peak), it belongs to
    this process image alone.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return float(line.split()[1]) * 1024  # kB
    except OSError:
        pass
    return float(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024  # KiB on Linux


def _rss_child(target: Callable[..., Any], args: tuple[Any, ...], queue: Any) -> None:
    _prepared, run = target(*args)  # kept alive: its memory counts in "before"
    before = peak_rss_now()
    run()
    queue.put((before, peak_rss_now()))


def peak_rss(target: Callable[..., Any], *args: Any) -> tuple[float, float]:
    """(peak RSS before, peak RSS after) ``run()`` in a fresh process, in bytes.

    ``target(*args)`` runs in the child and returns ``(prepared, run)``: whatever it builds
    (data, imports) counts in "before"; ``run()`` is what is measured. ``target`` must be a
    module-level function (the child is spawned).
    """
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    process = ctx.Process(target=_rss_child, args=(target, args, queue))
    process.start()
    result = queue.get()
    process.join()
    return float(result[0]), float(result[1])


def add_common_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, default=None, help="also write the report here")


def emit(title: str, info: dict[str, str], body: str, out: Path | None) -> str:
    """Print the report (title, machine, body) and write it to ``out`` when given."""
    text = f"# {title}\n\nMachine:\n\n{machine_markdown(info)}\n\n{body.rstrip()}\n"
    print(text)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
    return text
