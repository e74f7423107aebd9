"""Run methods under a protocol: tune, train on the training classes, evaluate on the test classes.

When the protocol has a tuning budget (``search.trials > 0``), each method is first tuned by
:func:`dmlbench.search.tune` on validation classes carved out of the training classes; the
selected hyper-parameters and epoch count are then retrained on all training classes for every
seed. With ``search.studies: T`` each method is searched T times independently (same budget,
its own sampler seeds) and the seeds are shared out to the studies by position, round robin
(:meth:`~dmlbench.protocol.Protocol.study_of`): each seed's final run trains with its own
study's selection, and only the studies the run's seeds need are searched. A method given
fixed hyper-parameters (``--hparam``) is not tuned and its records are marked as overridden,
so they never share a table with tuned ones.

Every seed also gets an ``untrained`` row: the randomly initialised network, evaluated the same
way. It is the floor every trained method must clear, and a bug detector (a method that does
not beat it did not learn).

A record already on disk for the same (protocol hash, method, seed) is reused, so an
interrupted ``dmlbench run`` continues where it stopped; ``force=True`` recomputes.

A final run keeps its trained weights and the test embeddings its metrics were computed from
(:mod:`dmlbench.engine.artifacts`), named with their SHA-256 in the record, so its numbers can
be re-checked and its network reused without retraining; ``keep=False`` (``--no-keep``) skips
them.
"""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from dmlbench.data import DATASETS, DataSplits, load_data
from dmlbench.engine import distributed
from dmlbench.engine.artifacts import ModelCard, keep_artifacts
from dmlbench.engine.evaluation import evaluate
from dmlbench.engine.external import kept_file_arrays
from dmlbench.engine.progress import RunTally
from dmlbench.engine.progress import line as progress_line
from dmlbench.engine.train import baseline_model, embed, image_channels, resolve_device, train
from dmlbench.errors import DmlbenchError
from dmlbench.methods import METHODS, HParams, Method, method_for
from dmlbench.metrics.retrieval import check_ks
from dmlbench.options import RunOptions, Selection, torch_threads
from dmlbench.protocol import Protocol
from dmlbench.records import (
    Artifact,
    DamagedRecord,
    Record,
    Timings,
    baselines_for,
    folder_problem,
    is_baseline,
    load_record,
    new_record,
    record_lock,
    record_path,
    save_record,
)

log = logging.getLogger(__name__)


def run_protocol(
    protocol: Protocol, methods: list[str], seeds: list[int], run_options: RunOptions | None = None
) -> list[Record]:
    """Train and evaluate each method for each seed, plus the rows that need no learning."""
    run_options = run_options or RunOptions()
    with torch_threads(run_options.threads):
        return _run_protocol(protocol, methods, seeds, run_options)


def _run_protocol(
    protocol: Protocol, methods: list[str], seeds: list[int], run_options: RunOptions
) -> list[Record]:
    _check_methods(protocol, methods, run_options)
    unwritable = folder_problem(run_options.results_dir, "--results-dir")  # a file fails here
    data = load_data(
        protocol, run_options.data_root, check_test=lambda test: check_ks(protocol.metrics, test)
    )
    check_ks(protocol.metrics, data.test)  # fail before hours of training, not after
    overrides = dict(run_options.overrides)
    if run_options.max_steps is not None:
        overrides["max_steps"] = run_options.max_steps
    studies = sorted({protocol.study_of(seed) for seed in seeds})
    selections: dict[str, dict[int, Selection]] = {}
    for name in methods:  # tune first: every seed of a study uses its study's selection
        given = run_options.selections.get(name)  # dmlbench check: the record's own
        selections[name] = dict.fromkeys(studies, given) if given is not None else {}
        if given is None and protocol.search.trials > 0 and name not in run_options.hparams:
            if unwritable:
                raise DmlbenchError(f"{unwritable}; the search of {name} keeps its study there")
            tuning = replace(run_options, overrides=overrides)  # a smoke run gets its own study
            for index in studies:  # an interrupted run resumes the unfinished study
                selections[name][index] = _tune(protocol, name, data, tuning, index)
    rows = [*baselines_for(protocol), *methods]
    tally = RunTally(rows, seeds)
    records, skipped = [], []
    for seed in seeds:
        for name in rows:
            chosen = selections.get(name, {}).get(protocol.study_of(seed))
            record = _final_run(protocol, name, seed, data, run_options, overrides, chosen)
            tally.finished(record)
            if record is None:
                skipped.append((seed, name))
            else:
                records.append(record)
    for seed, name in skipped:  # the table at the end holds them too: wait for the other process
        chosen = selections.get(name, {}).get(protocol.study_of(seed))
        record = _final_run(protocol, name, seed, data, run_options, overrides, chosen, wait=True)
        tally.finished(record)
        if record is not None:
            records.append(record)
    return records


