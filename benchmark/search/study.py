"""Equal-budget hyper-parameter search with Optuna, on validation classes only.

Every method gets the same chance under a protocol:

- **Validation without the test classes.** :func:`~dmlbench.search.tuning.tune` receives the
  *training* split only (the test split is not an argument, so no search code can reach
  it). ``search.validation`` carves class-disjoint folds out of the training classes (k-fold
  by class, Musgrave et al. 2020; ``folds: 1`` holds out one ``fraction`` of the classes).
  Continuous-label splits hold out groups (``extras["groups"]``, e.g. the base pose) and
  otherwise single items. A trial trains on the rest and scores on the held-out part after
  every epoch; its value is the best epoch's score (mean over folds) and that epoch is what
  the final runs train for.
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
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dmlbench.methods import METHODS
from dmlbench.options import Selection
from dmlbench.protocol import Protocol
from dmlbench.search.storage import (
    SearchError,
    claim_lock,
    quiet_optuna,
)

if TYPE_CHECKING:
    import optuna

log = logging.getLogger(__name__)


def study_name(protocol: Protocol, method: str, overrides: dict[str, Any], index: int = 0) -> str:
    """The study's name: protocol hash + method (+ ``-study<i>`` for study i > 0 of
    ``search.studies``, so study 0 is the study a one-study protocol always had)."""
    name = f"{protocol.name}-{protocol.hash[:16]}-{method}"
    if index:
        name += f"-study{index}"
    if overrides:
        digest = hashlib.sha256(json.dumps(overrides, sort_keys=True).encode()).hexdigest()
        name += f"-override-{digest[:8]}"
    return name


#: How far apart two studies' sampler seeds start: above any budget (``MAX_TRIALS``), so no
#: slot of study i shares a seed with a slot of study j.
STUDY_SEED_STRIDE = 1_000_003


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


def trial_slots(trials: list[optuna.trial.FrozenTrial]) -> dict[int, int]:
    """Each live trial's slot: its place in the order an uninterrupted study runs them.

    A trial that was interrupted or killed is re-queued as a copy with a new trial number; the
    copy takes the slot of the trial it retries, and the trials after it keep the slots they
    would have had. The slot, not the trial number, seeds each proposal
    (:func:`proposal_sampler`) and names each trial record, so a
    resumed search proposes, trains and records exactly the trials an uninterrupted one does.
    """
    from optuna.storages import RetryHeartbeatStaleTrialCallback as Retry

    quiet_optuna()  # retry_history is marked experimental
    origin: dict[int, int] = {}
    for t in sorted(trials, key=lambda t: t.number):
        history = Retry.retry_history(t)
        before = int(t.user_attrs["retry_of"]) if "retry_of" in t.user_attrs else None
        first = history[0] if history else before
        origin[t.number] = origin.get(first, first) if first is not None else t.number
    replaced = {n for t in trials for n in Retry.retry_history(t)}
    replaced |= {int(t.user_attrs["retry_of"]) for t in trials if "retry_of" in t.user_attrs}
    live = sorted((t.number for t in trials if t.number not in replaced), key=origin.__getitem__)
    return {number: slot for slot, number in enumerate(live)}


def next_slot(trials: list[optuna.trial.FrozenTrial]) -> int:
    """The slot of the trial ``study.ask()`` hands out next: the first waiting (re-queued or
    enqueued) trial's, else a new one after every live trial."""
    from optuna.trial import TrialState

    slots = trial_slots(trials)
    waiting = [t.number for t in trials if t.state == TrialState.WAITING and t.number in slots]
    return slots[min(waiting)] if waiting else len(slots)


def reap_local_dead(study: optuna.Study) -> None:
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


