"""What every tracking backend shares: the interfaces the engine sees and the value helpers.

:mod:`dmlbench.engine.tracking` chooses a backend and keeps the current tracker; the MLflow
and W&B backends (:mod:`~dmlbench.engine.tracking_mlflow`,
:mod:`~dmlbench.engine.tracking_wandb`) implement these interfaces. They live here, below all
three, so that a backend never imports the module that imports it (the chooser loads a backend
only when ``--track`` names it: its package is an optional extra).
"""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from dmlbench.errors import DmlbenchError


class MissingTrackerPackage(DmlbenchError):
    """The backend ``--track`` names is not installed (the message names its extra)."""

    def __init__(self, backend: str, package: str, extra: str) -> None:
        super().__init__(
            f"--track {backend}: the {package} package is not installed "
            f'(pip install -e ".[{extra}]")'
        )


class RunLog(Protocol):
    """One run in the tracker's store (a search trial or a final run)."""

    def scalars(self, values: Mapping[str, float], step: int) -> None:
        """Log ``values`` (loss, validation scores) at ``step`` (the epoch)."""

    def hparams(self, params: Mapping[str, Any], metrics: Mapping[str, float]) -> None:
        """Log the run's hyper-parameters with the metrics to compare them by."""

    def close(self) -> None:
        """Flush and release the run (its data must be on disk afterwards)."""


class Tracker(Protocol):
    """A tracking backend; ``spec`` re-creates it in another process (search workers)."""

    spec: str | None

    def open_run(self, name: str) -> RunLog:
        """The run called ``name`` (appended to when it exists: a resumed run)."""

    def close(self) -> None:
        """Flush everything."""


def plain_value(value: Any) -> bool | int | float | str:
    """What the HParams plugin takes: scalars as they are, anything else as JSON text."""
    if isinstance(value, (bool, int, float, str)):
        return value
    return json.dumps(value, sort_keys=True, default=str)


def finite_values(values: Mapping[str, Any]) -> dict[str, float]:
    """The numbers among ``values`` that a chart can show (a failed trial's NaN is left out)."""
    return {
        k: float(v)
        for k, v in values.items()
        if isinstance(v, numbers.Real) and math.isfinite(float(v))
    }


def run_labels(name: str) -> dict[str, str]:
    """What a tracked run called ``name`` (``<protocol>/<hash12>/<record stem>``) is found by:
    its protocol, the protocol's hash (12 digits, as the results folder names it) and its
    record's path under the results folder."""
    protocol, _, rest = name.partition("/")
    digest = rest.partition("/")[0]
    return {"protocol": protocol, "protocol_hash": digest, "record": f"{name}.json"}


def writable(folder: Path, spec: str) -> None:
    """Refuse a tracking folder that cannot be written, before any work (it once failed with
    a FileNotFoundError traceback when its parent could not be created, e.g. under /proc).

    Raises:
        DmlbenchError: one line naming the flag, the folder and why.
    """
    from dmlbench.records import folder_problem

    try:
        problem = folder_problem(folder, f"--track {spec}")
    except DmlbenchError as err:
        raise DmlbenchError(f"--track {spec}: {err}") from None
    if problem:
        raise DmlbenchError(f"{problem}; the tracked runs are written there")