def _check_methods(protocol: Protocol, methods: list[str], run_options: RunOptions) -> None:
    """Unknown names, wrong label kinds, unfillable batches: one line before any work."""
    kind = DATASETS.get(protocol.data.dataset).label_kind
    for name in methods:
        cls = METHODS.get(name)
        if cls.label_kind != kind:
            others = [m for m in protocol.methods if METHODS.get(m).label_kind == kind]
            raise DmlbenchError(
                f"method {name} needs {cls.label_kind} labels; protocol {protocol.name} has "
                f"{kind} labels (its methods: {', '.join(others) or 'none listed'})"
            )
        cls.check_batch(
            protocol.batch.size, protocol.batch.samples_per_class, run_options.hparams.get(name)
        )


def _tune(
    protocol: Protocol, name: str, data: DataSplits, run_options: RunOptions, index: int = 0
) -> Selection:
    """The method's equal-budget search (study ``index``), after one batch has shown the setup
    fits in memory."""
    from dmlbench.engine.preflight import check_one_batch
    from dmlbench.search import tune

    check_one_batch(protocol, name, data.train, resolve_device(run_options.device))
    studies = protocol.search.studies
    which = f" (study {index} of {studies})" if studies > 1 else ""
    progress_line(f"searching {name}: {protocol.search.trials} trials{which}")
    return tune(protocol, name, data.train, data.fingerprint, run_options, index)


def _final_run(
    protocol: Protocol,
    name: str,
    seed: int,
    data: DataSplits,
    run_options: RunOptions,
    overrides: dict[str, Any],
    selection: Selection | None,
    wait: bool = False,
) -> Record | None:
    """The final record of (``name``, ``seed``) trained with ``selection`` (its study's; None:
    defaults or hand-set values): reused from disk, or trained and written.

    ``None`` when another process is computing it (unless ``wait``: then this blocks until that
    process is done, and reuses its record — or computes it, if that process died first).
    """
    run_overrides = dict(overrides)
    if name in run_options.hparams:  # hand-set values: never next to tuned ones
        run_overrides["hparams"] = run_options.hparams[name]
    path = record_path(
        run_options.results_dir, protocol.name, protocol.hash, name, seed, "final", run_overrides
    )
    is_main = distributed.current().is_main
    if wait:
        log.warning("waiting for %s, being computed by another process", path.name)
    with record_lock(path, enabled=is_main, wait=wait) as owned:
        if not owned:
            log.warning("%s is being computed by another process; skipped", path.name)
            return None
        record = _reusable(path, run_overrides, data.fingerprint, run_options.force, selection)
        unwritable = (
            record is None and is_main and folder_problem(run_options.results_dir, "--results-dir")
        )
        if unwritable:
            raise DmlbenchError(f"{unwritable}; {path.name} must be computed")
        if record is None:
            ckpt = path.parent / "checkpoints" / path.with_suffix(".pt").name
            keep_as = path if run_options.keep and is_main else None
            record = run_one(
                protocol, name, seed, data, run_options, run_overrides, ckpt, selection, keep_as
            )
            if is_main:  # under torchrun every rank trains, rank 0 writes
                save_record(record, path)
                ckpt.unlink(missing_ok=True)
        return record


def _reusable(
    path: Path,
    overrides: dict[str, Any],
    fingerprint: str,
    force: bool,
    selection: Selection | None = None,
) -> Record | None:
    """The record at ``path`` if it was made under the same conditions (resume): same
    overrides, data and, for a tuned method, the same selected trial and hyper-parameters."""
    if force or not path.is_file():
        return None
    try:
        record = load_record(path)
    except Exception as err:  # a damaged file is recomputed, not fatal
        why = str(err) if isinstance(err, DamagedRecord) else type(err).__name__
        log.warning("%s is damaged (%s); recomputing", path, why)
        return None
    wanted = selection.as_record() if selection is not None else {}
    same_selection = {k: record.search.get(k) for k in ("study", "trial", "hparams")} == {
        k: wanted.get(k) for k in ("study", "trial", "hparams")
    }
    if record.overrides == overrides and record.data_fingerprint == fingerprint and same_selection:
        progress_line(f"reusing {path}: finished earlier")
        return record
    return None


