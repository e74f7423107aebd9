"""``--track mlflow:DIR``, read back with MLflow's own client on the SQLite store it wrote.

A final run goes through :func:`track_record` (what ``dmlbench run`` calls for each record);
a search trial is logged the way the search worker logs one (a run per trial, each fold's
epochs shifted, then its hyper-parameters and value). One store is shared by the module:
creating MLflow's schema (its migrations) is the slow part.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dmlbench.engine.tracking import (
    MissingTrackerPackage,
    Shifted,
    open_tracker,
    record_run_name,
    track_record,
)
from dmlbench.errors import DmlbenchError
from dmlbench.records import ProtocolRef, Record, Timings

pytest.importorskip("mlflow", reason="the mlflow extra is not installed")
# SQLAlchemy 2.1 warns about a loader strategy inside MLflow's own store, not about dmlbench.
pytestmark = pytest.mark.filterwarnings("ignore:The ``noload`` loader:DeprecationWarning")

HASH = "ab12" * 16
TRIAL = f"glyphs-tiny/{HASH[:12]}/contrastive-trial0001-search-trial"
EPOCHS = 2


@dataclass
class Store:
    tracker: Any
    client: Any
    final: Record


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    from mlflow.tracking import MlflowClient

    tracker = open_tracker(f"mlflow:{tmp_path_factory.mktemp('mlflow') / 'runs'}")
    final = Record(
        protocol=ProtocolRef(name="glyphs-tiny", version=1, hash=HASH),
        data_fingerprint="f",
        method="contrastive",
        hparams={"margin": 0.2, "lr": 0.001, "schedule": {"warmup": 1}},
        seed=0,
        metrics={"recall@1": 0.61, "map@r": 0.3},
        curve=[{"epoch": 0.0, "loss": 1.25}, {"epoch": 1.0, "loss": 0.875}],
        search={"trial": 1, "epochs": EPOCHS},
        timings=Timings(wall_seconds=1.0, steps=4),
    )
    track_record(tracker, final)
    run = tracker.open_run(TRIAL)
    for fold in range(2):  # as search.worker logs a trial: fold f at f × epochs + epoch
        for epoch in range(EPOCHS):
            values = {"loss": 1.0 - 0.1 * (fold * EPOCHS + epoch), "val_recall@1": 0.4 + fold}
            Shifted(run, fold * EPOCHS).scalars(values, epoch)
    run.hparams({"margin": 0.3, "state": "fail"}, {"trial/val_recall@1": float("nan")})
    run.close()
    return Store(tracker, MlflowClient(tracking_uri=tracker.uri), final)


def _run(store: Store, name: str) -> Any:
    (experiment,) = [e for e in store.client.search_experiments() if e.name != "Default"]
    assert experiment.name == f"glyphs-tiny/{HASH[:12]}"  # one experiment per protocol version
    runs = store.client.search_runs(
        [experiment.experiment_id], filter_string=f"attributes.run_name = '{name}'"
    )
    assert len(runs) == 1
    return runs[0]


def _history(store: Store, run: Any, key: str) -> list[tuple[int, float]]:
    return [(m.step, m.value) for m in store.client.get_metric_history(run.info.run_id, key)]


def test_final_run_has_params_curve_test_metrics_and_labels(store: Store) -> None:
    name = record_run_name(store.final)
    run = _run(store, name)
    assert run.info.status == "FINISHED"
    params = run.data.params
    assert params["margin"] == "0.2" and params["method"] == "contrastive"
    assert params["seed"] == "0" and params["selected_trial"] == "1"
    assert params["schedule"] == '{"warmup": 1}'  # a nested value as JSON text
    assert _history(store, run, "loss") == [(0, 1.25), (1, 0.875)]
    assert run.data.metrics["test/recall_at_1"] == pytest.approx(0.61)  # "@" is not allowed
    assert run.data.metrics["test/map_at_r"] == pytest.approx(0.3)
    tags = run.data.tags
    assert tags["protocol_hash"] == HASH[:12] and tags["protocol"] == "glyphs-tiny"
    assert tags["record"] == f"glyphs-tiny/{HASH[:12]}/contrastive-seed0-final.json"


def test_search_trial_has_each_fold_at_its_pruner_step(store: Store) -> None:
    run = _run(store, TRIAL)
    loss = _history(store, run, "loss")
    assert [s for s, _ in loss] == [0, 1, 2, 3]
    assert [v for _, v in loss] == pytest.approx([1.0, 0.9, 0.8, 0.7])
    assert [v for _, v in _history(store, run, "val_recall_at_1")] == [0.4, 0.4, 1.4, 1.4]
    assert "trial/val_recall_at_1" not in run.data.metrics  # a failed trial's NaN is left out
    assert run.data.tags["record"] == f"{TRIAL}.json"


def test_a_resumed_run_is_the_same_run_with_its_new_state(store: Store) -> None:
    """A search worker re-opens the store from the spec; the re-queued trial completes."""
    again = open_tracker(store.tracker.spec)
    run = again.open_run(TRIAL)
    run.scalars({"loss": 0.5}, 4)
    run.hparams({"margin": 0.3, "state": "complete"}, {"trial/val_recall@1": 0.9})
    run.close()
    found = _run(store, TRIAL)  # still one run of that name
    assert found.data.params["state"] == "fail"  # params are write-once in MLflow
    assert found.data.tags["state"] == "complete"
    assert found.data.metrics["trial/val_recall_at_1"] == pytest.approx(0.9)
    assert _history(store, found, "loss")[-1] == (4, 0.5)


def test_a_missing_package_names_its_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    for module in [m for m in sys.modules if m == "mlflow" or m.startswith("mlflow.")]:
        monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(MissingTrackerPackage, match=r'pip install -e "\.\[mlflow\]"'):
        open_tracker("mlflow:runs")


@pytest.mark.parametrize("where", ["file", "ftp://host/x"])
def test_a_bad_destination_is_one_line(tmp_path: Path, where: str) -> None:
    if where == "file":
        (tmp_path / "file").write_text("")
        where = str(tmp_path / "file")
    with pytest.raises(DmlbenchError, match=r"--track mlflow:") as err:
        open_tracker(f"mlflow:{where}")
    assert "\n" not in str(err.value)
