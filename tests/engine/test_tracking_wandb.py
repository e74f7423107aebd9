"""``--track wandb:PROJECT`` offline, read back from the run folders it wrote.

An offline W&B run keeps everything in its transaction log (``run-<id>.wandb``); the public
``wandb.Api`` reads only the server, so the log is read with W&B's own reader, ``wandb leet
inspect --json`` (one JSON record per line: the run, config updates, history rows, summary
updates). A final run goes through :func:`track_record`; a search trial is logged the way the
search worker logs one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
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

pytest.importorskip("wandb", reason="the wandb extra is not installed")

HASH = "cd34" * 16
TRIAL = f"glyphs-tiny/{HASH[:12]}/contrastive-trial0002-search-trial"
EPOCHS = 2


@dataclass
class Offline:
    final: Record
    runs: dict[str, dict[str, Any]]  # by name, as read back


def _isolated(mp: pytest.MonkeyPatch, root: Path, mode: str) -> None:
    """W&B's mode, and its folders under ``root`` (no credentials, nothing in $HOME)."""
    import wandb

    wandb.teardown()  # the next wandb.setup() reads this environment afresh
    mp.setenv("WANDB_MODE", mode)
    mp.setenv("WANDB_DIR", str(root))
    mp.setenv("NETRC", str(root / "netrc"))
    for name in ("CONFIG", "CACHE", "DATA"):
        mp.setenv(f"WANDB_{name}_DIR", str(root / name.lower()))
    mp.delenv("WANDB_API_KEY", raising=False)


@pytest.fixture(scope="module")
def offline(tmp_path_factory: pytest.TempPathFactory) -> Offline:
    import wandb

    root = tmp_path_factory.mktemp("wandb")
    final = Record(
        protocol=ProtocolRef(name="glyphs-tiny", version=1, hash=HASH),
        data_fingerprint="f",
        method="contrastive",
        hparams={"margin": 0.2, "schedule": {"warmup": 1}},
        seed=0,
        metrics={"recall@1": 0.61, "map@r": 0.3},
        curve=[{"epoch": 0.0, "loss": 1.25}, {"epoch": 1.0, "loss": 0.875}],
        search={"trial": 2, "epochs": EPOCHS},
        timings=Timings(wall_seconds=1.0, steps=4),
    )
    with pytest.MonkeyPatch.context() as mp:
        _isolated(mp, root, "offline")
        tracker = open_tracker("wandb:dmlbench-test")
        track_record(tracker, final)
        run = tracker.open_run(TRIAL)
        for fold in range(2):  # as search.worker logs a trial: fold f at f × epochs + epoch
            for epoch in range(EPOCHS):
                loss = 1.0 - 0.1 * (fold * EPOCHS + epoch)
                Shifted(run, fold * EPOCHS).scalars({"loss": loss, "val_recall@1": 0.4}, epoch)
        run.hparams({"margin": 0.3, "state": "fail"}, {"trial/val_recall@1": float("nan")})
        run.close()
        wandb.teardown()
    names = [record_run_name(final), TRIAL]
    with ThreadPoolExecutor(len(names)) as pool:  # each read starts W&B's reader process
        runs = dict(zip(names, pool.map(lambda name: _read(root, name), names), strict=True))
    return Offline(final, runs)


def _read(root: Path, name: str) -> dict[str, Any]:
    """The offline run called ``name``: its name, group, config, history rows and summary."""
    from dmlbench.engine.tracking_wandb import run_id

    (folder,) = (root / "wandb").glob(f"offline-run-*-{run_id(name)}")
    out = subprocess.run(
        [sys.executable, "-m", "wandb", "leet", "inspect", "--json", str(folder)],
        capture_output=True, text=True, check=True, timeout=60, stdin=subprocess.DEVNULL,
        env={**os.environ, "WANDB_MODE": "offline", "WANDB_ERROR_REPORTING": "false"},
    ).stdout  # fmt: skip
    records = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    (run,) = [r["run"] for r in records if r["type"] == "run"]
    config, summary = dict(run["config"]["update"]), dict[str, Any]()
    for r in records:
        config.update(r["config"].get("update", {}) if r["type"] == "config" else {})
        summary.update(r["summary"].get("update", {}) if r["type"] == "summary" else {})
    history = [r["history"]["item"] for r in records if r["type"] == "history"]
    return {**run, "config": config, "history": history, "summary": summary}


def test_final_run_has_config_curve_test_metrics_and_labels(offline: Offline) -> None:
    name = record_run_name(offline.final)
    run = offline.runs[name]
    assert run["display_name"] == name and run["project"] == "dmlbench-test"
    assert run["run_group"] == f"glyphs-tiny/{HASH[:12]}"
    config = run["config"]
    assert config["margin"] == 0.2 and config["schedule"] == {"warmup": 1}
    assert config["method"] == "contrastive" and config["selected_trial"] == 2
    assert config["protocol_hash"] == HASH[:12]
    assert config["record"] == f"glyphs-tiny/{HASH[:12]}/contrastive-seed0-final.json"
    assert [(h["epoch"], h["loss"]) for h in run["history"]] == [(0, 1.25), (1, 0.875)]
    assert run["summary"]["test/recall@1"] == pytest.approx(0.61)
    assert run["summary"]["test/map@r"] == pytest.approx(0.3)


def test_search_trial_has_each_fold_at_its_pruner_step(offline: Offline) -> None:
    run = offline.runs[TRIAL]
    assert [h["epoch"] for h in run["history"]] == [0, 1, 2, 3]
    assert [h["loss"] for h in run["history"]] == pytest.approx([1.0, 0.9, 0.8, 0.7])
    assert run["config"]["state"] == "fail" and run["config"]["record"] == f"{TRIAL}.json"
    assert "trial/val_recall@1" not in run["summary"]  # a failed trial's NaN is left out


def test_online_without_credentials_is_one_line_not_a_prompt(tmp_path: Path) -> None:
    import wandb

    with pytest.MonkeyPatch.context() as mp:
        _isolated(mp, tmp_path, "online")
        with pytest.raises(DmlbenchError, match="no W&B credentials") as err:
            open_tracker("wandb:dmlbench-test")
        wandb.teardown()
    assert "\n" not in str(err.value) and "WANDB_MODE=offline" in str(err.value)


def test_a_project_name_w_and_b_refuses_is_one_line() -> None:
    with pytest.raises(DmlbenchError, match="may not hold") as err:
        open_tracker("wandb:team/project")
    assert "\n" not in str(err.value)


def test_a_missing_package_names_its_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    for module in [m for m in sys.modules if m == "wandb" or m.startswith("wandb.")]:
        monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(MissingTrackerPackage, match=r'pip install -e "\.\[wandb\]"'):
        open_tracker("wandb:dmlbench-test")
