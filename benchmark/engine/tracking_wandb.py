"""The Weights & Biases backend of ``--track``: ``wandb:PROJECT``.

W&B's own settings choose where runs go: the entity is ``WANDB_ENTITY`` (else the account's
default), and ``WANDB_MODE=offline`` writes each run under ``$WANDB_DIR/wandb/offline-run-*``
(``WANDB_DIR`` defaults to the working folder) for ``wandb sync`` to upload later; nothing is
sent then. dmlbench never lets W&B prompt for a login: online without stored credentials
(``wandb login`` or ``WANDB_API_KEY``) is an error, checked before training starts.

One W&B run per record, named like the record, grouped by protocol version
(``<protocol>/<hash12>``), with an id derived from its name so that a resumed or re-forced run
is appended to rather than duplicated. The hyper-parameters, the protocol, its hash and the
record path (:func:`~dmlbench.engine.tracking.run_labels`) are the run's config; per-epoch loss
and validation scores are history rows plotted against ``epoch``; final metrics are the run's
summary. Console capture is off (dmlbench's output stays where it was) and W&B prints nothing.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from typing import Any

from dmlbench.engine.tracking_base import MissingTrackerPackage, RunLog, finite_values, run_labels
from dmlbench.errors import DmlbenchError

# Modes in which W&B sends nothing and so needs no credentials.
LOCAL_MODES = ("offline", "dryrun", "disabled")
# Characters W&B refuses in a project name.
BAD_PROJECT = set("/\\#?%:")


class WandbRun:
    """One W&B run, written through its own object (never ``wandb.log``'s global run)."""

    def __init__(self, run: Any) -> None:
        self.run = run

    def scalars(self, values: Mapping[str, float], step: int) -> None:
        finite = finite_values(values)
        if finite:  # W&B's own step only grows: a fold's epochs restart, so plot by "epoch"
            self.run.log({"epoch": step, **finite})

    def hparams(self, params: Mapping[str, Any], metrics: Mapping[str, float]) -> None:
        self.run.config.update(dict(params), allow_val_change=True)
        self.run.summary.update(finite_values(metrics))

    def close(self) -> None:
        self.run.finish()


class WandbTracker:
    """Runs in the W&B project ``project`` (online, or offline under ``WANDB_MODE``)."""

    def __init__(self, project: str) -> None:
        try:
            import wandb
        except ImportError:
            raise MissingTrackerPackage("wandb", "wandb", "wandb") from None
        self.spec: str | None = f"wandb:{project}"
        if BAD_PROJECT & set(project):
            refused = "".join(sorted(BAD_PROJECT))
            raise DmlbenchError(f"--track {self.spec}: a W&B project name may not hold {refused}")
        self.project = project
        try:
            self.mode = wandb.setup().settings.mode
        except Exception as err:  # pydantic's, for WANDB_MODE=bogus or an empty WANDB_MODE
            first = " ".join(str(err).split())[:200]
            raise DmlbenchError(
                f"--track {self.spec}: W&B refuses its settings from the environment "
                f"(WANDB_MODE={os.environ.get('WANDB_MODE', '')!r}: {type(err).__name__}: "
                f"{first}); WANDB_MODE is online, offline or disabled"
            ) from None
        if self.mode not in LOCAL_MODES and not wandb.login(prompt=False, verify=False):
            raise DmlbenchError(
                f"--track {self.spec}: no W&B credentials (run wandb login or set "
                "WANDB_API_KEY; or set WANDB_MODE=offline and upload later with wandb sync)"
            )

    def open_run(self, name: str) -> RunLog:
        import wandb

        labels = run_labels(name)
        run = wandb.init(
            project=self.project,
            name=name,
            id=run_id(name),
            resume="allow",
            group=f"{labels['protocol']}/{labels['protocol_hash']}",
            config=labels,
            reinit="create_new",
            settings=wandb.Settings(console="off", silent=True),
        )
        run.define_metric("*", step_metric="epoch")
        return WandbRun(run)

    def close(self) -> None:
        pass  # every run is finished by its own close


def run_id(name: str) -> str:
    """The W&B id of run ``name``: the same name, the same run (ids may not hold ``/``)."""
    return hashlib.sha256(name.encode()).hexdigest()[:32]
