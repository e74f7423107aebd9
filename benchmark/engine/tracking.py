"""Experiment tracking: hyper-parameters, per-epoch curves and final metrics in TensorBoard,
MLflow or Weights & Biases.

Records under ``results/`` stay the source of truth; a tracker is a window on them that a
researcher already knows how to browse and compare. Tracking is optional and off by default:
the engine and the search receive a :class:`Tracker` (or a :class:`RunLog` of one run) and
never know which backend, if any, is behind it, and nothing a tracker does can move a number
(it only receives values already computed).

``--track BACKEND:WHERE`` (on ``run``, ``search`` and ``sweep``) activates one for the whole
command (:func:`activated`); code that was not handed a tracker uses :func:`current`:

- ``tensorboard:DIR``: event files under ``DIR`` (``tensorboard --logdir DIR``);
- ``mlflow:URI``: an MLflow tracking store (:mod:`dmlbench.engine.tracking_mlflow`);
- ``wandb:PROJECT``: a W&B project, online or offline (:mod:`dmlbench.engine.tracking_wandb`).

One tracked run per record, named like the record file:
``<protocol>/<hash12>/<method>-seed0-final`` or ``…/<method>-trial0003-search-trial``; the
MLflow and W&B runs also carry the protocol, its hash and the record's path under the results
folder (:func:`run_labels`), which TensorBoard shows as the run's folder. The packages are
optional extras; a missing one is a :class:`MissingTrackerPackage` error naming its install.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dmlbench.engine.tracking_base import (
    MissingTrackerPackage,
    RunLog,
    Tracker,
    finite_values,
    plain_value,
    run_labels,
    writable,
)
from dmlbench.errors import DmlbenchError

if TYPE_CHECKING:
    from dmlbench.records import Record

BACKENDS = ("tensorboard", "mlflow", "wandb")
SPECS = "tensorboard:DIR, mlflow:URI or wandb:PROJECT"
# The interfaces and helpers of tracking_base, importable from here as they always were.
__all__ = [
    "BACKENDS",
    "SPECS",
    "MissingTrackerPackage",
    "NullRun",
    "NullTracker",
    "RunLog",
    "Shifted",
    "TensorBoardRun",
    "TensorBoardTracker",
    "Tracker",
    "activated",
    "current",
    "finite_values",
    "open_tracker",
    "plain_value",
    "record_run_name",
    "run_labels",
    "track_record",
]


class NullRun:
    """A run that logs nothing: what the engine gets when nothing is tracked."""

    def scalars(self, values: Mapping[str, float], step: int) -> None:
        pass

    def hparams(self, params: Mapping[str, Any], metrics: Mapping[str, float]) -> None:
        pass

    def close(self) -> None:
        pass


class NullTracker:
    """No tracking (the default): every call is a no-op, so callers never test for it."""

    spec: str | None = None

    def open_run(self, name: str) -> RunLog:
        return NullRun()

    def close(self) -> None:
        pass


class Shifted:
    """A view of ``run`` whose steps start at ``offset``: fold ``f`` of a search trial logs its
    epochs at ``f × epochs + epoch``, the step Optuna's pruner sees."""

    def __init__(self, run: RunLog, offset: int) -> None:
        self.run, self.offset = run, offset

    def scalars(self, values: Mapping[str, float], step: int) -> None:
        self.run.scalars(values, self.offset + step)

    def hparams(self, params: Mapping[str, Any], metrics: Mapping[str, float]) -> None:
        self.run.hparams(params, metrics)

    def close(self) -> None:  # the trial closes the run it opened, not a fold
        pass


