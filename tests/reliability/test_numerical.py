"""Numerical faults (issue #9, point 3): a NaN or Inf loss stops its run or its trial, loudly.

- ``dmlbench run --no-search``: exit 2 with one line ``error: non-finite loss at step N (…)``
  and no final record for that method (the untrained baseline row is still written).
- In a search: the trial fails with the reason ``non-finite loss at step N``, counts against the
  budget, its ``search-trial`` record says why, and the study goes on to a selection that the
  final runs use. A study whose every trial failed ends in one line listing the reasons.

The faults come from a test-double method whose loss turns NaN or Inf at a chosen step, on a
small glyphs protocol (16 classes, one epoch): about a second per run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna
import pytest
import torch
import yaml
from torch import nn

from dmlbench.cli.main import main
from dmlbench.methods import METHODS, Method
from dmlbench.options import RunOptions, SearchOptions
from dmlbench.protocol import load_protocol
from dmlbench.records import load_records
from dmlbench.run import run_protocol
from dmlbench.search.storage import open_storage
from dmlbench.search.study import count_trials, open_study, study_name

NAME = "explodes-test"
NEVER = -1
PROTOCOL = {
    "name": "glyphs-numerical",
    "version": 1,
    "data": {
        "dataset": "glyphs",
        "params": {"num_classes": 16, "image_size": 16, "instances_per_font": 1},
    },
    "model": {"backbone": "small-cnn", "embedding_size": 16},
    "batch": {"size": 16, "samples_per_class": 4},
    "optim": {"lr": 0.001, "epochs": 1},
    "metrics": {"recall_at": [1, 2], "nmi": False},
    "search": {"trials": 2, "pruner": "none", "validation": {"folds": 1, "fraction": 0.25}},
    "seeds": [0],
}


class _Explodes(nn.Module):
    """A finite regression loss that becomes ``value`` from its ``at``-th call on (0-based)."""

    def __init__(self, at: int, value: float) -> None:
        super().__init__()
        self.at, self.value, self.calls = at, value, 0

    def forward(self, emb: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        loss = (emb[:, 0] - labels.float() / 100).pow(2).mean()
        self.calls += 1
        return loss + self.value if self.at != NEVER and self.calls > self.at else loss


class Exploding(Method):
    """Test double: ``explode_at`` is the step whose loss is ``VALUE`` (``-1``: never)."""

    name = NAME
    paper = "test double"
    defaults = {"explode_at": 0}
    samples_per_class = 4
    VALUE = float("nan")

    def build_loss(self) -> nn.Module:
        return _Explodes(int(self.hparams["explode_at"]), self.VALUE)

    @classmethod
    def search_space(cls, trial: Any) -> dict[str, Any]:
        return {"explode_at": trial.suggest_categorical("explode_at", [0, NEVER])}


def write_protocol(tmp_path: Path) -> Path:
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(PROTOCOL))
    return path


def register(monkeypatch: pytest.MonkeyPatch, value: float) -> None:
    cls = type("ExplodingNow", (Exploding,), {"VALUE": value})
    monkeypatch.setitem(METHODS._items, NAME, cls)


@pytest.mark.parametrize(
    ("value", "step"), [(float("nan"), 0), (float("inf"), 2)], ids=["nan", "inf"]
)
def test_a_non_finite_loss_stops_the_run_without_a_record(
    value: float,
    step: int,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    register(monkeypatch, value)
    protocol = write_protocol(tmp_path)
    results = tmp_path / "results"
    argv = [
        "run", "--protocol", str(protocol), "--method", NAME, "--no-search", "--no-progress",
        "--hparam", f"{NAME}.explode_at={step}",
        "--results-dir", str(results), "--reports-dir", str(tmp_path / "reports"),
    ]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert errors == [f"error: non-finite loss at step {step} ({value})"], err
    written = sorted(p.name for p in results.rglob("*.json"))
    assert [w.split("-seed")[0] for w in written] == ["pixels", "untrained"]  # no NAME record


def test_a_nan_trial_fails_with_its_reason_and_the_study_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Trial 0 (the paper defaults, enqueued first) explodes; trial 1 (enqueued here, so the
    test does not depend on what the sampler proposes) trains; the final run uses trial 1."""
    register(monkeypatch, float("nan"))
    protocol = load_protocol(write_protocol(tmp_path))
    url = f"sqlite:///{tmp_path}/optuna.db"
    run = RunOptions(results_dir=tmp_path, progress=False, max_steps=2)  # 2 steps per training
    name = study_name(protocol, NAME, {"max_steps": 2})
    study = open_study(protocol, NAME, open_storage(url, SearchOptions()), name, url)
    study.enqueue_trial({"explode_at": NEVER})

    (final,) = [r for r in run_protocol(protocol, [NAME], [0], run) if r.method == NAME]

    study = optuna.load_study(study_name=name, storage=url)
    assert [t.state.name for t in study.trials] == ["FAIL", "COMPLETE"]
    assert study.trials[0].user_attrs["fail_reason"] == "non-finite loss at step 0 (nan)"
    assert count_trials(study).finished == 2  # the failed trial spent budget
    records, problems = load_records(tmp_path)
    assert problems == []
    trials = {r.trial: r for r in records if r.stage == "search-trial"}
    assert set(trials) == {0, 1}
    assert trials[0].search["state"] == "fail" and not trials[0].metrics
    assert trials[0].search["reason"] == "non-finite loss at step 0 (nan)"
    assert trials[1].search["state"] == "complete" and "val_recall@1" in trials[1].metrics
    assert final.search["trial"] == 1 and final.hparams["explode_at"] == NEVER
    assert final.search["trials"] == 2


def test_a_study_whose_every_trial_fails_is_one_error_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    register(monkeypatch, float("nan"))
    protocol = write_protocol(tmp_path)
    argv = [
        "run", "--protocol", str(protocol), "--method", NAME, "--trials", "1", "--no-progress",
        "--results-dir", str(tmp_path / "results"), "--reports-dir", str(tmp_path / "reports"),
    ]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in err, err
    assert "no trial completed" in errors[0] and "non-finite loss at step 0" in errors[0]
    assert not list((tmp_path / "results").rglob("*-final*.json"))  # not even the baseline
