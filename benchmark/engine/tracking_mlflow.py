"""The MLflow backend of ``--track``: ``mlflow:URI``.

``URI`` is MLflow's own tracking URI when it has a scheme (``sqlite:///runs/mlflow.db``, a
tracking server ``http(s)://host:5000``, ``postgresql://…``); a plain path is a folder that
holds an SQLite store, ``DIR/mlflow.db``. SQLite is the embedded default, not MLflow's file
store (``./mlruns``), because MLflow 3 keeps the file store in maintenance mode and refuses to
open one unless ``MLFLOW_ALLOW_FILE_STORE=true`` is set, and because the SQLite store needs
only SQLAlchemy and Alembic, which Optuna already brings: ``mlflow-skinny`` is the whole
install. Its web UI is in the full ``mlflow`` package (``mlflow ui --backend-store-uri
sqlite:///DIR/mlflow.db``).

One MLflow experiment per protocol version (``<protocol>/<hash12>``, the records' folder: only
its runs compare), one MLflow run per record, named like the record (re-opened, not
duplicated, when a run is resumed or forced again). The hyper-parameters are params; the
per-epoch loss and validation scores are metrics at the epoch as step; the final metrics are
metrics at step 0; the protocol, its hash and the record path are tags
(:func:`~dmlbench.engine.tracking.run_labels`). MLflow names may not hold ``@``, so
``recall@1`` is logged as ``recall_at_1``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dmlbench.engine.tracking_base import (
    MissingTrackerPackage,
    RunLog,
    finite_values,
    plain_value,
    run_labels,
    writable,
)
from dmlbench.errors import DmlbenchError

DB_FILE = "mlflow.db"


def tracking_uri(where: str) -> str:
    """MLflow's tracking URI for ``mlflow:WHERE``: a URI as given, a folder as its SQLite store.

    Raises:
        DmlbenchError: ``where`` is a path to a file, not a folder.
    """

    if where.startswith("sqlite:///"):  # its folder must exist and take a file: else SQLite
        # failed after a minute of retries, with a traceback
        db = Path(where.removeprefix("sqlite:///"))
        writable(db.parent, f"mlflow:{where}")
        return where
    if where.startswith(("http://", "https://")):
        reachable(where)
        return where
    if "://" in where:
        return where
    folder = Path(where)
    if folder.exists() and not folder.is_dir():
        raise DmlbenchError(f"--track mlflow:{where}: {folder} is a file, not a folder")
    writable(folder, f"mlflow:{where}")
    folder.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{(folder / DB_FILE).resolve()}"


CONNECT_TIMEOUT = 10.0  # seconds to open a TCP connection to a tracking server


def reachable(uri: str) -> None:
    """Refuse a tracking server that does not accept a connection within
    :data:`CONNECT_TIMEOUT` (MLflow's client retried for minutes before failing).

    Raises:
        DmlbenchError: one line naming the server and the reason.
    """
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(uri)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise DmlbenchError(f"--track mlflow:{uri}: not a valid port") from None
    if not parts.hostname:
        raise DmlbenchError(f"--track mlflow:{uri}: no host name")
    try:
        with socket.create_connection((parts.hostname, port), timeout=CONNECT_TIMEOUT):
            pass
    except OSError as err:
        why = err.strerror or type(err).__name__
        raise DmlbenchError(
            f"--track mlflow:{uri}: cannot reach {parts.hostname}:{port} ({why}); start the "
            "server, or track into a folder (--track mlflow:DIR)"
        ) from None


def mlflow_key(name: str) -> str:
    """``name`` as MLflow accepts it (letters, digits, ``_ - . / : space``): ``@`` → ``_at_``."""
    return re.sub(r"[^\w\-./: ]", "_", name.replace("@", "_at_"))


class MlflowRun:
    """One MLflow run, written through the client (no global active run, so the search's
    trials and a command's final runs never share state)."""

    def __init__(self, client: Any, run_id: str) -> None:
        self.client, self.run_id = client, run_id

    def scalars(self, values: Mapping[str, float], step: int) -> None:
        self._metrics(values, step)

    def hparams(self, params: Mapping[str, Any], metrics: Mapping[str, float]) -> None:
        """Params are write-once in MLflow: a resumed run that changes one (a trial's
        ``state`` from fail to complete) keeps the first and gets the new value as a tag."""
        from mlflow.entities import Param, RunTag

        logged = self.client.get_run(self.run_id).data.params
        text = {mlflow_key(k): _text(v) for k, v in params.items()}
        new = [Param(k, v) for k, v in text.items() if k not in logged]
        changed = [RunTag(k, v) for k, v in text.items() if k in logged and logged[k] != v]
        self.client.log_batch(self.run_id, params=new, tags=changed)
        self._metrics(metrics, 0)

    def close(self) -> None:
        self.client.set_terminated(self.run_id)

    def _metrics(self, values: Mapping[str, float], step: int) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        batch = [Metric(mlflow_key(k), v, now, step) for k, v in finite_values(values).items()]
        if batch:
            self.client.log_batch(self.run_id, metrics=batch)


class MlflowTracker:
    """Runs in the MLflow store at ``mlflow:WHERE`` (opened, and created, at once: a wrong
    URI or an unreachable server stops the command before it trains)."""

    def __init__(self, where: str) -> None:
        try:
            from mlflow.exceptions import MlflowException
            from mlflow.tracking import MlflowClient
        except ImportError:
            raise MissingTrackerPackage("mlflow", "mlflow-skinny", "mlflow") from None
        self.spec: str | None = f"mlflow:{where}"
        self.uri = tracking_uri(where)
        try:
            self.client = MlflowClient(tracking_uri=self.uri)
            self.client.search_experiments(max_results=1)
        except MlflowException as err:
            raise DmlbenchError(f"--track {self.spec}: {_one_line(err)}") from None
        except Exception as err:  # SQLAlchemy's, requests': a store that cannot be opened
            first = _one_line(err)[:300]
            raise DmlbenchError(f"--track {self.spec}: {type(err).__name__}: {first}") from None
        self._experiments: dict[str, str] = {}

    def open_run(self, name: str) -> RunLog:
        labels = run_labels(name)
        experiment = self._experiment(f"{labels['protocol']}/{labels['protocol_hash']}")
        found = self.client.search_runs(
            [experiment], filter_string=f"attributes.run_name = '{name}'", max_results=1
        )
        if found:
            run_id = found[0].info.run_id
            self.client.update_run(run_id, status="RUNNING")
        else:
            run_id = self.client.create_run(experiment, run_name=name, tags=labels).info.run_id
        return MlflowRun(self.client, run_id)

    def close(self) -> None:
        pass  # every run is terminated by its own close

    def _experiment(self, name: str) -> str:
        """The id of experiment ``name``, created on first use (another search worker may
        create it at the same moment: then its id is read back)."""
        from mlflow.exceptions import MlflowException

        if name not in self._experiments:
            found = self.client.get_experiment_by_name(name)
            if found is None:
                try:
                    return self._experiments.setdefault(name, self.client.create_experiment(name))
                except MlflowException:
                    found = self.client.get_experiment_by_name(name)
                    if found is None:
                        raise
            self._experiments[name] = found.experiment_id
        return self._experiments[name]


def _text(value: Any) -> str:
    """A param's value as MLflow stores it: text, non-scalars as sorted JSON."""
    return str(plain_value(value))


def _one_line(err: Exception) -> str:
    return " ".join(str(err).split())
