"""Tune one method: run (or continue) its study to the budget, in this process and in spawned
workers, and return the selected trial.

The budget rules are :mod:`dmlbench.search.study`'s. This sits above the study, the worker and
the process spawner (each of which imports only the modules below it), so that no module of
the search imports one that imports it back.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from dmlbench.data.base import Split
from dmlbench.options import RunOptions, Selection, torch_threads
from dmlbench.protocol import Protocol
from dmlbench.search.processes import spawn_workers
from dmlbench.search.storage import (
    SearchError,
    open_storage,
    quiet_optuna,
    storage_errors,
    storage_url,
)
from dmlbench.search.study import count_trials, open_study, selection, study_name
from dmlbench.search.validation import objective_metric
from dmlbench.search.worker import run_worker

log = logging.getLogger(__name__)


def tune(
    protocol: Protocol,
    method: str,
    train_split: Split,
    fingerprint: str,
    run_options: RunOptions,
    study_index: int = 0,
) -> Selection:
    """Run (or continue) ``method``'s study ``study_index`` (of the protocol's
    ``search.studies``, each its own sampler seeds and the same budget) to its budget and
    return its best selection.

    ``run_options.search.workers - 1`` extra worker processes on this machine join the study; other
    machines may join through the same storage URL with ``dmlbench search``.
    """
    import torch

    quiet_optuna()
    search_options = run_options.search
    url = storage_url(search_options, run_options.results_dir)
    name = study_name(protocol, method, run_options.overrides, study_index)
    with storage_errors(url):
        storage = open_storage(url, search_options)
        study = open_study(protocol, method, storage, name, url, study_index)
        finished = count_trials(study).finished
    metric = objective_metric(protocol, train_split.label_kind)
    studies = protocol.search.studies
    if finished >= protocol.search.trials:  # resumed: nothing left
        return selection(study, metric, study_index, studies)
    from dmlbench.engine.distributed import current

    if current().is_distributed:
        raise SearchError(
            f"study {name} is unfinished: tuning under torchrun is not supported (every rank "
            "would claim its own trial); run `dmlbench search` first (--workers N for N "
            "processes), then the same `torchrun … dmlbench run` uses the finished study"
        )
    # Every worker trains with the same thread count as this process, whatever --workers is:
    # the count moves numbers (seen: R@1 0.6781 vs 0.6859 under one protocol hash).
    run_options = replace(run_options, threads=run_options.threads or torch.get_num_threads())
    procs = spawn_workers(
        protocol, method, run_options, search_options, url, search_options.workers - 1,
        study_index,
    )  # fmt: skip
    try:
        with torch_threads(run_options.threads):
            run_worker(
                protocol, method, train_split, fingerprint, run_options, search_options, url,
                None, study_index,
            )  # fmt: skip
    finally:
        for p in procs:
            p.join()
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
    return selection(study, metric, study_index, studies)
