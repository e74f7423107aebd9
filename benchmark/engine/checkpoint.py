"""Checkpoints and interruptions: a run killed at hour 9 resumes, and ends with the same numbers.

A checkpoint holds the model, the loss's own parameters (proxies), optimizer and scheduler
states, the position in the schedule (epoch and batch within the epoch), the curve so far and
torch's RNG state. The batch order needs no state of its own: it depends only on (seed, epoch).
So a resumed run replays exactly what an uninterrupted run would have done.

Checkpoints are written atomically and read with ``torch.load(weights_only=True)``: a
checkpoint file can never execute code.

SIGINT and SIGTERM do not kill a training step half-way: the handler only raises a flag, the
loop finishes the step, writes a checkpoint and raises :class:`TrainingInterrupted`.
"""

from __future__ import annotations

import io
import pickle
import re
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from dmlbench.atomic import atomic_write
from dmlbench.errors import DmlbenchError


class TrainingInterrupted(DmlbenchError):
    """SIGINT/SIGTERM during training; the checkpoint is written, re-run to resume."""


@dataclass
class StopFlag:
    signum: int | None = None

    @property
    def requested(self) -> bool:
        return self.signum is not None


@contextmanager
def interrupt_guard() -> Iterator[StopFlag]:
    """Turn SIGINT/SIGTERM into a flag for the duration of the block (main thread only)."""
    flag = StopFlag()
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return

    def handler(signum: int, frame: Any) -> None:
        if flag.requested:  # a second Ctrl-C means "now"
            raise KeyboardInterrupt
        flag.signum = signum

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield flag
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


@dataclass
class Progress:
    """Where training is: the next epoch/batch to run, and what was measured so far."""

    epoch: int = 0
    batch: int = 0
    steps: int = 0
    running_loss: float = 0.0
    running_n: int = 0
    curve: list[dict[str, float]] = field(default_factory=list)


def save_checkpoint(
    path: Path,
    progress: Progress,
    model: torch.nn.Module,
    loss: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
) -> None:
    state = {
        "progress": {
            "epoch": progress.epoch,
            "batch": progress.batch,
            "steps": progress.steps,
            "running_loss": progress.running_loss,
            "running_n": progress.running_n,
            "curve": progress.curve,
        },
        "model": model.state_dict(),
        "loss": loss.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict() if scheduler is not None else None,
        "torch_rng": torch.get_rng_state(),
    }
    save_tensors(path, state)


def save_tensors(path: Path, state: Any) -> None:
    """``torch.save(state)`` to ``path``, atomically: the one way tensors reach the disk
    (checkpoints, kept weights).

    Serialised in memory first: torch's zip writer turns a full disk into a ``RuntimeError``
    ("unexpected pos") with a traceback; a plain write of the bytes raises the ``OSError``
    (ENOSPC) that names the cause, which :func:`~dmlbench.atomic.atomic_write` makes one line
    naming ``path`` (the file before, if any, untouched).

    Raises:
        WriteError: ``path`` cannot be written (disk full, read-only, quota).
    """
    buffer = io.BytesIO()
    torch.save(state, buffer)
    atomic_write(path, lambda fh: fh.write(buffer.getbuffer()))


def load_checkpoint(
    path: Path,
    model: torch.nn.Module,
    loss: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
) -> Progress:
    """Restore everything in place and return the progress to continue from."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
        model.load_state_dict(state["model"])
        loss.load_state_dict(state["loss"])
        optimizer.load_state_dict(state["optimizer"])
        if scheduler is not None and state["scheduler"] is not None:
            scheduler.load_state_dict(state["scheduler"])
        torch.set_rng_state(state["torch_rng"])
        return Progress(**state["progress"])
    except pickle.UnpicklingError as err:  # a foreign or malicious file: refused, not run
        found = re.search(r"GLOBAL (\S+)", str(err))
        what = f"references {found.group(1)}" if found else "holds more than tensors"
        raise DmlbenchError(
            f"{path}: refused: the checkpoint {what} (weights_only loading allows tensors "
            "only); delete it to restart that run"
        ) from None
    except Exception as err:  # a torn file: say which, and how to recover
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        raise DmlbenchError(
            f"{path}: unreadable checkpoint ({type(err).__name__}: {first}); delete it to restart"
        ) from None
