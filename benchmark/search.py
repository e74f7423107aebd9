"""Equal-budget hyper-parameter search with Optuna, on validation classes only.

Every method gets the same chance under a protocol:

- **Validation without the test classes.** :func:`tune` receives the *training* split only
  (the test split is not an argument, so no search code can reach it). ``search.validation``
  carves class-disjoint folds out of the training classes (k-fold by class, Musgrave et al.
  2020; ``folds: 1`` holds out one ``fraction`` of the classes). Continuous-label splits hold
  out groups (``extras["groups"]``, e.g. the base pose) and otherwise single items. A trial
  trains on the rest and scores on the held-out part after every epoch; its value is the best
  epoch's score (mean over folds) and that epoch is what the final runs train for.
- **Equal budget.** ``search.trials`` trials per method, counted as finished trials (complete,
  pruned, or failed for a reason such as a NaN loss); a TPE (or random) sampler seeded with the
  protocol's first seed; the protocol's pruner; the method's own ``search_space``. The paper's
  defaults are enqueued as the first trial. Every trial writes a ``search-trial`` record, so the
  report can show the budget each method spent.
- **The objective** is Recall@(first K) for class labels (the headline number of the papers)
  and nDCG@(largest K) for continuous labels (the smoothest of the protocol's nDCGs).
- **Storage.** SQLite (``results/optuna.db``, WAL) by default, any Optuna RDB URL
  (``postgresql://…``) with ``--storage``. The study name is the protocol hash + method (+ an
  override digest), so one study can never mix protocols; re-running continues it.
- **Several workers.** Trials are claimed under a lock (a file lock for SQLite, a PostgreSQL
  advisory lock), so N workers on any number of machines run exactly the budget. Heartbeats
  mark a killed worker's trial failed after a grace period (at once when the dead worker ran on
  this host) and a retry callback re-queues its parameters; an interrupted (Ctrl-C) trial is
  re-queued the same way. Retried trials do not count against the budget, their copies do.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from dmlbench.data.base import Split
from dmlbench.errors import DmlbenchError
from dmlbench.methods import METHODS, HParams
from dmlbench.protocol import MetricsSpec, Protocol

if TYPE_CHECKING:
    import optuna

    from dmlbench.runner import RunOptions

log = logging.getLogger(__name__)


class SearchError(DmlbenchError):
    """A search could not produce hyper-parameters (e.g. every trial failed)."""


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

    def as_record(self) -> dict[str, Any]:
        return asdict(self)


# --------------------------------------------------------------------------- validation


def objective_metric(protocol: Protocol, label_kind: str) -> str:
    m = protocol.metrics
    if label_kind == "continuous":
        return f"ndcg@{max(m.ndcg_at or [10])}"
    return f"recall@{m.recall_at[0]}" if m.recall_at else "map@r"


def validation_metrics(protocol: Protocol, metric: str) -> MetricsSpec:
    """Only the objective (no NMI k-means after every epoch)."""
    k = int(metric.split("@")[1]) if metric[-1].isdigit() else 1
    return MetricsSpec(
        recall_at=[k] if metric.startswith("recall@") else [],
        nmi=False,
        map_at_r=metric == "map@r",
        r_precision=False,
        normalize=protocol.metrics.normalize,
        ndcg_at=[k] if metric.startswith("ndcg@") else [],
        label_distance_at=[],
    )


def validation_folds(
    split: Split, folds: int, fraction: float, seed: int
) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(train_indices, validation_indices)`` per fold, disjoint in classes (or groups)."""
    groups = split.groups()
    units = np.unique(groups)
    if units.size < 2 * max(folds, 2 if folds == 1 else folds):
        raise SearchError(
            f"cannot carve validation from {units.size} training classes/groups "
            f"(folds={folds}); the protocol's training split is too small to search on"
        )
    order = np.random.default_rng(seed).permutation(units)
    if folds == 1:
        n_val = min(max(1, round(fraction * units.size)), units.size - 1)
        held = [order[:n_val]]
    else:
        held = np.array_split(order, folds)
    out = []
    for val_units in held:
        val = np.isin(groups, val_units)
        out.append((np.flatnonzero(~val), np.flatnonzero(val)))
    return out


