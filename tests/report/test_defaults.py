"""Paper defaults vs tuned: pairs X with X@defaults on the same data, means, ranks, rank change."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from dmlbench.records import Record
from dmlbench.report.build import build_reports
from dmlbench.report.defaults import board_pairs, defaults_vs_tuned
from tests.report.test_build import rec

TUNED = {"a": [0.80, 0.82], "b": [0.75, 0.75], "c": [0.55, 0.57], "untrained": [0.3, 0.3]}
DEFAULTS = {"a": [0.60], "b": [0.70], "c": [0.50], "d": [0.65], "untrained": [0.3]}


def boards(fingerprint: str = "f", version: int = 1) -> list[Record]:
    out = [
        rec(m, s, "t" * 64, "glyphs-mini", m={"recall@1": v})
        for m, vs in TUNED.items()
        for s, v in enumerate(vs)
    ]
    for m, vs in DEFAULTS.items():
        for s, v in enumerate(vs):
            r = rec(m, s, "d" * 64, "glyphs-mini@defaults", m={"recall@1": v})
            r.data_fingerprint, r.protocol.version = fingerprint, version
            out.append(r)
    return out


def test_means_ranks_and_rank_change() -> None:
    [(tuned, defaults)] = board_pairs(boards())
    t = defaults_vs_tuned(tuned, defaults)
    assert list(t.index) == ["a", "b", "c", "d", "untrained"]
    assert t.loc["a", "tuned_mean"] == pytest.approx(0.81) and t.loc["a", "tuned_n_seeds"] == 2
    assert t.loc["a", "defaults_mean"] == pytest.approx(0.60)
    assert t.loc["a", "defaults_n_seeds"] == 1
    assert t.loc["a", "difference"] == pytest.approx(0.21)
    # defaults: b .70, d .65, a .60, c .50 -> b 1, d 2, a 3, c 4; tuned: a 1, b 2, c 3
    assert t["defaults_rank"].tolist()[:4] == [3.0, 1.0, 4.0, 2.0]
    assert t["tuned_rank"].tolist()[:3] == [1.0, 2.0, 3.0]
    assert t["rank_change"].tolist()[:3] == [2.0, -1.0, 1.0]
    assert t.loc[["d", "untrained"], "tuned_rank"].isna().all()  # not run / never ranked
    assert t.loc["untrained", "difference"] == pytest.approx(0.0)


def test_files_written_and_indexed(tmp_path: Path) -> None:
    records = boards()
    for r in records:  # the tuned board's selections say what its search spent
        if r.protocol.name == "glyphs-mini" and r.method != "untrained":
            r.search = {"trials": 8, "trial": 3, "metric": "recall@1", "value": 0.7, "epochs": 2}
    written = build_reports(records, tmp_path)
    md, csv_path = (
        tmp_path / "glyphs-mini-defaults-vs-tuned.md",
        tmp_path / "glyphs-mini-defaults-vs-tuned.csv",
    )
    assert md in written and csv_path in written
    text = md.read_text(encoding="utf-8")
    title = "glyphs-mini v1: paper defaults (no search) vs tuned (8-trial search per method)"
    assert f"## {title}\n" in text
    row = next(line for line in text.splitlines() if line.startswith("| a "))
    assert [c.strip() for c in row.split("|")[2:-1]] == [
        "60.0", "1", "81.0", "2", "+21.0", "3", "1", "+2",
    ]  # fmt: skip
    with csv_path.open(encoding="utf-8") as fh:
        rows = {r["method"]: r for r in csv.DictReader(fh)}
    assert float(rows["a"]["difference"]) == pytest.approx(0.21)
    assert rows["d"]["tuned_mean"] == "" and rows["a"]["tuned_hash"] == "t" * 64
    index = (tmp_path / "index.html").read_text(encoding="utf-8")
    assert "paper defaults (no search) vs tuned (8-trial search per method)" in index


def test_only_boards_on_the_same_data_and_version_are_paired(tmp_path: Path) -> None:
    assert board_pairs(boards(fingerprint="other")) == []
    assert board_pairs(boards(version=2)) == []
    build_reports(boards(fingerprint="other"), tmp_path)
    assert not list(tmp_path.glob("*defaults-vs-tuned*"))