def proposal_sampler(protocol: Protocol, slot: int, index: int = 0) -> optuna.samplers.BaseSampler:
    """The sampler that proposes the trial of ``slot`` in study ``index``, seeded with the
    protocol's first seed plus the slot (:func:`trial_slots`) plus ``index`` ×
    :data:`STUDY_SEED_STRIDE` (study 0 keeps the seeds of a one-study protocol; the others are
    independent searches of the same budget): a function of the slot and the
    finished trials only, so a search resumed after an interruption proposes what an
    uninterrupted one would (a sampler's own state is lost with its process).

    Seeding by trial rather than by worker keeps proposals distinct when several processes
    join one study with the same worker index (the leaderboard's seeds of one tuned method
    do): two samplers seeded alike drew the same random start-up trials in lockstep, so 8-trial
    studies held 6 distinct configurations. The count is read under the claim lock, so each
    trial gets its own seed, and one worker proposes the same start-up trials as several.
    """
    import optuna

    seed = protocol.seeds[0] + slot + index * STUDY_SEED_STRIDE
    if protocol.search.sampler != "tpe":
        return optuna.samplers.RandomSampler(seed=seed)
    n_startup = min(10, max(2, protocol.search.trials // 2))
    return optuna.samplers.TPESampler(seed=seed, n_startup_trials=n_startup)


def open_study(
    protocol: Protocol,
    method: str,
    storage: Any,
    name: str,
    url: str | None = None,
    index: int = 0,
) -> optuna.Study:
    """Create or load the study; the first worker enqueues the paper defaults (under the
    claim lock when ``url`` is given, so two workers starting together enqueue them once)."""
    import optuna

    study = optuna.create_study(
        study_name=name,
        storage=storage,
        sampler=proposal_sampler(protocol, 0, index),  # the worker's rule: each slot its own
        pruner=make_pruner(protocol),
        direction="maximize",
        load_if_exists=True,
    )
    with claim_lock(storage, url, name) if url else _nothing():
        _init_study(study, protocol, method, name, index)
    return study


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def _init_study(
    study: optuna.Study, protocol: Protocol, method: str, name: str, index: int = 0
) -> None:
    if not study.get_trials(deepcopy=False):
        cls = METHODS.get(method)
        defaults = cls.resolved_hparams({}, protocol.batch.samples_per_class)
        if protocol.batch.samples_per_class is not None:  # fixed: not a dimension of the study
            defaults.pop("samples_per_class")
        study.enqueue_trial(defaults, user_attrs={"defaults": True}, skip_if_exists=True)
        study.set_user_attr("protocol_hash", protocol.hash)
        study.set_user_attr("method", method)
        study.set_user_attr("budget", protocol.search.trials)
        study.set_user_attr("study_index", index)
    elif study.user_attrs.get("protocol_hash") not in (None, protocol.hash):
        raise SearchError(f"study {name} belongs to another protocol hash")


#: Complete trials before the median pruner may stop one: every method's search then completes
#: at least 3 of its trials, and later trials are judged against a median of three curves, not
#: the mean of two (docs/tuning.md, "The pruner's start-up trials").
MEDIAN_STARTUP_TRIALS = 3


def make_pruner(protocol: Protocol) -> optuna.pruners.BasePruner:
    """The protocol's pruner, over ``folds × epochs`` validation reports."""
    import optuna

    steps = protocol.search.validation.folds * protocol.optim.epochs
    if protocol.search.pruner == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=MEDIAN_STARTUP_TRIALS, n_warmup_steps=1)
    if protocol.search.pruner == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=1, max_resource=max(steps, 1))
    return optuna.pruners.NopPruner()


def selection(study: optuna.Study, metric: str, index: int = 0, studies: int = 1) -> Selection:
    """The best complete trial (lowest slot on ties: :func:`trial_slots`) of study ``index``
    of ``studies``."""
    from optuna.trial import TrialState

    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if not complete:
        reasons = sorted({str(t.user_attrs.get("fail_reason", t.state.name)) for t in study.trials})
        raise SearchError(f"study {study.study_name}: no trial completed ({'; '.join(reasons)})")
    slots = trial_slots(study.get_trials(deepcopy=False))
    best = max(complete, key=lambda t: (float(t.value or -math.inf), -slots[t.number]))
    return Selection(
        hparams=dict(best.user_attrs["hparams"]),
        epochs=int(best.user_attrs["best_epoch"]) + 1,
        trial=slots[best.number],
        value=float(best.value or 0.0),
        metric=metric,
        study=study.study_name,
        trials=count_trials(study).finished,
        study_index=index,
        studies=studies,
    )
