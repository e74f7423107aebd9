"""Ctrl-C during the search phase of `dmlbench run`: no half-written record, and the same
command continues the study (the interrupted trial re-queued, the budget exact)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
import yaml

from dmlbench.data import load_data
from dmlbench.records import load_records
from dmlbench.search.study import count_trials, study_name
from tests.search.test_search import tiny

pytestmark = pytest.mark.slow


@pytest.mark.heavy  # a minute (three under a parallel run); test_search covers the requeue
def test_sigint_during_search_then_resume(tmp_path: Path) -> None:
    # 20 epochs: a trial takes seconds even on a fast quiet machine, so the SIGINT sent 1 s
    # after the first trial's record lands inside the second trial (3 epochs once let the
    # whole run finish before the signal came).
    protocol = tiny(trials=3, **{"optim.epochs": 20})
    load_data(protocol)
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(protocol.model_dump(mode="json")))
    results = tmp_path / "results"
    argv = [
        sys.executable, "-m", "dmlbench", "run", "--protocol", str(path),
        "--method", "contrastive", "--results-dir", str(results),
        "--reports-dir", str(tmp_path / "reports"), "--no-progress",
    ]  # fmt: skip
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
    end = time.monotonic() + 300
    while not list(results.rglob("*trial0000-search-trial.json")):  # the first trial is done
        assert proc.poll() is None, proc.stderr.read()  # type: ignore[union-attr]
        assert time.monotonic() < end, "no trial finished"
        time.sleep(0.05)
    time.sleep(1.0)  # well inside the second trial's training
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err
    records, problems = load_records(results)
    assert not problems  # nothing torn
    assert not [r for r in records if r.stage == "final" and r.method == "contrastive"]
    name = study_name(protocol, "contrastive", {})
    storage = f"sqlite:///{results.resolve()}/optuna.db"
    before = optuna.load_study(study_name=name, storage=storage)
    assert "WAITING" in [t.state.name for t in before.trials]  # the interrupted one, re-queued

    done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    study = optuna.load_study(study_name=name, storage=storage)
    assert count_trials(study).finished == 3
    trials = [r for r in load_records(results)[0] if r.stage == "search-trial"]
    assert len(trials) == 3  # the interrupted attempt wrote no record
    finals = [r for r in load_records(results)[0] if r.stage == "final"]
    assert {r.method for r in finals} == {"contrastive", "untrained"}


def _trials(results: Path) -> list[tuple[object, ...]]:
    import json

    return sorted(
        (r.trial, json.dumps(r.hparams, sort_keys=True), r.metrics, r.curve, r.search["state"])
        for r in load_records(results)[0]
        if r.stage == "search-trial"
    )


@pytest.mark.heavy  # three subprocess searches per signal: minutes
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=str)
def test_a_search_stopped_by_any_signal_resumes_to_the_uninterrupted_trials(
    sig: signal.Signals, tmp_path: Path
) -> None:
    """`dmlbench search` stopped inside its second trial by SIGINT, SIGTERM or SIGKILL, then
    run again: every trial record (slot, setting, curve, state, value) equals that of the
    same search run without interruption."""
    protocol = tiny(trials=3, **{"optim.epochs": 8})
    load_data(protocol)
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(protocol.model_dump(mode="json")))

    def argv(results: Path) -> list[str]:
        return [
            sys.executable, "-m", "dmlbench", "search", "--protocol", str(path),
            "--method", "contrastive", "--results-dir", str(results), "--no-progress",
        ]  # fmt: skip

    calm, stopped = tmp_path / "calm", tmp_path / "stopped"
    subprocess.run(argv(calm), check=True, capture_output=True, timeout=600)
    proc = subprocess.Popen(argv(stopped), stderr=subprocess.PIPE, text=True)
    end = time.monotonic() + 300
    while not list(stopped.rglob("*trial0000-search-trial.json")):
        assert proc.poll() is None, proc.stderr.read()  # type: ignore[union-attr]
        assert time.monotonic() < end, "no trial finished"
        time.sleep(0.05)
    time.sleep(1.0)  # inside the second trial
    proc.send_signal(sig)
    proc.communicate(timeout=300)
    assert len(_trials(stopped)) == 1  # the interrupted trial wrote no record
    done = subprocess.run(argv(stopped), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert _trials(stopped) == _trials(calm)
