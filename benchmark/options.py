"""How to run, as opposed to what: the options of a run, of its search, of its hardware, and the
selection a search hands to the final runs.

They live here, below ``run``, ``search`` and ``leaderboard``, so that each of those takes its
input type from below rather than from its caller (the search used to import its options from
the run that calls it). Nothing here may move a number, except ``RunOptions.overrides``, which
are written into the record and keep it off leaderboards. The torch thread count, which does
move numbers (reductions round differently), is set in one place: :func:`torch_threads`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

HParams = dict[str, Any]


@dataclass(frozen=True)
class Accel:
    """How to run, never what: data-loader workers and mixed precision.

    None of these may change a number on the CPU; on CUDA, mixed precision is ``auto`` (bf16)
    unless ``amp`` says ``fp16`` (with a grad scaler) or ``off``, and every record names it
    (``env.precision``). The memory format and torch.compile are not here: both move numbers
    on the CPU too, so they are protocol keys (``model.channels_last``, ``model.compile``).
    """

    num_workers: int = 0
    amp: str = "auto"

    def precision(self, device: Any) -> str:
        """The training precision on ``device``: ``"fp32"``, ``"bf16"`` or ``"fp16"``.

        The one place it is decided: the training step autocasts to it and every record
        carries it (``env.precision``), so a table never averages bf16 with fp32 runs.
        Autocast is enabled on CUDA only, so the CPU is ``"fp32"`` whatever ``amp`` says.
        """
        import torch

        if torch.device(device).type != "cuda" or self.amp == "off":
            return "fp32"
        return "fp16" if self.amp == "fp16" else "bf16"


@dataclass
class SearchOptions:
    """Where the study lives and who works on it; none of this may move a number."""

    storage: str | None = None  # None: sqlite:///<results_dir>/optuna.db
    workers: int = 1
    heartbeat: int = 30  # seconds between heartbeats; a trial is stale after 4 of them
    max_retry: int = 3
    plugins: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Selection:
    """What a finished search hands to the final runs (and writes into their records)."""

    hparams: HParams
    epochs: int
    trial: int
    value: float
    metric: str
    study: str
    trials: int
    study_index: int = 0  # which of the protocol's ``search.studies`` studies made it
    studies: int = 1

    def as_record(self) -> dict[str, Any]:
        """The record's ``search``; the study index only where there are several studies
        (a record without one is study 0 of 1, as every record before them)."""
        out = asdict(self)
        if self.studies == 1:
            del out["study_index"], out["studies"]
        return out

    @classmethod
    def from_record(cls, search: dict[str, Any]) -> Selection:
        """The selection a final record was made with (its ``search``), to run it again."""
        return cls(**{f.name: search.get(f.name, f.default) for f in fields(cls)})


@dataclass
class RunOptions:
    """How to run a protocol (``dmlbench run``, a search's trials, the leaderboard's re-runs)."""

    results_dir: Path = Path("results")
    data_root: str | None = None
    device: str = "auto"
    max_steps: int | None = None
    force: bool = False
    progress: bool = True
    hparams: dict[str, HParams] = field(default_factory=dict)
    overrides: dict[str, Any] = field(default_factory=dict)
    accel: Accel = field(default_factory=Accel)
    search: SearchOptions = field(default_factory=SearchOptions)
    threads: int | None = None  # torch threads of every run and trial (None: leave as is)
    keep: bool = True  # final runs keep weights and test embeddings (dmlbench.engine.artifacts)
    # A finished search's selection per method, used instead of searching: the final record
    # is the one the search would have led to (dmlbench check re-runs the tuned board so).
    selections: dict[str, Selection] = field(default_factory=dict)


@contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """``threads`` torch threads inside (unchanged when ``None``), the caller's restored after.

    A number depends on the thread count (reductions round differently), so the count is
    fixed by the run's options, recorded (``env.torch_threads``), and the same in every search
    worker process whatever ``--workers`` is. Every place that fixes it goes through here.
    """
    import torch

    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)
