"""A search worker: claim a trial, train it on the training folds, score it on validation.

Workers are interchangeable: the one inside ``dmlbench run``, the extra processes of
``--workers N`` and ``dmlbench search`` on other machines all run :func:`run_worker` against
the same study. See :mod:`dmlbench.search.study` for the budget rules.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from dmlbench.data.base import Split
from dmlbench.engine import progress
from dmlbench.engine.checkpoint import TrainingInterrupted
from dmlbench.engine.tracking import RunLog, Shifted, Tracker, current
from dmlbench.errors import DmlbenchError, NonFiniteLossError
from dmlbench.methods import METHODS, HParams, method_for
from dmlbench.metrics.selection import validation_spec
from dmlbench.options import RunOptions, SearchOptions
from dmlbench.protocol import MetricsSpec, Protocol
from dmlbench.search.storage import claim_lock, open_storage, quiet_optuna
from dmlbench.search.study import (
    count_trials,
    make_pruner,
    next_slot,
    proposal_sampler,
    reap_local_dead,
    study_name,
)
from dmlbench.search.validation import objective_metric, validation_folds

if TYPE_CHECKING:
    import optuna
    from torch import nn

log = logging.getLogger(__name__)


def run_worker(
    protocol: Protocol,
    method: str,
    train_split: Split,
    fingerprint: str,
    run_options: RunOptions,
    search_options: SearchOptions,
    url: str,
    tracker: Tracker | None = None,
    index: int = 0,
) -> int:
    """Claim and run trials until the study's budget is finished; returns how many ran here.
    ``index``: which of the protocol's ``search.studies`` studies.

    A worker with nothing left to claim waits while other workers' trials are running: if one
    of them dies, its trial is re-queued and this worker takes it over. Each trial's
    hyper-parameters and per-epoch curve go to ``tracker`` (default: the command's).
    """
    import optuna

    quiet_optuna()
    storage = open_storage(url, search_options)
    name = study_name(protocol, method, run_options.overrides, index)
    budget = protocol.search.trials
    study = optuna.load_study(
        study_name=name,
        storage=storage,
        sampler=proposal_sampler(protocol, 0, index),
        pruner=make_pruner(protocol),
    )
    ran, clock = 0, _StudyClock(budget, count_trials(study).finished)
    tracker = tracker or current()
    while True:
        with claim_lock(storage, url, name):
            optuna.storages.fail_stale_trials(study)
            reap_local_dead(study)
            counts = count_trials(study)
            if counts.finished >= budget:
                return ran
            trial = None
            if counts.waiting or counts.finished + counts.active < budget:
                slot = next_slot(study.get_trials(deepcopy=False))
                study.sampler = proposal_sampler(protocol, slot, index)
                trial = study.ask()
                trial.set_user_attr("slot", slot)
                trial.set_user_attr("host", socket.gethostname())
                trial.set_user_attr("pid", os.getpid())
                storage.record_heartbeat(trial._trial_id)
        if trial is None:
            time.sleep(min(search_options.heartbeat, 2))
            continue
        with _heartbeat(storage, trial._trial_id, search_options.heartbeat):
            line = _run_trial(
                study, trial, protocol, method, train_split, fingerprint, run_options, tracker,
                index,
            )  # fmt: skip
        ran += 1
        # one line per trial, with or without progress bars (the count is the study's: other
        # workers' trials included, so the ETA is the study's, not this worker's)
        which = f"study {index} trial" if protocol.search.studies > 1 else "trial"
        progress.line(
            f"  {method} {which} {_slot(trial)} {clock.tick(count_trials(study).finished)}: {line}"
        )


@dataclass
class _StudyClock:
    """Elapsed time and ETA of a study, from the trials finished (by any worker) since this
    worker joined it: a resumed study or a second worker does not skew the rate."""

    budget: int
    finished_at_start: int
    start: float = field(default_factory=time.perf_counter)

    def tick(self, finished: int) -> str:
        elapsed = time.perf_counter() - self.start
        done = finished - self.finished_at_start
        left = progress.eta(elapsed, done, self.budget - self.finished_at_start)
        return (
            f"({min(finished, self.budget)}/{self.budget}; {progress.clock(elapsed)} elapsed, "
            f"ETA {progress.clock(left)})"
        )


@contextmanager
def _heartbeat(storage: Any, trial_id: int, interval: int) -> Iterator[None]:
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(interval):
            try:
                storage.record_heartbeat(trial_id)
            except Exception as err:  # a lost heartbeat only risks a spurious retry
                log.warning("heartbeat of trial id %d failed: %s", trial_id, err)

    thread = threading.Thread(target=beat, daemon=True, name="dmlbench-heartbeat")
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


class ExactBatchTrial:
    """A trial whose ``samples_per_class`` choices are the divisors of the protocol's batch size.

    Every method trains on the protocol's exact batch (:meth:`Method.check_batch`), so a
    search space's choice that cannot fill it (8 per class in a batch of 60) is dropped before
    sampling rather than failing its trial. The choices depend on the protocol only, so they
    are the same for every trial of a study, as Optuna requires. A protocol that fixes
    ``batch.samples_per_class`` leaves nothing to choose: the trial answers with its value and
    the study gets no such dimension (a dead one would spend the sampler's draws on a choice
    that never trains, and the record would name a value its batches did not have).

    Attributes:
        batch_samples_per_class: the protocol's ``batch.samples_per_class`` (``None`` when each
            method chooses), for a search space whose choices depend on it (prototypical's
            shots must be fewer than the images per class).
    """

    def __init__(
        self, trial: optuna.Trial, batch_size: int, samples_per_class: int | None = None
    ) -> None:
        self._trial, self._batch_size = trial, batch_size
        self.batch_samples_per_class = samples_per_class

    def __getattr__(self, name: str) -> Any:
        return getattr(self._trial, name)

    def suggest_categorical(self, name: str, choices: Sequence[Any]) -> Any:
        if name == "samples_per_class":
            if self.batch_samples_per_class is not None:
                return self.batch_samples_per_class
            choices = [c for c in choices if self._batch_size % int(c) == 0] or list(choices)
        return self._trial.suggest_categorical(name, choices)


def _run_trial(
    study: optuna.Study,
    trial: optuna.Trial,
    protocol: Protocol,
    method: str,
    train_split: Split,
    fingerprint: str,
    run_options: RunOptions,
    tracker: Tracker,
    index: int = 0,
) -> str:
    """Train on every fold, report per-epoch validation scores, tell the study, write a record.

    The tracker gets the trial's per-epoch loss and validation scores (at the pruner's steps)
    and, at its end, its hyper-parameters with its value. Returns a one-line summary for the
    progress output.
    """
    import optuna
    from optuna.trial import TrialState

    start = time.perf_counter()
    metric = objective_metric(protocol, train_split.label_kind)
    v = protocol.search.validation  # a split too small to carve folds from stops the search
    folds = validation_folds(train_split, v.folds, v.fraction, protocol.seeds[0])
    hparams = METHODS.get(method).search_space(
        ExactBatchTrial(trial, protocol.batch.size, protocol.batch.samples_per_class)
    )
    trial.set_user_attr("hparams", hparams)
    log_ = _TrialLog()
    path = _trial_path(protocol, method, _slot(trial), run_options, index)
    log_.track = tracker.open_run(f"{protocol.name}/{protocol.hash[:12]}/{path.stem}")
    state, value, reason = TrialState.COMPLETE, math.nan, ""
    try:
        value = _train_folds(
            trial, protocol, method, train_split, folds, hparams, metric, run_options, log_
        )
        study.tell(trial, value)
    except optuna.TrialPruned:
        state = TrialState.PRUNED
        value = log_.scores[-1][-1] if log_.scores and log_.scores[-1] else math.nan
        study.tell(trial, state=TrialState.PRUNED)
    except NonFiniteLossError as err:
        state, reason = TrialState.FAIL, str(err)
        trial.set_user_attr("fail_reason", reason)
        study.tell(trial, state=TrialState.FAIL)
        log.warning("trial %d of %s failed: %s; the study goes on", trial.number, method, err)
    except (TrainingInterrupted, KeyboardInterrupt):
        state = TrialState.FAIL  # for the tracker; the trial is re-queued
        trial.set_user_attr("interrupted", True)
        study.tell(trial, state=TrialState.FAIL)
        study.enqueue_trial(trial.params, user_attrs={"retry_of": trial.number})
        raise
    except DmlbenchError as err:  # a setting that cannot run (a batch needs more classes
        # than a fold has, a plugin's loss returns no number): the reason, one line; a bug
        # below keeps its traceback in the log
        state, reason = TrialState.FAIL, f"{type(err).__name__}: {err}"
        trial.set_user_attr("fail_reason", reason)
        study.tell(trial, state=TrialState.FAIL)
        log.warning("trial %d of %s failed: %s; the study goes on", trial.number, method, reason)
    except Exception as err:  # out of memory at a sampled size, a bug: that trial fails with
        # its reason, the study goes on
        state, reason = TrialState.FAIL, f"{type(err).__name__}: {err}"
        trial.set_user_attr("fail_reason", reason)
        study.tell(trial, state=TrialState.FAIL)
        log.exception("trial %d of %s failed; the study goes on", trial.number, method)
    finally:
        _close_track(log_.track, hparams, state.name.lower(), metric, value)
    _write_trial_record(
        protocol, method, trial, hparams, fingerprint, run_options, metric, value, log_.curve,
        {"state": state.name.lower(), "study": study.study_name, "reason": reason,
         **({"study_index": index} if protocol.search.studies > 1 else {})},
        log_.steps, log_.train_seconds, time.perf_counter() - start,
    )  # fmt: skip
    if state == TrialState.FAIL:
        return f"failed: {reason}"
    return f"{metric} {value:.4f}" + (" (pruned)" if state == TrialState.PRUNED else "")


@dataclass
class _TrialLog:
    """What a trial has done so far; kept when it is pruned or fails, for its record."""

    curve: list[dict[str, float]] = field(default_factory=list)
    scores: list[list[float]] = field(default_factory=list)  # per fold, per epoch
    steps: int = 0
    train_seconds: float = 0.0
    track: RunLog | None = None


def _close_track(
    track: RunLog | None, hparams: HParams, state: str, metric: str, value: float
) -> None:
    """The trial's hyper-parameters and value, then the tracked run is closed (even when the
    trial was interrupted: what it logged stays readable)."""
    if track is None:
        return
    try:
        track.hparams({**hparams, "state": state}, {f"trial/val_{metric}": value})
    finally:
        track.close()


def _train_folds(
    trial: optuna.Trial,
    protocol: Protocol,
    method: str,
    train_split: Split,
    folds: list[tuple[np.ndarray, np.ndarray]],
    hparams: HParams,
    metric: str,
    run_options: RunOptions,
    log_: _TrialLog,
) -> float:
    """Train on each validation fold's rest, score the fold after every epoch (pruning may
    stop it), and return the best epoch's mean score over the folds (recorded as best_epoch)."""
    import optuna

    from dmlbench.engine.train import resolve_device, train

    seed = protocol.seeds[0]
    spec = validation_spec(protocol.metrics, metric)  # only the selection metric
    device = resolve_device(run_options.device)
    for f, (tr_idx, va_idx) in enumerate(folds):
        tr, va = train_split.subset(tr_idx), train_split.subset(va_idx)
        fold_scores: list[float] = []
        log_.scores.append(fold_scores)

        def hook(epoch: int, model: nn.Module, f: int = f, va: Split = va) -> dict[str, float]:
            score = _score(model, va, spec, metric, device, seed)
            log_.scores[f].append(score)
            log_.curve.append({"fold": float(f), "epoch": float(epoch), f"val_{metric}": score})
            trial.report(score, f * protocol.optim.epochs + epoch)
            if trial.should_prune():
                raise optuna.TrialPruned(f"pruned after fold {f} epoch {epoch}")
            return {f"val_{metric}": score}

        result = train(
            protocol,
            method_for(protocol, method, hparams, tr.num_classes),
            tr,
            seed,
            device=device,
            max_steps=run_options.max_steps,
            on_epoch_end=hook,
            progress=run_options.progress,
            accel=run_options.accel,
            track=Shifted(log_.track, f * protocol.optim.epochs) if log_.track else None,
            label=f"{method} trial {_slot(trial)} fold {f + 1}/{len(folds)}",
        )
        log_.steps += result.steps
        log_.train_seconds += result.train_seconds
        if not fold_scores:  # --max-steps ended training inside the first epoch
            fold_scores.append(_score(result.model, va, spec, metric, device, seed))
            log_.curve.append({"fold": float(f), "epoch": 0.0, f"val_{metric}": fold_scores[0]})
            if log_.track is not None:
                log_.track.scalars({f"val_{metric}": fold_scores[0]}, f * protocol.optim.epochs)
    n = min(len(s) for s in log_.scores)
    mean_curve = np.mean([s[:n] for s in log_.scores], axis=0)
    best_epoch = int(np.argmax(mean_curve))
    trial.set_user_attr("best_epoch", best_epoch)
    return float(mean_curve[best_epoch])