# --------------------------------------------------------------------------- storage


def quiet_optuna() -> None:
    """Our own one line per trial replaces Optuna's log; its API notes are not for users."""
    import warnings

    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used")


def study_name(protocol: Protocol, method: str, overrides: dict[str, Any]) -> str:
    name = f"{protocol.name}-{protocol.hash[:16]}-{method}"
    if overrides:
        digest = hashlib.sha256(json.dumps(overrides, sort_keys=True).encode()).hexdigest()
        name += f"-override-{digest[:8]}"
    return name


def storage_url(options: SearchOptions, results_dir: Path) -> str:
    """``--storage``, or the SQLite database ``<results_dir>/optuna.db`` (created in WAL mode).

    The URL is built with SQLAlchemy's URL API, never by concatenation: a folder named ``x?1``
    would otherwise put the study in ``x`` (``?`` starts the query string) and ``a%20b`` would
    name another file. A damaged database is one line naming it and what to do.
    """
    if options.storage:
        return options.storage
    import sqlite3

    from sqlalchemy.engine import URL

    path = Path(results_dir).resolve() / "optuna.db"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(path)
        try:  # WAL persists in the file: readers never block writers
            db.execute("PRAGMA journal_mode=WAL")
            if db.execute("PRAGMA quick_check(1)").fetchone() != ("ok",):
                raise sqlite3.DatabaseError("database disk image is malformed")
            tables = db.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()
            for (table,) in tables:  # every row decoded once: a study holds kilobytes
                db.execute(f'SELECT * FROM "{table}"').fetchall()
        finally:
            db.close()
    except (sqlite3.DatabaseError, UnicodeDecodeError) as err:  # "file is not a database"...
        raise damaged_database(path, err) from None
    except OSError as err:
        raise SearchError(f"{path}: cannot create the study database ({err.strerror})") from None
    return URL.create("sqlite", database=str(path)).render_as_string(hide_password=False)


def damaged_database(path: Path | str, err: BaseException) -> SearchError:
    """The one line for a damaged SQLite study database: which file, and what to do."""
    first = f"{err}".splitlines()[0][:200] if str(err) else type(err).__name__
    return SearchError(
        f"{path}: damaged study database ({first}); move it aside and run again: the "
        f"searches start over, and the trial records under {Path(path).parent} say which "
        "trials ran"
    )


@contextmanager
def storage_errors(url: str) -> Iterator[None]:
    """Reading a study from a damaged SQLite file fails deep in SQLAlchemy or Optuna: say
    which file is damaged instead (other storages keep their own errors)."""
    import optuna
    from sqlalchemy.exc import SQLAlchemyError

    path = sqlite_path(url)
    try:
        yield
    except (
        SQLAlchemyError,
        optuna.exceptions.StorageInternalError,
        ValueError,  # a flipped byte in a stored JSON column or enum (only storage runs here)
        KeyError,
    ) as err:
        if path is None:
            raise
        raise damaged_database(path, err) from None


