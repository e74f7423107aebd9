"""The seconds-long fingerprint: this machine reproduces the committed boards' numeric path
(:mod:`dmlbench.leaderboard.fingerprint`), and the fingerprint notices another MKL branch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dmlbench.leaderboard import check, fingerprint, tolerances
from dmlbench.provenance import cpu_name

LEADERBOARD_DIR = Path(__file__).resolve().parents[2] / "results" / "leaderboard"


def _skip_off_path() -> None:
    tol = tolerances.load_tolerances(LEADERBOARD_DIR)
    assert tol is not None
    if why := check.off_path(tol):
        pytest.skip(f"{why}: not bit-identical")


@pytest.mark.slow
def test_this_machine_reproduces_the_committed_fingerprint() -> None:
    _skip_off_path()
    committed = fingerprint.load(LEADERBOARD_DIR)
    assert committed is not None, f"no {fingerprint.FILE}: python -m {fingerprint.__name__} --write"
    now = fingerprint.compute()
    assert now["protocol"] == committed["protocol"]
    assert now["setting"] == committed["setting"]
    assert (now["weights_sha256"], now["metrics_sha256"]) == (
        committed["weights_sha256"],
        committed["metrics_sha256"],
    ), f"{cpu_name()} does not reproduce the committed numeric path"


@pytest.mark.slow
def test_another_mkl_branch_gives_another_fingerprint() -> None:
    """The fingerprint can fail: MKL's vendor-chosen branch (AUTO) rounds differently."""
    _skip_off_path()
    committed = fingerprint.load(LEADERBOARD_DIR)
    assert committed is not None
    env = {**os.environ, "MKL_CBWR": "AUTO"}
    out = subprocess.run(
        [sys.executable, "-m", fingerprint.__name__, "--leaderboard-dir", "unused"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    auto = yaml.safe_load(out)
    assert auto["setting"]["mkl"] == "AUTO"
    assert auto["weights_sha256"] != committed["weights_sha256"]


def test_a_damaged_fingerprint_file_is_one_line(tmp_path: Path) -> None:
    (tmp_path / fingerprint.FILE).write_bytes(b"\xff\xfe: [")
    with pytest.raises(fingerprint.DmlbenchError, match=fingerprint.FILE):
        fingerprint.load(tmp_path)
