"""``dmlbench report`` prints the published numbers a protocol meets, with the mark and the
footnote of every setting that differs (issue "Fair by default": never silently paired)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dmlbench.cli.main import main
from dmlbench.records import record_path, save_record
from tests.report.test_build import PUBLISHED, rec


def test_report_prints_the_mark_and_footnote_of_an_unnormalised_published_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "results"
    shutil.copytree(PUBLISHED, results / "published")
    for seed in (0, 1):  # Fehervari et al. ran N-pairs without normalisation; cub200 normalises
        r = rec("npairs", seed, "c" * 64, "cub200", m={"recall@1": 0.5, "nmi": 0.6})
        save_record(r, record_path(results, "cub200", "c" * 64, "npairs", seed, "final", {}))
    argv = ["report", "--results-dir", str(results), "--reports-dir", str(tmp_path / "reports")]
    assert main(argv) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if "npairs" in line and "Fehervari" in line]
    assert rows and all("†" in row for row in rows)
    notes = [line for line in out.splitlines() if line.lstrip().startswith("†")]
    assert any("normalis" in line for line in notes), notes