def run_one(
    protocol: Protocol,
    method_name: str,
    seed: int,
    data: DataSplits,
    run_options: RunOptions,
    overrides: dict[str, Any],
    checkpoint: Path | None = None,
    selection: Selection | None = None,
    keep_as: Path | None = None,
) -> Record:
    """One (method, seed): train on ``data.train`` (unless a baseline), evaluate on ``data.test``.

    With a ``selection`` from a search, its hyper-parameters are used and training stops after
    the epoch that scored best on validation. With ``keep_as`` (the path the record will be
    saved at), the trained weights and the very embeddings the metrics were computed from are
    kept next to it and named in the record's ``artifacts``.
    """
    device = resolve_device(run_options.device)
    start = time.perf_counter()
    hparams: HParams = {}
    curve: list[dict[str, float]] = []
    steps, train_s, ips = 0, 0.0, 0.0
    method: Method | None = None
    if is_baseline(method_name):
        model = baseline_model(protocol, method_name, image_channels(data.train), seed)
        model = model.to(device)
    else:
        chosen = selection.hparams if selection else run_options.hparams.get(method_name)
        method = method_for(protocol, method_name, chosen, data.train.num_classes)
        hparams = dict(method.hparams)
        result = train(
            protocol,
            method,
            data.train,
            seed,
            device=device,
            max_steps=run_options.max_steps,
            epochs=selection.epochs if selection else None,
            progress=run_options.progress,
            checkpoint=checkpoint,
            accel=run_options.accel,
        )
        model, curve = result.model, result.curve
        steps, train_s, ips = result.steps, result.train_seconds, result.images_per_second
    eval_start = time.perf_counter()
    embeddings = embed(model, data.test, device)
    metrics, query_hits = evaluate(protocol.metrics, embeddings, data.test, seed, query_hits=True)
    now = time.perf_counter()
    artifacts: dict[str, Artifact] = {}
    if keep_as is not None:  # a baseline is its seed's initialisation or the trunk: no weights
        card = _model_card(protocol, method_name, hparams, seed, data)
        trained = None if method is None else model
        extra = kept_file_arrays(protocol, data, method_name, seed)  # dmlbench evaluate reads it
        artifacts = keep_artifacts(keep_as, card, embeddings, data.test, trained, extra)
    return new_record(
        protocol,
        device=str(device),
        precision=run_options.accel.precision(device),
        data_fingerprint=data.fingerprint,
        method=method_name,
        hparams=hparams,
        seed=seed,
        metrics=metrics,
        curve=curve,
        overrides=overrides,
        search=selection.as_record() if selection else {},
        timings=Timings(
            wall_seconds=now - start,
            train_seconds=train_s,
            eval_seconds=now - eval_start,
            images_per_second=ips,
            steps=steps,
        ),
        artifacts=artifacts,
        per_query=query_hits,
    )


def _model_card(
    protocol: Protocol, method: str, hparams: HParams, seed: int, data: DataSplits
) -> ModelCard:
    """What rebuilds this run's network later, without its data (``dmlbench.load_model``)."""
    return ModelCard(
        protocol=protocol.model_dump(mode="json"),
        method=method,
        hparams=dict(hparams),
        seed=seed,
        num_classes=data.train.num_classes,
        input_shape=[int(n) for n in data.test.images[0].shape],
    )


# --------------------------------------------------------------------------- sweeps
# ``dmlbench sweep`` runs a protocol over several values of one key: each value makes a derived
# protocol ``<protocol>@<key>=<value>`` (``Protocol.with_overrides``) with its own hash, so a
# sweep point's numbers never mix with the base protocol's (Kim et al. 2019, Fig. 5).


def parse_over(text: str) -> tuple[str, list[tuple[str, Any]]]:
    """``"model.embedding_size=16,32"`` → (key, [("16", 16), ("32", 32)]): text and value."""
    from dmlbench.report.plots import parse_value

    key, eq, rest = text.partition("=")
    tokens = [t.strip() for t in rest.split(",") if t.strip()]
    if not eq or not key.strip() or not tokens:
        raise DmlbenchError(f"--over {text!r}: expected KEY=VALUE1,VALUE2,...")
    if len(set(tokens)) != len(tokens):
        raise DmlbenchError(f"--over {text!r}: a value is repeated")
    return key.strip(), [(t, parse_value(t)) for t in tokens]


def sweep_protocols(protocol: Protocol, key: str, values: list[tuple[str, Any]]) -> list[Protocol]:
    """The derived protocols, validated (an unknown key or a bad value fails before any run)."""
    from dmlbench.report.plots import sweep_name

    return [
        protocol.with_overrides({key: value}, name=sweep_name(protocol.name, key, token))
        for token, value in values
    ]


def run_sweep(
    protocol: Protocol,
    key: str,
    values: list[tuple[str, Any]],
    methods: list[str],
    seeds: list[int],
    run_options: RunOptions,
) -> list[Any]:
    """Run every derived protocol (:func:`run_protocol` resumes) and return the records."""
    records = []
    for derived in sweep_protocols(protocol, key, values):
        print(f"sweep: {derived.name} ({derived.short_hash})", file=sys.stderr)
        records += run_protocol(derived, methods, seeds, run_options)
    return records
