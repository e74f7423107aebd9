"""Issue #17: ``pml:CircleLoss`` run from the command line beats the untrained row."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dmlbench.records import load_records


# heavy: a whole glyphs-mini run in its own process (a minute of CI); the pml: path is tested
# in-process by the catalogue's tests, and CI's `dmlbench check` runs glyphs-mini whole.
@pytest.mark.slow
@pytest.mark.heavy
def test_pml_circle_loss_beats_the_untrained_row(tmp_path: Path) -> None:
    """The issue's exact command (plus throw-away folders, one thread, no bars), in its own
    process as a user runs it: both rows of the one run are compared, so they share the
    protocol, its hash, the data and the seed."""
    results, reports = tmp_path / "res", tmp_path / "rep"
    argv = [
        "run", "--protocol", "glyphs-mini", "--method", "pml:CircleLoss", "--seed", "0",
        "--no-search", "--results-dir", str(results), "--reports-dir", str(reports),
        "--no-progress", "--threads", "1",
    ]  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-m", "dmlbench", "-q", *argv], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    records, problems = load_records(results)
    assert problems == []
    r1 = {r.method: r.metrics["recall@1"] for r in records if r.stage == "final"}
    assert sorted(r1) == ["pml:CircleLoss", "untrained"], sorted(r1)
    assert len({(r.protocol.hash, r.seed) for r in records if r.stage == "final"}) == 1
    circle, untrained = r1["pml:CircleLoss"], r1["untrained"]
    assert circle > untrained, f"pml:CircleLoss {circle:.4f} vs untrained {untrained:.4f}"
    # and by a margin no lucky initialisation gives (as tests/test_end_to_end.py asks)
    assert circle > untrained + 0.15, f"pml:CircleLoss {circle:.4f} vs untrained {untrained:.4f}"
