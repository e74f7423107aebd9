"""Equal-budget search: validation carving, defaults first, budget, no test image, interruptions.

NaN/Inf trials are tested in tests/reliability/test_numerical.py.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import optuna
import pytest
import torch

from dmlbench.data.base import ArrayImages, DataSplits, Split
from dmlbench.methods import METHODS
from dmlbench.options import RunOptions, SearchOptions
from dmlbench.protocol import load_protocol
from dmlbench.records import load_records
from dmlbench.run import run_protocol
from dmlbench.search.study import count_trials, open_study, selection, study_name
from dmlbench.search.tuning import tune
from dmlbench.search.validation import objective_metric, validation_folds

optuna.logging.set_verbosity(optuna.logging.WARNING)


def tiny(trials: int = 3, **extra: Any) -> Any:
    """60 glyph classes (30 train: 22 fit + 8 validation), 2 epochs: seconds per trial."""
    return load_protocol("glyphs-mini").with_overrides(
        {
            "data.params.num_classes": 60,
            "optim.epochs": 2,
            "batch.size": 40,  # every listed method divides it (exact batches)
            "search.trials": trials,
            "search.studies": 1,  # one search (tests/search/test_studies.py: several)
            "seeds": [0],
            **extra,
        },
        name="glyphs-search-test",
    )


def _split(labels: np.ndarray, kind: str = "class", **extras: Any) -> Split:
    images = ArrayImages(np.zeros((len(labels), 1, 2, 2), dtype=np.uint8))
    return Split(images, labels, label_kind=kind, extras=dict(extras))


# --------------------------------------------------------------------------- validation


def test_single_holdout_is_class_disjoint_and_sized_by_fraction() -> None:
    split = _split(np.repeat(np.arange(40), 3))
    [(tr, va)] = validation_folds(split, folds=1, fraction=0.25, seed=0)
    assert set(split.labels[tr]).isdisjoint(split.labels[va])
    assert len(np.unique(split.labels[va])) == 10
    assert sorted(np.concatenate([tr, va])) == list(range(120))


def test_k_folds_partition_the_classes() -> None:
    split = _split(np.repeat(np.arange(12), 2))
    folds = validation_folds(split, folds=4, fraction=0.25, seed=1)
    held = [set(split.labels[va]) for _, va in folds]
    assert len(folds) == 4 and all(len(h) == 3 for h in held)
    assert set().union(*held) == set(range(12))
    for tr, va in folds:
        assert set(split.labels[tr]).isdisjoint(split.labels[va])


def test_folds_depend_on_the_seed_only() -> None:
    split = _split(np.repeat(np.arange(20), 2))
    a = validation_folds(split, 1, 0.3, seed=3)[0][1]
    b = validation_folds(split, 1, 0.3, seed=3)[0][1]
    c = validation_folds(split, 1, 0.3, seed=4)[0][1]
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_continuous_labels_hold_out_whole_groups_and_keep_extras() -> None:
    groups = np.repeat(np.arange(10), 4)
    split = _split(np.random.default_rng(0).normal(size=(40, 3)), "continuous",
                   groups=groups, label_distance="pose")  # fmt: skip
    [(tr, va)] = validation_folds(split, 1, 0.2, seed=0)
    assert set(groups[tr]).isdisjoint(groups[va])
    sub = split.subset(va)
    assert sub.extras["label_distance"] == "pose"  # not a silent fallback to Euclidean
    assert np.array_equal(sub.extras["groups"], groups[va])


def test_too_few_classes_to_search_is_a_clear_error() -> None:
    with pytest.raises(Exception, match="too small to search"):
        validation_folds(_split(np.array([0, 0, 1, 1])), 1, 0.5, seed=0)


def test_objective_is_recall_at_first_k_or_largest_ndcg() -> None:
    assert objective_metric(load_protocol("glyphs-mini"), "class") == "recall@1"
    assert objective_metric(load_protocol("poses-mini"), "continuous") == "ndcg@10"


# --------------------------------------------------------------------------- the study


@pytest.mark.parametrize("method", METHODS.list())
def test_paper_defaults_are_the_first_trial(method: str) -> None:
    cls = METHODS.get(method)
    protocol = tiny()
    study = open_study(protocol, method, optuna.storages.InMemoryStorage(), "s")
    first = study.ask()
    hparams = cls.search_space(first)
    expected = {**cls.defaults, "samples_per_class": cls.samples_per_class}
    for key, value in hparams.items():
        assert value == pytest.approx(expected[key]), key
    assert first.user_attrs.get("defaults") is True


def _inside(dist: Any, value: Any) -> bool:
    if isinstance(dist, optuna.distributions.CategoricalDistribution):
        return value in dist.choices
    return bool(dist.low <= value <= dist.high)


@pytest.mark.parametrize("method", METHODS.list())
def test_paper_defaults_lie_inside_the_search_space(method: str) -> None:
    """A default outside its range is tried once (the enqueued first trial) but never
    proposed again near it: the search could not refine the paper's own choice."""
    study = open_study(tiny(), method, optuna.storages.InMemoryStorage(), "s")
    first = study.ask()
    METHODS.get(method).search_space(first)
    outside = [k for k, d in first.distributions.items() if not _inside(d, first.params[k])]
    assert not outside, f"{method}: defaults outside the search space: {outside}"


