"""Plain progress lines for runs whose stderr is not a terminal (a log, a batch job, ``nohup``).

tqdm hides its bars when stderr is redirected, which left a nine-minute ``dmlbench run`` with
one line of output. This module prints one line per finished epoch, search trial and final run
instead, each with the time spent and an estimate of the time left, through the logger
``dmlbench.progress`` at level :data:`PROGRESS` (between INFO and WARNING): ``-q`` hides the
lines, ``--log-file`` keeps them with timestamps, and search workers in other processes log
the same way. Nothing here draws a random number or touches a model, so no number can move.
"""

from __future__ import annotations

import logging
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dmlbench.metrics.catalogue import NDCG, RECALL, interval_of

if TYPE_CHECKING:
    from dmlbench.engine.tracking import Tracker
    from dmlbench.records import Record

PROGRESS = 25  # above INFO (shown by default), below WARNING (hidden by -q)
logging.addLevelName(PROGRESS, "PROGRESS")
_LOG = logging.getLogger("dmlbench.progress")
_LOG.setLevel(PROGRESS)  # its lines pass whatever the root level is; handlers decide
_STARTED = time.monotonic()  # the command's start, for "elapsed" of the whole run


def line(text: str) -> None:
    """One progress line: to the configured handlers, or to stderr when logging is not set up
    (the library called from a script or a notebook still shows its progress)."""
    if _LOG.hasHandlers():
        _LOG.log(PROGRESS, text)
    else:
        print(text, file=sys.stderr, flush=True)


def clock(seconds: float | None) -> str:
    """``42s``, ``3m05s``, ``2h07m``; ``?`` when nothing is known yet."""
    if seconds is None or not math.isfinite(seconds):
        return "?"
    s = max(round(seconds), 0)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def eta(elapsed: float, done: float, total: float) -> float | None:
    """Seconds left at the rate so far (``None`` before anything is done)."""
    if done <= 0:
        return None
    return elapsed / done * max(total - done, 0)


def elapsed_since_start() -> float:
    """Seconds since the command started (since this module was first imported)."""
    return time.monotonic() - _STARTED


# --------------------------------------------------------------------------- logging set-up


@dataclass(frozen=True)
class LogSetup:
    """What ``dmlbench`` configured, so spawned search workers log the same way."""

    level: int = PROGRESS  # stderr threshold: WARNING (-q), PROGRESS, INFO (-v)
    log_file: str | None = None


_SETUP: LogSetup | None = None
_HANDLERS: list[logging.Handler] = []