def sqlite_path(url: str) -> str | None:
    """The database file of a ``sqlite:`` URL (decoded: ``%3F`` is ``?``), else ``None``."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    return parsed.database if parsed.get_backend_name() == "sqlite" else None


def open_storage(url: str, options: SearchOptions) -> optuna.storages.RDBStorage:
    import optuna

    quiet_optuna()
    engine_kwargs = {"connect_args": {"timeout": 60}} if url.startswith("sqlite") else {}
    for attempt in range(5):
        try:
            return optuna.storages.RDBStorage(
                url,
                engine_kwargs=engine_kwargs,
                heartbeat_interval=options.heartbeat,
                grace_period=4 * options.heartbeat,
                heartbeat_stale_trial_callback=optuna.storages.RetryHeartbeatStaleTrialCallback(
                    max_retry=options.max_retry
                ),
            )
        except ImportError as err:
            raise SearchError(
                f"storage {url}: {err} (PostgreSQL needs `pip install dmlbench[postgres]`)"
            ) from err
        except Exception as err:  # sqlalchemy errors: say which URL failed
            # Two workers creating the tables of a fresh database race; the loser retries.
            if "IntegrityError" in type(err).__name__ and attempt < 4:
                time.sleep(1.0 + attempt)
                continue
            raise SearchError(
                f"storage {url}: {type(err).__name__}: {err}".splitlines()[0]
            ) from err
    raise AssertionError("unreachable")


@contextmanager
def claim_lock(storage: Any, url: str, name: str) -> Iterator[None]:
    """One worker at a time looks at the budget and claims a trial."""
    if url.startswith("postgresql"):
        from sqlalchemy import text

        key = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)
        with storage.engine.connect() as conn:
            conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": key})
            try:
                yield
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": key})
        return
    import fcntl

    db = sqlite_path(url) or "/tmp/dmlbench-optuna"
    lock = Path(f"{db}.{hashlib.sha256(name.encode()).hexdigest()[:12]}.lock")
    with open(lock, "a+") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


# --------------------------------------------------------------------------- budget


@dataclass
class Counts:
    finished: int  # complete + pruned + failed-with-a-reason: what the budget counts
    active: int  # running + waiting (enqueued defaults, retried copies)
    waiting: int


def count_trials(study: optuna.Study) -> Counts:
    """Budget accounting; a trial that was re-queued (killed, interrupted) is not counted."""
    from optuna.storages import RetryHeartbeatStaleTrialCallback as Retry
    from optuna.trial import TrialState

    quiet_optuna()  # retry_history is marked experimental

    trials = study.get_trials(deepcopy=False)
    replaced = {n for t in trials for n in Retry.retry_history(t)}
    replaced |= {int(t.user_attrs["retry_of"]) for t in trials if "retry_of" in t.user_attrs}
    live = [t for t in trials if t.number not in replaced]
    done = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)
    waiting = sum(t.state == TrialState.WAITING for t in live)
    running = sum(t.state == TrialState.RUNNING for t in live)
    return Counts(sum(t.state in done for t in live), running + waiting, waiting)


def _reap_local_dead(study: optuna.Study) -> None:
    """Fail running trials whose worker ran on this host and is gone (no grace period needed)."""
    from optuna.trial import TrialState

    storage: Any = study._storage  # an RDBStorage (BaseHeartbeat): see open_storage
    host = socket.gethostname()
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        pid = t.user_attrs.get("pid")
        if t.user_attrs.get("host") != host or pid is None or _alive(int(pid)):
            continue
        if storage.set_trial_state_values(t._trial_id, state=TrialState.FAIL):
            log.warning("trial %d: its worker (pid %s) is gone; re-queued", t.number, pid)
            callback = storage.get_heartbeat_stale_trial_callback()
            if callback is not None:
                callback(study, storage.get_trial(t._trial_id))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# --------------------------------------------------------------------------- the study


def open_study(
    protocol: Protocol, method: str, storage: Any, name: str, url: str | None = None
) -> optuna.Study:
    """Create or load the study; the first worker enqueues the paper defaults (under the
    claim lock when ``url`` is given, so two workers starting together enqueue them once)."""
    import optuna

    seed = protocol.seeds[0]
    sampler = (
        optuna.samplers.TPESampler(seed=seed)
        if protocol.search.sampler == "tpe"
        else optuna.samplers.RandomSampler(seed=seed)
    )
    study = optuna.create_study(
        study_name=name,
        storage=storage,
        sampler=sampler,
        pruner=make_pruner(protocol),
        direction="maximize",
        load_if_exists=True,
    )
    with claim_lock(storage, url, name) if url else _nothing():
        _init_study(study, protocol, method, name)
    return study


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def _init_study(study: optuna.Study, protocol: Protocol, method: str, name: str) -> None:
    if not study.get_trials(deepcopy=False):
        cls = METHODS.get(method)
        defaults = {**cls.defaults, "samples_per_class": cls.samples_per_class}
        study.enqueue_trial(defaults, user_attrs={"defaults": True}, skip_if_exists=True)
        study.set_user_attr("protocol_hash", protocol.hash)
        study.set_user_attr("method", method)
        study.set_user_attr("budget", protocol.search.trials)
    elif study.user_attrs.get("protocol_hash") not in (None, protocol.hash):
        raise SearchError(f"study {name} belongs to another protocol hash")


def make_pruner(protocol: Protocol) -> optuna.pruners.BasePruner:
    """The protocol's pruner, over ``folds × epochs`` validation reports."""
    import optuna

    steps = protocol.search.validation.folds * protocol.optim.epochs
    if protocol.search.pruner == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=1)
    if protocol.search.pruner == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=1, max_resource=max(steps, 1))
    return optuna.pruners.NopPruner()