def _score(
    model: nn.Module, split: Split, spec: MetricsSpec, metric: str, device: Any, seed: int
) -> float:
    from dmlbench.engine.evaluation import evaluate_model

    return float(evaluate_model(spec, model, split, device, seed).get(metric, 0.0))


def _write_trial_record(
    protocol: Protocol,
    method: str,
    trial: optuna.Trial,
    hparams: dict[str, Any],
    fingerprint: str,
    run_options: RunOptions,
    metric: str,
    value: float,
    curve: list[dict[str, float]],
    search: dict[str, Any],
    steps: int,
    train_seconds: float,
    wall_seconds: float,
) -> None:
    from dmlbench.engine.train import resolve_device
    from dmlbench.records import Timings, new_record, save_record

    record = new_record(
        protocol,
        device=run_options.device,
        precision=run_options.accel.precision(resolve_device(run_options.device)),
        data_fingerprint=fingerprint,
        method=method,
        hparams=hparams,
        seed=protocol.seeds[0],
        stage="search-trial",
        trial=_slot(trial),
        metrics={} if math.isnan(value) else {f"val_{metric}": value},
        curve=curve,
        overrides=run_options.overrides,
        search=search,
        timings=Timings(wall_seconds=wall_seconds, train_seconds=train_seconds, steps=steps),
    )
    index = int(search.get("study_index", 0))
    save_record(record, _trial_path(protocol, method, _slot(trial), run_options, index))


def _slot(trial: Any) -> int:
    """The trial's slot (set when it was claimed): what its record and progress call it."""
    return int(trial.user_attrs["slot"])


def _trial_path(
    protocol: Protocol, method: str, number: int, run_options: RunOptions, index: int = 0
) -> Any:
    """The trial's record file (its stem also names the trial's run in the tracker)."""
    from dmlbench.records import record_path

    return record_path(
        run_options.results_dir, protocol.name, protocol.hash, method, protocol.seeds[0],
        "search-trial", run_options.overrides, trial=number, study=index,
    )  # fmt: skip
