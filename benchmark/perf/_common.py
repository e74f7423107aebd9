"""What the ``dmlbench.perf`` scripts share: the machine, timing, peak memory, the table.

Every script prints one Markdown table with the columns ``figure | ours | peer | ratio`` (the
ratio is ours / peer unless the figure says otherwise), preceded by the machine it ran on
(cores, CPU model, package versions, load average when it started and when it ended), and can
write the same text to a file with ``--out``. Timed figures are the median of at least three
interleaved rounds, with each side's min and max in two more columns: a single best or mean
hides how much a shared machine moved the numbers.

A figure taken on a busy machine is not the code's: on 2 cores at load 3-4 a multi-threaded
peer slows down more than a single-threaded one, and ratios drift by half. So a script asked
to write a report (``--out``) refuses, with exit status 2 and one ``error:`` line, when the
1-minute load average at its start exceeds half the usable cores; ``--noisy`` writes anyway,
and the report then says so at its top (as it does when the load rose past that during the
run).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import resource
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

MIN_ROUNDS = 3
LOAD_KEY = "load average at start (1, 5, 15 min)"
END_LOAD_KEY = "load average at the end (1, 5, 15 min)"
OTHERS_KEY = "CPU used by other processes while it ran (share of all cores)"


@dataclass(frozen=True)
class Spread:
    """Median, min and max of repeated measurements (``scale`` applied: seconds → ms)."""

    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: Sequence[float], scale: float = 1.0) -> Spread:
        if len(values) == 0:
            raise ValueError("no measurement")
        v = [scale * x for x in values]
        return cls(float(statistics.median(v)), float(min(v)), float(max(v)))


@dataclass
class Row:
    """One line of the table; ``ratio`` defaults to ours / peer when both are numbers.

    ``ours_spread`` / ``peer_spread``: the rounds behind a timed figure (its median is the
    figure); they fill the min – max columns.
    """

    figure: str
    ours: float | str | None
    peer: float | str | None = None
    ratio: float | None = None
    digits: int = 3
    ours_spread: Spread | None = None
    peer_spread: Spread | None = None

    @classmethod
    def timed(
        cls,
        figure: str,
        ours: Spread,
        peer: Spread | None = None,
        ratio: float | None = None,
        digits: int = 3,
    ) -> Row:
        """A timed figure: the medians, with the spreads for the min – max columns."""
        median = None if peer is None else peer.median
        return cls(figure, ours.median, median, ratio, digits, ours, peer)

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

    def spread_cells(self) -> list[str]:
        return [_fmt_spread(s, self.digits) for s in (self.ours_spread, self.peer_spread)]


def _fmt_spread(spread: Spread | None, digits: int) -> str:
    if spread is None:
        return "—"
    return f"{_fmt(spread.low, digits)} – {_fmt(spread.high, digits)}"


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
    """The table; two more columns, each side's min – max, when a row is timed in rounds."""
    spreads = any(r.ours_spread or r.peer_spread for r in rows)
    header = [*header, *(("ours min – max", "peer min – max") if spreads else ())]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    for row in rows:
        cells = row.cells() + (row.spread_cells() if spreads else [])
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def machine_info() -> dict[str, str]:
    """Cores, CPU model, versions and the load average now (call it before timing)."""
    import faiss
    import pytorch_metric_learning

    from dmlbench import simd
    from dmlbench.provenance import cpu_name, usable_cpus

    return {
        "cores": f"{usable_cpus()} (torch threads {torch.get_num_threads()})",
        "cpu": cpu_name(),
        "simd": simd.describe(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "faiss": getattr(faiss, "__version__", "?"),
        "pytorch-metric-learning": pytorch_metric_learning.__version__,
        "numpy": np.__version__,
        LOAD_KEY: load_averages(),
    }


def machine_markdown(info: dict[str, str]) -> str:
    return "\n".join(f"- {key}: {value}" for key, value in info.items())


def load_averages() -> str:
    """The 1, 5 and 15-minute load averages, as text ("?" where the OS has none)."""
    return ", ".join(f"{v:.2f}" for v in os.getloadavg()) if hasattr(os, "getloadavg") else "?"


def load_now() -> str:
    return f"{os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else "?"


def _load_1min(text: str) -> float | None:
    head = text.split(",")[0].strip()
    return None if head == "?" else float(head)


@dataclass(frozen=True)
class CpuSnapshot:
    """CPU seconds the whole machine and this process (with its finished children) have used.

    The load average at the end of a benchmark counts the benchmark's own threads (a faiss
    search on 2 cores ends at load 2 on a quiet machine), so "was anyone else running?" is
    answered from the CPU time the machine used minus the CPU time we used.
    """

    wall: float
    machine: float | None
    own: float

    @classmethod
    def now(cls) -> CpuSnapshot:
        import resource

        own = sum(
            getattr(resource.getrusage(who), f)
            for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
            for f in ("ru_utime", "ru_stime")
        )
        return cls(time.perf_counter(), _machine_cpu_seconds(), own)


def _machine_cpu_seconds() -> float | None:
    """Busy CPU seconds of all cores since boot (``/proc/stat``), ``None`` off Linux."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except OSError:
        return None
    ticks = [int(v) for v in fields]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
    return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def others_share(start: CpuSnapshot, end: CpuSnapshot, cores: int) -> float | None:
    """Fraction of the machine's cores other processes kept busy between two snapshots."""
    if start.machine is None or end.machine is None or end.wall <= start.wall:
        return None
    others = (end.machine - start.machine) - (end.own - start.own)
    return max(0.0, others) / ((end.wall - start.wall) * cores)


_START: list[CpuSnapshot] = []  # taken by refuse_if_busy, read when the report is written


def busy(load_1min: float | None, cores: int) -> bool:
    """More runnable work than half the cores: the machine is shared, figures move."""
    return load_1min is not None and load_1min > cores / 2


def refuse_if_busy(args: argparse.Namespace) -> int | None:
    """Exit status 2 (after one ``error:`` line) when asked to write a report on a busy
    machine without ``--noisy``; ``None`` to go on. Call it first, before any timing."""
    from dmlbench.provenance import usable_cpus

    _START[:] = [CpuSnapshot.now()]
    load, cores = _load_1min(load_averages()), usable_cpus()
    if args.out is None or args.noisy or not busy(load, cores):
        return None
    print(
        f"error: load average {load:.2f} at start exceeds half of the {cores} cores; not "
        f"writing {args.out} (re-run on a quiet machine, or pass --noisy to write a report "
        "marked noisy)",
        file=sys.stderr,
    )
    return 2


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


def rounds_option(parser: argparse.ArgumentParser, name: str, default: int, what: str) -> None:
    """A ``--rounds``-like option that accepts no fewer than :data:`MIN_ROUNDS`."""

    def at_least(text: str) -> int:
        value = int(text)
        if value < MIN_ROUNDS:
            raise argparse.ArgumentTypeError(f"at least {MIN_ROUNDS} (the median needs them)")
        return value

    parser.add_argument(name, type=at_least, default=default, help=what)


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
    parser.add_argument(
        "--noisy",
        action="store_true",
        help="write --out even when the load average at the start exceeds half the cores "
        "(the report then says so at its top)",
    )


def noisy_banner(info: dict[str, str]) -> str:
    """The warning a report starts with when the machine was busy: a start load above half
    the cores, or other processes keeping more than a quarter of the cores busy while it ran
    (its own threads do not count: see :class:`CpuSnapshot`)."""
    from dmlbench.provenance import usable_cpus

    cores = usable_cpus()
    start = _load_1min(info.get(LOAD_KEY, "?"))
    share = info.get(OTHERS_KEY, "")
    others = float(share.rstrip("%")) / 100 if share.endswith("%") else None
    if not busy(start, cores) and (others is None or others <= 0.25):
        return ""
    used = f", other processes used {share} of the CPU while it ran" if share else ""
    return (
        f"> **Noisy measurement**: 1-minute load average {start} at the start{used}, on "
        f"{cores} cores. These figures are not comparable with a quiet run; do not quote "
        "them.\n\n"
    )


def emit(title: str, info: dict[str, str], body: str, out: Path | None) -> str:
    """Print the report (title, noisy warning, machine, body) and write it to ``out``.

    The load average at the end is added to the machine's description here.
    """
    from dmlbench.provenance import usable_cpus

    info = {**info, END_LOAD_KEY: load_averages()}
    share = others_share(_START[0], CpuSnapshot.now(), usable_cpus()) if _START else None
    if share is not None:
        info[OTHERS_KEY] = f"{100 * share:.0f}%"
    banner = noisy_banner(info)
    text = f"# {title}\n\n{banner}Machine:\n\n{machine_markdown(info)}\n\n{body.rstrip()}\n"
    print(text)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
    return text
