"""The search's extra processes: --workers N on this machine, one per GPU where there are several.

:mod:`dmlbench.search.worker` runs trials (claim, train, score, write); this module only
starts processes that run it. A spawned process starts with nothing configured, so it is handed
this one's logging, tracker, thread count and plugins, and re-validates the protocol it is
given as plain data (no torch or registry state crosses the process boundary).
"""

from __future__ import annotations

import multiprocessing as mp
import sys
from dataclasses import replace
from typing import Any

from dmlbench.engine import progress
from dmlbench.engine.checkpoint import TrainingInterrupted
from dmlbench.engine.tracking import activated, current, open_tracker
from dmlbench.options import RunOptions, SearchOptions, torch_threads
from dmlbench.protocol import Protocol
from dmlbench.search.worker import run_worker


def spawn_workers(
    protocol: Protocol,
    method: str,
    run_options: RunOptions,
    search_options: SearchOptions,
    url: str,
    n: int,
    study: int = 0,
) -> list[Any]:
    """Start ``n`` extra worker processes on this machine (spawned: no forked torch state),
    for study ``study`` of the protocol's ``search.studies``."""
    ctx = mp.get_context("spawn")
    procs = []
    # A spawned process starts with nothing configured: it repeats this one's logging and
    # opens its own writer to the same tracker (TensorBoard event files are per process).
    setup = (progress.current_setup(), current().spec)
    for index in range(1, n + 1):
        p = ctx.Process(
            target=_child,
            args=(
                protocol.model_dump(mode="json"),
                method,
                run_options,
                search_options,
                url,
                index,
                setup,
                study,
            ),
            name=f"dmlbench-search-{index}",
        )
        p.start()
        procs.append(p)
    return procs


def worker_device(device: str, index: int, gpus: int) -> str:
    """The device of search worker ``index`` (0 is the parent): with several GPUs and
    ``--device auto`` or ``cuda``, worker i trains on GPU ``i mod gpus``, so ``--workers N``
    on an N-GPU machine puts one worker on each GPU instead of N on the first. An explicit
    ``cuda:K`` or ``cpu`` is kept."""
    if device in ("auto", "cuda") and gpus > 1:
        return f"cuda:{index % gpus}"
    return device


def _child(
    raw: dict[str, Any],
    method: str,
    run_options: RunOptions,
    search_options: SearchOptions,
    url: str,
    index: int,
    setup: tuple[progress.LogSetup | None, str | None] = (None, None),
    study: int = 0,
) -> None:
    import torch

    from dmlbench.data import load_data
    from dmlbench.methods import load_plugins
    from dmlbench.protocol import validate_protocol

    run_options = replace(
        run_options, device=worker_device(run_options.device, index, torch.cuda.device_count())
    )
    log_setup, track_spec = setup
    if log_setup is not None:
        progress.configure_logging(log_setup.level, log_setup.log_file)
    try:
        load_plugins(search_options.plugins)
        protocol = validate_protocol(raw, source=f"search worker {index}")
        data = load_data(protocol, run_options.data_root)
        # the parent's thread count, so --workers moves no number
        with torch_threads(run_options.threads), activated(open_tracker(track_spec)) as tracker:
            run_worker(
                protocol, method, data.train, data.fingerprint,
                replace(run_options, progress=False), search_options, url, tracker, study,
            )  # fmt: skip
    except (TrainingInterrupted, KeyboardInterrupt):
        sys.exit(130)
