"""The leaderboard's sweeps: the declared sweeps cover what the mission names, every point is
a derived protocol of the defaults board with its own hash, and a tiny sweep regenerates its
records and plots (PNG + SVG, 3 seeds per point), resumably."""

from __future__ import annotations

from pathlib import Path

import pytest

from dmlbench.leaderboard import sweeps
from dmlbench.leaderboard.sweeps import SEEDS, SWEEPS, Sweep, update_sweeps
from dmlbench.records import load_records
from tests.leaderboard.test_check import tiny_protocol_file


def test_declared_sweeps_are_the_missions() -> None:
    by = {(s.protocol, s.key): s for s in SWEEPS}
    emb = by["glyphs-mini", "model.embedding_size"]
    assert emb.values == (16, 32, 64, 128, 256, 512)
    assert {"contrastive", "triplet-semihard", "multi-similarity", "proxy-nca"} <= set(emb.methods)
    assert "proxy-softmax" in emb.methods
    assert by["glyphs-mini", "batch.size"].values == (32, 64, 128, 256)
    poses = by["poses-mini", "model.embedding_size"]
    assert poses.values == (16, 32, 64, 128)
    assert set(poses.methods) == {"log-ratio", "triplet-dense", "triplet-binary"}
    assert len(SEEDS) >= 3


def test_every_point_is_a_named_derived_protocol_that_every_method_can_run() -> None:
    """Validation catches a batch a method cannot fill: every (point, method) is checked."""
    from dmlbench.methods import METHODS

    for sweep in SWEEPS:
        points = sweep.protocols()
        assert len({p.hash for p in points}) == len(sweep.values)
        for p, value in zip(points, sweep.values, strict=True):
            assert p.name.startswith(f"{sweep.protocol}@defaults@") and p.search.trials == 0
            assert p.name.endswith(f"@{sweep.key}={value}")
            for m in sweep.methods:
                METHODS.get(m).check_batch(p.batch.size, p.batch.samples_per_class)


@pytest.mark.slow
def test_a_tiny_sweep_regenerates_records_and_plots(tmp_path: Path) -> None:
    tiny = Sweep(
        str(tiny_protocol_file(tmp_path)), "model.embedding_size", (8, 16), ("contrastive",)
    )
    results, reports, work = tmp_path / "results", tmp_path / "reports", tmp_path / "work"
    written = update_sweeps(results, reports, work, jobs=1, sweeps=(tiny,))
    records, problems = load_records(results)
    assert not problems
    finals = [r for r in records if r.method == "contrastive"]
    assert len(finals) == 2 * len(SEEDS) and all(r.command == sweeps.COMMAND for r in finals)
    assert {r.seed for r in finals} == set(SEEDS)
    names = {p.name for p in written}
    plots = [n for n in names if n.startswith("sweep-") and n.endswith(".png")]
    assert len(plots) == 1 and plots[0].replace(".png", ".svg") in names
    assert (reports / "index.html").is_file()
    before = {p: p.stat().st_mtime_ns for p in work.rglob("*-final.json")}
    update_sweeps(results, reports, work, jobs=1, sweeps=(tiny,))  # resumes: nothing re-run
    assert {p: p.stat().st_mtime_ns for p in work.rglob("*-final.json")} == before