class _StderrHandler(logging.StreamHandler):
    """Writes to the *current* ``sys.stderr`` (replaced by test capture and redirections)."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


class _Formatter(logging.Formatter):
    """Progress lines plain (their own words), other records with level and logger name."""

    def __init__(self, stamp: bool) -> None:
        self.stamp = stamp
        super().__init__("%(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = record.getMessage() if record.levelno == PROGRESS else super().format(record)
        if self.stamp:
            when = datetime.fromtimestamp(record.created).isoformat(timespec="seconds")
            return f"{when} {text}"
        return text


def configure_logging(level: int = PROGRESS, log_file: str | Path | None = None) -> None:
    """Route warnings and progress lines to stderr (at ``level``) and to ``log_file``.

    The log file is appended to and receives every progress line and warning (and info
    messages when ``level`` is INFO), each with a timestamp. Calling this again replaces what
    an earlier call installed. When someone else already handles the root logger (an
    application embedding dmlbench, pytest), stderr is left to them, as ``basicConfig`` does.
    """
    global _SETUP
    reset_logging()
    root = logging.getLogger()
    owned = not root.handlers
    if owned or root.level > min(level, logging.WARNING):  # never hide what others asked for
        root.setLevel(min(level, logging.WARNING))
    if owned:
        stderr = _StderrHandler()
        stderr.setLevel(level)
        stderr.setFormatter(_Formatter(stamp=False))
        _HANDLERS.append(stderr)
    if log_file is not None:
        file = logging.FileHandler(log_file, mode="a", encoding="utf-8")
        file.setLevel(min(level, PROGRESS))
        file.setFormatter(_Formatter(stamp=True))
        _HANDLERS.append(file)
    for handler in _HANDLERS:
        root.addHandler(handler)
    _SETUP = LogSetup(level, None if log_file is None else str(log_file))


def reset_logging() -> None:
    """Remove and close what :func:`configure_logging` installed, as if it had never run.

    For whoever calls the command line twice in one process (an application, the tests): a
    log file of the first call must not receive the second one's lines.
    """
    global _SETUP
    root = logging.getLogger()
    for handler in _HANDLERS:
        root.removeHandler(handler)
        handler.close()
    _HANDLERS.clear()
    _SETUP = None


def note_in_log_file(text: str) -> None:
    """``text`` in the log file only: the one-line error that ends a command is printed to
    stderr by the command line, and the log of an unattended run must say how it ended too."""
    record = logging.LogRecord("dmlbench", logging.ERROR, __file__, 0, text, None, None)
    for handler in _HANDLERS:
        if isinstance(handler, logging.FileHandler):
            handler.handle(record)


def current_setup() -> LogSetup | None:
    """The set-up to repeat in a spawned worker (``None``: logging was never configured)."""
    return _SETUP


def bars_allowed() -> bool:
    """tqdm bars only when progress is shown at all (not under ``-q``)."""
    return _SETUP is None or _SETUP.level <= PROGRESS


def bars_on_terminal(stream: Any = None) -> bool:
    """Whether tqdm bars will show: stderr is a terminal and progress is not silenced."""
    stream = sys.stderr if stream is None else stream
    try:
        tty = bool(stream.isatty())
    except (AttributeError, ValueError):  # a closed or exotic stream
        tty = False
    return tty and bars_allowed()


# --------------------------------------------------------------------------- final runs


def headline(metrics: dict[str, float]) -> tuple[str, float] | None:
    """The number a reader looks for first: Recall@1, else the first nDCG, else the first."""
    keys = [k for k in metrics if interval_of(k) is None]
    for key in (RECALL.at(1), *(k for k in keys if k.startswith(NDCG.key)), *keys):
        if key in metrics:
            return key, float(metrics[key])
    return None


@dataclass
class RunTally:
    """One line per finished final run of ``dmlbench run``, with the ETA of the whole command.

    The estimate for a remaining run is the mean time of the runs of the same method computed
    by this command (the untrained baseline takes seconds, a method minutes), else the mean of
    the computed runs that trained. Records reused from disk (created before this tally) are
    counted as done and say so where they are reused; they take no time, so they are left out
    of the rate. Each computed run also goes to the experiment tracker (``tracker``, else the
    one ``--track`` activated), which already holds the reused ones from when they ran.
    """

    names: Sequence[str]
    seeds: Sequence[int]
    tracker: Tracker | None = None
    _done: set[tuple[str, int]] = field(default_factory=set)
    _seconds: dict[str, list[float]] = field(default_factory=dict)
    _trained: list[float] = field(default_factory=list)
    _created_after: datetime = field(default_factory=lambda: datetime.now().astimezone())

    def finished(self, record: Record | None) -> None:
        """Count ``record`` (``None``: skipped, another process computes it) and print its line."""
        from dmlbench.engine.distributed import current as rank

        if record is None or not rank().is_main:  # under torchrun, rank 0 speaks for all
            return
        self._done.add((record.method, record.seed))
        if self._reused(record):
            return
        wall = record.timings.wall_seconds
        self._seconds.setdefault(record.method, []).append(wall)
        if record.timings.steps > 0:
            self._trained.append(wall)
        best = headline(record.metrics)
        score = f"{best[0]} {best[1]:.4f}" if best else "no metrics"
        line(
            f"{record.method} seed {record.seed}: {score} (took {clock(wall)}); "
            f"{clock(elapsed_since_start())} elapsed, ETA {clock(self.eta())}"
        )
        from dmlbench.engine.tracking import current, track_record

        track_record(self.tracker or current(), record)

    def eta(self) -> float | None:
        """Seconds left for the runs not yet done (``None``: no run timed yet)."""
        left = [(n, s) for s in self.seeds for n in self.names if (n, s) not in self._done]
        every = [w for ws in self._seconds.values() for w in ws]
        fallback = self._trained or every
        if not fallback:
            return None if left else 0.0
        total = 0.0
        for name, _ in left:
            own = self._seconds.get(name)
            total += sum(own) / len(own) if own else sum(fallback) / len(fallback)
        return total

    def _reused(self, record: Record) -> bool:
        try:
            created = datetime.fromisoformat(record.created)
        except ValueError:
            return False
        if created.tzinfo is None:
            created = created.astimezone()
        return created < self._created_after
