"""Records: atomic writes, round trip, damaged files reported, not fatal."""

from __future__ import annotations

from pathlib import Path

from dmlbench.records import (
    ProtocolRef,
    Record,
    Timings,
    atomic_write_text,
    environment,
    load_records,
    record_path,
    save_record,
)


def make(method: str = "contrastive", seed: int = 0, h: str = "a" * 64, **metrics: float) -> Record:
    return Record(
        protocol=ProtocolRef(name="p", version=1, hash=h),
        data_fingerprint="f",
        method=method,
        seed=seed,
        metrics=metrics or {"recall@1": 0.5},
        timings=Timings(wall_seconds=1.0),
        env=environment("cpu", "fp32"),
    )


def test_round_trip(tmp_path: Path) -> None:
    rec = make()
    path = save_record(rec, record_path(tmp_path, "p", rec.protocol.hash, rec.method, 0))
    assert path.name == "contrastive-seed0-final.json"
    records, problems = load_records(tmp_path)
    assert records == [rec] and problems == []
    assert rec.env["packages"]["torch"] and rec.leaderboard_eligible


def test_damaged_record_is_reported_not_fatal(tmp_path: Path) -> None:
    save_record(make(), tmp_path / "good.json")
    (tmp_path / "torn.json").write_text('{"protocol": {"name": ')
    (tmp_path / "alien.json").write_text('{"hello": 1}')
    records, problems = load_records(tmp_path)
    assert len(records) == 1 and len(problems) == 2
    assert all("damaged record skipped" in p for p in problems)


def test_atomic_write_leaves_no_temp_files(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "x.json"
    atomic_write_text(target, "one")
    atomic_write_text(target, "two")
    assert target.read_text() == "two"
    assert [p.name for p in target.parent.iterdir()] == ["x.json"]
