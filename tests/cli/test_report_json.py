"""``dmlbench report --format json`` applies the tables' checks: the same rows a reader would
average must not count one run twice or mix two copies of a data set."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dmlbench.cli.main import main
from dmlbench.records import Record, record_path, save_record
from tests.report.test_build import rec


def _save(root: Path, r: Record) -> None:
    path = record_path(root, r.protocol.name, r.protocol.hash, r.method, r.seed, r.stage)
    save_record(r, path)


def _report_json(tmp_path: Path, *extra: str) -> int:
    argv = ["report", "--results-dir", str(tmp_path / "results")]
    return main([*argv, "--reports-dir", str(tmp_path / "reports"), "--format", "json", *extra])


def test_two_copies_of_the_data_under_one_protocol_hash_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _save(tmp_path / "results", rec("npairs", 0))
    damaged = rec("npairs", 1).model_copy(update={"data_fingerprint": "0123456789abcdef-damaged"})
    _save(tmp_path / "results", damaged)
    assert _report_json(tmp_path) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "different data (fingerprints 0123456789ab, f-p)" in lines[0]
    assert not (tmp_path / "reports" / "results.json").exists()


def test_a_run_present_twice_gives_its_rows_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """The README tour's seed 0 beside the committed leaderboard's seed 0 (read when asked)."""
    results = tmp_path / "results"
    for r in (rec("npairs", 0, m={"recall@1": 0.5}), rec("npairs", 1, m={"recall@1": 0.7})):
        _save(results, r)
    _save(results / "leaderboard", rec("npairs", 0, m={"recall@1": 0.5}))
    assert _report_json(tmp_path, "--include-leaderboard") == 0
    rows = json.loads((tmp_path / "reports" / "results.json").read_text(encoding="utf-8"))
    assert sorted((r["seed"], r["value"]) for r in rows) == [(0, 0.5), (1, 0.7)]
    said = capsys.readouterr().err + caplog.text
    assert "npairs seed 0 (final) appears twice; counted once" in said
    # Without the leaderboard there is nothing to collapse and nothing to warn about.
    caplog.clear()
    assert _report_json(tmp_path) == 0
    assert "appears twice" not in capsys.readouterr().err + caplog.text