def selection(study: optuna.Study, metric: str) -> Selection:
    """The best complete trial (lowest number on ties)."""
    from optuna.trial import TrialState

    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if not complete:
        reasons = sorted({str(t.user_attrs.get("fail_reason", t.state.name)) for t in study.trials})
        raise SearchError(f"study {study.study_name}: no trial completed ({'; '.join(reasons)})")
    best = max(complete, key=lambda t: (float(t.value or -math.inf), -t.number))
    return Selection(
        hparams=dict(best.user_attrs["hparams"]),
        epochs=int(best.user_attrs["best_epoch"]) + 1,
        trial=best.number,
        value=float(best.value or 0.0),
        metric=metric,
        study=study.study_name,
        trials=count_trials(study).finished,
    )


def tune(
    protocol: Protocol,
    method: str,
    train_split: Split,
    fingerprint: str,
    run: RunOptions,
    options: SearchOptions,
) -> Selection:
    """Run (or continue) ``method``'s study to its budget and return the best selection.

    ``options.workers - 1`` extra worker processes on this machine join the study; other
    machines may join through the same storage URL with ``dmlbench search``.
    """
    import torch

    from dmlbench.search_worker import run_worker, spawn_workers

    quiet_optuna()
    url = storage_url(options, run.results_dir)
    name = study_name(protocol, method, run.overrides)
    with storage_errors(url):
        study = open_study(protocol, method, open_storage(url, options), name, url)
        finished = count_trials(study).finished
    metric = objective_metric(protocol, train_split.label_kind)
    if finished >= protocol.search.trials:  # resumed: nothing left
        return selection(study, metric)
    from dmlbench.distributed import current

    if current().is_distributed:
        raise SearchError(
            f"study {name} is unfinished: tuning under torchrun is not supported (every rank "
            "would claim its own trial); run `dmlbench search` first (--workers N for N "
            "processes), then the same `torchrun … dmlbench run` uses the finished study"
        )
    # Every worker trains with the same thread count as this process, whatever --workers is:
    # the count moves numbers (seen: R@1 0.6781 vs 0.6859 under one protocol hash).
    before = torch.get_num_threads()
    run = replace(run, threads=run.threads or before)
    procs = spawn_workers(protocol, method, run, options, url, options.workers - 1)
    torch.set_num_threads(run.threads or before)
    try:
        run_worker(protocol, method, train_split, fingerprint, run, options, url)
    finally:
        for p in procs:
            p.join()
        torch.set_num_threads(before)
    failed = [p.exitcode for p in procs if p.exitcode not in (0, None)]
    if failed:
        # A killed worker's trial is failed and retried by the others (heartbeats); only a
        # budget left incomplete is an error, not the death of one process.
        done = count_trials(study).finished
        if done < protocol.search.trials:
            raise SearchError(
                f"{len(failed)} search worker(s) of {name} exited with {failed}; "
                f"{done} of {protocol.search.trials} trials finished: run the command again"
            )
        log.warning(
            "%d search worker(s) of %s exited with %s; the budget completed without them",
            len(failed), name, failed,
        )  # fmt: skip
    return selection(study, metric)