class TensorBoardRun:
    """One TensorBoard run: a folder of event files written by ``SummaryWriter``."""

    def __init__(self, folder: Path) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(folder))

    def scalars(self, values: Mapping[str, float], step: int) -> None:
        for key, value in finite_values(values).items():
            self.writer.add_scalar(key, value, step)

    def hparams(self, params: Mapping[str, Any], metrics: Mapping[str, float]) -> None:
        """In the run's own folder (``add_hparams`` would make a timestamped sub-run), with
        each metric also as a scalar, which is where the HParams dashboard reads it."""
        from torch.utils.tensorboard.summary import hparams

        finite = finite_values(metrics)
        for summary in hparams({k: plain_value(v) for k, v in params.items()}, finite):
            self.writer._get_file_writer().add_summary(summary)
        for key, value in finite.items():
            self.writer.add_scalar(key, value, 0)

    def close(self) -> None:
        self.writer.close()


class TensorBoardTracker:
    """Event files under ``root``, one folder per run (``tensorboard --logdir root``)."""

    def __init__(self, root: Path) -> None:
        try:
            import tensorboard  # noqa: F401  (torch.utils.tensorboard needs it)
        except ImportError:
            raise MissingTrackerPackage("tensorboard", "tensorboard", "track") from None
        self.root = root
        self.spec: str | None = f"tensorboard:{root}"

    def open_run(self, name: str) -> RunLog:
        return TensorBoardRun(self.root / name)

    def close(self) -> None:
        pass  # every run closes its own writer


def open_tracker(spec: str | None) -> Tracker:
    """The tracker ``--track`` names (``tensorboard:DIR``, ``mlflow:URI``, ``wandb:PROJECT``);
    no spec, no tracking.

    Raises:
        DmlbenchError: an unknown backend, an empty destination, a store that cannot be
            opened or a missing package (one line).
    """
    if not spec:
        return NullTracker()
    backend, sep, where = spec.partition(":")
    if backend not in BACKENDS or not sep or not where:
        raise DmlbenchError(f"--track {spec}: expected {SPECS} (backends: {', '.join(BACKENDS)})")
    if backend == "mlflow":
        from dmlbench.engine.tracking_mlflow import MlflowTracker

        return MlflowTracker(where)
    if backend == "wandb":
        from dmlbench.engine.tracking_wandb import WandbTracker

        return WandbTracker(where)
    root = Path(where)
    if root.exists() and not root.is_dir():
        raise DmlbenchError(f"--track {spec}: {root} is a file, not a folder")
    writable(root, spec)
    return TensorBoardTracker(root)


_CURRENT: list[Tracker] = [NullTracker()]


def current() -> Tracker:
    """The tracker of the running command (the null tracker unless ``--track`` was given)."""
    return _CURRENT[-1]


@contextmanager
def activated(tracker: Tracker) -> Iterator[Tracker]:
    """Make ``tracker`` :func:`current` inside, and flush it on the way out."""
    _CURRENT.append(tracker)
    try:
        yield tracker
    finally:
        _CURRENT.pop()
        tracker.close()


def record_run_name(record: Record) -> str:
    """``<protocol>/<hash12>/<record file stem>``: a tracked run is found from its record."""
    from dmlbench.records import record_path

    path = record_path(
        Path("."), record.protocol.name, record.protocol.hash, record.method, record.seed,
        record.stage, record.overrides, trial=record.trial,
    )  # fmt: skip
    return f"{record.protocol.name}/{record.protocol.hash[:12]}/{path.stem}"


def track_record(tracker: Tracker, record: Record) -> None:
    """A finished final run: its hyper-parameters, per-epoch curve and test metrics."""
    if isinstance(tracker, NullTracker):
        return
    run = tracker.open_run(record_run_name(record))
    try:
        for point in record.curve:
            step = int(point.get("epoch", 0))
            run.scalars({k: v for k, v in point.items() if k not in ("epoch", "fold")}, step)
        params = {
            **record.hparams,
            "method": record.method,
            "seed": record.seed,
            "protocol": record.protocol.name,
            "protocol_hash": record.protocol.hash[:12],
        }
        if record.search:
            params["selected_trial"] = record.search.get("trial", -1)
            params["epochs"] = record.search.get("epochs", -1)
        run.hparams(params, {f"test/{k}": v for k, v in record.metrics.items()})
    finally:
        run.close()