def test_study_names_separate_protocols_and_smoke_runs() -> None:
    a, b = tiny(3), tiny(4)
    assert study_name(a, "contrastive", {}) != study_name(b, "contrastive", {})
    assert study_name(a, "contrastive", {}) != study_name(a, "contrastive", {"max_steps": 2})


class _Tripwire(torch.utils.data.Dataset):
    """Counts every access to the test images."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.reads = inner, 0

    def __len__(self) -> int:
        return len(self.inner)

    def __getitem__(self, i: int) -> Any:
        self.reads += 1
        return self.inner[i]


def test_search_never_reads_a_test_image_and_finals_use_the_selection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dmlbench.run as runner
    import dmlbench.search as search  # run.py reads dmlbench.search.tune when it tunes

    protocol = tiny(trials=3)
    real_load, real_tune = runner.load_data, search.tune
    wire: list[_Tripwire] = []
    tuned: list[str] = []

    def load(p: Any, root: Any = None, **kwargs: Any) -> DataSplits:
        data = real_load(p, root, **kwargs)
        wire.append(_Tripwire(data.test.images))
        data.test.images = wire[0]
        return data

    def checked_tune(*args: Any, **kwargs: Any) -> Any:
        tuned.append(args[1])
        out = real_tune(*args, **kwargs)
        assert wire[0].reads == 0, "a search trial read a test image"
        return out

    monkeypatch.setattr(runner, "load_data", load)
    monkeypatch.setattr(search, "tune", checked_tune)
    records = run_protocol(
        protocol, ["contrastive"], [0], RunOptions(results_dir=tmp_path, progress=False)
    )
    assert tuned == ["contrastive"]  # the search ran under the tripwire
    assert wire[0].reads > 0  # the final evaluation does read them: the tripwire works
    final = next(r for r in records if r.method == "contrastive")
    trials = [r for r in load_records(tmp_path)[0] if r.stage == "search-trial"]
    assert sorted(r.trial for r in trials) == [0, 1, 2]
    assert final.search["trials"] == 3 and final.search["metric"] == "recall@1"
    best = max((r for r in trials if r.search["state"] == "complete"),
               key=lambda r: r.metrics["val_recall@1"])  # fmt: skip
    assert final.search["trial"] == best.trial
    assert final.hparams == {**METHODS.get("contrastive").defaults, **best.hparams}
    assert len(final.curve) == final.search["epochs"]  # trained to the best validation epoch


def interrupt_the_second_training(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Ctrl-C inside the second training of the process (the second trial's); returns the
    real ``train`` to put back."""
    import dmlbench.engine.train as train_module

    real_train, calls = train_module.train, []

    def flaky(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real_train(*args, **kwargs)

    monkeypatch.setattr(train_module, "train", flaky)
    return real_train


def test_an_interrupted_trial_is_requeued_and_the_study_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dmlbench.data import load_data

    protocol = tiny(trials=3)
    data = load_data(protocol)
    run = RunOptions(results_dir=tmp_path, progress=False)
    interrupt_the_second_training(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        tune(protocol, "contrastive", data.train, data.fingerprint, run)
    storage = f"sqlite:///{tmp_path}/optuna.db"
    name = study_name(protocol, "contrastive", {})
    study = optuna.load_study(study_name=name, storage=storage)
    assert [t.state.name for t in study.trials] == ["COMPLETE", "FAIL", "WAITING"]
    assert count_trials(study).finished == 1

    sel = tune(protocol, "contrastive", data.train, data.fingerprint, run)
    study = optuna.load_study(study_name=name, storage=storage)
    assert count_trials(study).finished == 3 and sel.trials == 3
    assert study.trials[2].params == study.trials[1].params  # the interrupted one, retried
    assert len(study.trials) == 4  # nothing ran twice, nothing was lost
    assert selection(study, "recall@1") == sel


def test_a_silent_worker_s_trial_is_failed_by_heartbeat_and_retried(tmp_path: Path) -> None:
    """A worker on another machine stops sending heartbeats: after the grace period (4
    heartbeats) the next worker fails its trial and re-queues the parameters."""
    from dmlbench.data import load_data
    from dmlbench.search.storage import open_storage, storage_url

    protocol = tiny(trials=2, **{"optim.epochs": 1})
    data = load_data(protocol)
    options = SearchOptions(heartbeat=1)
    url = storage_url(options, tmp_path)
    name = study_name(protocol, "contrastive", {})
    storage = open_storage(url, options)
    study = open_study(protocol, "contrastive", storage, name)
    ghost = study.ask()  # claimed elsewhere, then that machine went silent
    ghost.set_user_attr("host", "another-machine")
    storage.record_heartbeat(ghost._trial_id)
    time.sleep(5)
    run = RunOptions(results_dir=tmp_path, progress=False)
    tune(protocol, "contrastive", data.train, data.fingerprint, replace(run, search=options))
    study = optuna.load_study(study_name=name, storage=url)
    assert study.trials[0].state.name == "FAIL"
    retry = optuna.storages.RetryHeartbeatStaleTrialCallback.retry_history
    assert [t.number for t in study.trials if 0 in retry(t)] == [1]
    assert count_trials(study).finished == 2


def _after_a_second_worker(run_trial: Any, wait: float = 300.0) -> Any:
    """``_run_trial`` that, in this process only, first waits (up to ``wait`` s) until another
    process has claimed a trial: the spawned worker's start-up (import, data load) takes
    longer than the whole study on a fast machine, so without this the test is a race."""

    def wrapped(study: Any, *args: Any, **kwargs: Any) -> Any:
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and not any(
            t.user_attrs.get("pid") != os.getpid() for t in study.get_trials(deepcopy=False)
        ):
            time.sleep(0.2)
        return run_trial(study, *args, **kwargs)

    return wrapped


@pytest.mark.slow
def test_workers_on_one_machine_share_the_study(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--workers 2`: a spawned process joins the study over SQLite; the budget stays exact."""
    import dmlbench.search.worker as worker
    from dmlbench.data import load_data

    protocol = tiny(trials=6, **{"optim.epochs": 3, "search.pruner": "none"})
    data = load_data(protocol)
    run = RunOptions(results_dir=tmp_path, progress=False)
    monkeypatch.setattr(worker, "_run_trial", _after_a_second_worker(worker._run_trial))
    sel = tune(
        protocol,
        "contrastive",
        data.train,
        data.fingerprint,
        replace(run, search=SearchOptions(workers=2)),
    )
    study = optuna.load_study(study_name=sel.study, storage=f"sqlite:///{tmp_path}/optuna.db")
    assert len(study.trials) == 6 and count_trials(study).finished == 6
    assert len({t.user_attrs["pid"] for t in study.trials}) == 2
    assert sorted(r.trial for r in load_records(tmp_path)[0]) == list(range(6))
    # the claim lock (filelock) lives in .locks/, never beside the database or the records
    assert not list(tmp_path.glob("*.lock")) and list((tmp_path / ".locks").glob("optuna.db.*"))
    # seeded per trial: the two workers' start-up proposals are all distinct
    assert len({repr(sorted(t.params.items())) for t in study.trials}) == 6


def test_unfinished_study_under_torchrun_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dmlbench.engine.distributed as distributed
    from dmlbench.data import load_data
    from dmlbench.search.storage import SearchError

    protocol = tiny(trials=2)
    data = load_data(protocol)
    world = distributed.current()
    monkeypatch.setattr(distributed, "current", lambda: type(world)(rank=0, world_size=2))
    run = RunOptions(results_dir=tmp_path, progress=False)
    with pytest.raises(SearchError, match="tuning under torchrun is not supported"):
        tune(protocol, "contrastive", data.train, data.fingerprint, run)


def test_search_workers_spread_over_the_gpus() -> None:
    from dmlbench.search.processes import worker_device

    assert [worker_device("auto", i, 4) for i in range(6)] == [
        "cuda:0", "cuda:1", "cuda:2", "cuda:3", "cuda:0", "cuda:1",
    ]  # fmt: skip
    assert worker_device("cuda", 3, 2) == "cuda:1"
    assert worker_device("cuda:1", 3, 4) == "cuda:1"  # asked for: kept
    assert worker_device("auto", 2, 1) == "auto" and worker_device("cpu", 1, 4) == "cpu"


def test_workers_of_one_index_propose_distinct_trials(tmp_path: Path) -> None:
    """Two processes joining one study (the leaderboard's seeds of a tuned method do, each as
    worker 0) claim trials in turn while the other's trial still runs: each claim gets its own
    proposal, and one worker alone proposes the same start-up trials. Seeded by worker, the
    two drew identical start-up trials in lockstep (8-trial studies held 6 configurations)."""
    from dmlbench.search.study import proposal_sampler

    protocol = load_protocol("glyphs-mini")
    space = METHODS.get("contrastive").search_space

    def proposals(workers: int) -> list[dict[str, Any]]:
        url = f"sqlite:///{tmp_path / f'{workers}.db'}"
        optuna.create_study(study_name="s", storage=url, direction="maximize")
        studies = [optuna.load_study(study_name="s", storage=url) for _ in range(workers)]
        out = []
        for i in range(4):  # claims alternate between the workers; no trial finishes
            study = studies[i % workers]
            study.sampler = proposal_sampler(protocol, len(study.get_trials(deepcopy=False)))
            out.append(space(study.ask()))
        return out

    two = proposals(2)
    assert len({repr(sorted(p.items())) for p in two}) == 4
    assert two == proposals(1)


def _trial_records(results: Path) -> list[tuple[Any, ...]]:
    """What an uninterrupted search must reproduce: each trial's slot, setting and curve."""
    from dmlbench.records import load_records

    trials = [r for r in load_records(results)[0] if r.stage == "search-trial"]
    return sorted(
        (r.trial, json.dumps(r.hparams, sort_keys=True), r.metrics, r.curve, r.search["state"])
        for r in trials
    )


@pytest.mark.slow
@pytest.mark.parametrize("how", ["interrupted", "killed"])
def test_a_resumed_search_runs_exactly_the_uninterrupted_trials(
    how: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Trial 1 interrupted (Ctrl-C or SIGTERM: re-queued by its worker) or its worker killed
    (SIGKILL: failed and re-queued by the next worker on this host), then the search run
    again: every trial record equals an uninterrupted search's, slot for slot: the retried
    trial, the proposals after it (seeded by slot, not by trial number) and the selection."""
    import socket
    import subprocess
    import sys

    import dmlbench.engine.train as train_module
    from dmlbench.data import load_data
    from dmlbench.search.storage import open_storage, storage_url
    from dmlbench.search.study import next_slot, proposal_sampler

    protocol = tiny(trials=4, **{"optim.epochs": 1})
    data = load_data(protocol)
    calm = RunOptions(results_dir=tmp_path / "calm", progress=False)
    expected = tune(protocol, "contrastive", data.train, data.fingerprint, calm)

    run = RunOptions(results_dir=tmp_path / "resumed", progress=False)
    real_train = interrupt_the_second_training(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        tune(protocol, "contrastive", data.train, data.fingerprint, run)
    monkeypatch.setattr(train_module, "train", real_train)
    name = study_name(protocol, "contrastive", {})
    if how == "killed":  # the re-queued copy claimed by a worker that then died (SIGKILL)
        options = SearchOptions()
        study = open_study(
            protocol,
            "contrastive",
            open_storage(storage_url(options, run.results_dir), options),
            name,
        )
        dead = subprocess.run(
            [sys.executable, "-c", "import os; print(os.getpid())"],
            capture_output=True,
            text=True,
            check=True,
        )
        study.sampler = proposal_sampler(protocol, next_slot(study.get_trials(deepcopy=False)))
        ghost = study.ask()
        ghost.set_user_attr("host", socket.gethostname())
        ghost.set_user_attr("pid", int(dead.stdout))
    sel = tune(protocol, "contrastive", data.train, data.fingerprint, run)
    assert _trial_records(run.results_dir) == _trial_records(calm.results_dir)
    assert sel == expected
