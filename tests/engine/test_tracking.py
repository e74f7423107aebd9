"""Experiment tracking and the Optuna study, read back through the libraries' own APIs.

One tiny tuned run (2 trials of 2 steps, then the final run) is shared by the tests: it writes
TensorBoard event files and the Optuna study that ``optuna-dashboard`` opens.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dmlbench.engine.tracking import (
    NullTracker,
    activated,
    current,
    open_tracker,
    record_run_name,
)
from dmlbench.errors import DmlbenchError

pytest.importorskip("tensorboard")


@dataclass
class Tuned:
    tmp: Path
    protocol: Any
    records: list[Any]


@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory) -> Tuned:
    """glyphs-mini shrunk to 40 classes, one epoch, 2 trials of 2 steps, tracked."""
    from dmlbench.options import RunOptions
    from dmlbench.protocol import load_protocol
    from dmlbench.run import run_protocol

    tmp = tmp_path_factory.mktemp("tracked")
    protocol = load_protocol("glyphs-mini").with_overrides(
        {"data.params.num_classes": 40, "optim.epochs": 1, "batch.size": 40, "search.trials": 2},
        name="glyphs-tiny",
    )
    options = RunOptions(results_dir=tmp / "results", max_steps=2, progress=False)
    with activated(open_tracker(f"tensorboard:{tmp / 'tb'}")):  # run.py tracks each final run
        records = run_protocol(protocol, ["contrastive"], [0], options)
    return Tuned(tmp, protocol, records)


def _load(folder: Path) -> Any:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder))
    acc.Reload()
    return acc


def _hparams(acc: Any) -> dict[str, Any]:
    """The hyper-parameters of a run, as the HParams dashboard reads them."""
    from google.protobuf.json_format import MessageToDict
    from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData

    content = acc.PluginTagToContent("hparams")["_hparams_/session_start_info"]
    info = HParamsPluginData.FromString(content).session_start_info
    return {k: MessageToDict(v) for k, v in info.hparams.items()}


def test_search_trials_are_tracked_with_hparams_and_curves(tuned: Tuned) -> None:
    root = tuned.tmp / "tb" / "glyphs-tiny" / tuned.protocol.hash[:12]
    trials = sorted(p.name for p in root.glob("contrastive-trial*"))
    assert len(trials) == 2 and all("search-trial" in t for t in trials)
    acc = _load(root / trials[0])
    tags = set(acc.Tags()["scalars"])
    assert {"loss", "val_recall@1", "trial/val_recall@1"} <= tags
    folds = tuned.protocol.search.validation.folds
    assert [e.step for e in acc.Scalars("loss")] == list(range(folds))  # fold f at f × epochs
    params = _hparams(acc)
    assert params["state"] == "complete"
    from dmlbench.methods import METHODS

    defaults = METHODS.get("contrastive").defaults  # trial 0 runs the paper's defaults
    assert {k: params[k] for k in defaults} == defaults and "samples_per_class" in params


def test_final_runs_are_tracked_with_hparams_curve_and_test_metrics(tuned: Tuned) -> None:
    (final,) = [r for r in tuned.records if r.method == "contrastive"]
    acc = _load(tuned.tmp / "tb" / record_run_name(final))
    assert acc.Scalars("loss")[0].value == pytest.approx(final.curve[0]["loss"])
    recall = acc.Scalars("test/recall@1")
    assert [e.value for e in recall] == [pytest.approx(final.metrics["recall@1"])]
    params = _hparams(acc)
    assert params["method"] == "contrastive" and params["seed"] == 0
    assert params["selected_trial"] == final.search["trial"]
    assert params["margin"] == final.hparams["margin"]


def test_optuna_dashboard_storage_holds_the_trials(tuned: Tuned) -> None:
    """What ``optuna-dashboard sqlite:///results/optuna.db`` shows, through Optuna's own API."""
    import optuna

    from dmlbench.search.study import study_name

    name = study_name(tuned.protocol, "contrastive", {"max_steps": 2})
    storage = f"sqlite:///{tuned.tmp / 'results' / 'optuna.db'}"
    assert name in optuna.get_all_study_names(storage=storage)
    study = optuna.load_study(study_name=name, storage=storage)
    assert len(study.trials) == 2
    assert all("margin" in t.params and "samples_per_class" in t.params for t in study.trials)
    assert study.trials[0].user_attrs["defaults"] is True
    assert study.user_attrs["protocol_hash"] == tuned.protocol.hash


def test_tracking_never_moves_a_number(tuned: Tuned) -> None:
    """The same final run untracked gives bit-identical metrics (no extra random draws)."""
    from dmlbench.options import RunOptions
    from dmlbench.run import run_protocol

    assert isinstance(current(), NullTracker)
    options = RunOptions(results_dir=tuned.tmp / "results", max_steps=2, progress=False)
    again = run_protocol(tuned.protocol, ["contrastive"], [0], replace_force(options))
    assert {r.method: r.metrics for r in again} == {r.method: r.metrics for r in tuned.records}


def replace_force(options: Any) -> Any:
    from dataclasses import replace

    return replace(options, force=True)


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("neptune:runs", "expected tensorboard:DIR, mlflow:URI or wandb:PROJECT"),
        ("tensorboard:", "expected tensorboard:DIR"),
        ("mlflow", "backends: tensorboard, mlflow, wandb"),
    ],
)
def test_a_bad_track_spec_is_one_line(spec: str, fragment: str) -> None:
    with pytest.raises(DmlbenchError, match=fragment) as err:
        open_tracker(spec)
    assert "\n" not in str(err.value)


def test_no_spec_tracks_nothing() -> None:
    tracker = open_tracker(None)
    assert isinstance(tracker, NullTracker) and tracker.spec is None
