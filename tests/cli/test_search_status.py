"""``dmlbench search --status`` is a question: it creates no study database.

Before, ``--status`` in a fresh folder wrote ``results/optuna.db`` (opening a SQLite storage
creates it). With no database it says so in one line and exits 0, as it exits 0 for a method
whose study is "not started".
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dmlbench.cli.main import main

STATUS = ["search", "--protocol", "glyphs-mini", "--method", "contrastive", "--status"]


def test_no_database_is_one_line_and_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "results"
    assert main([*STATUS, "--results-dir", str(results)]) == 0
    out = capsys.readouterr().out
    assert out.strip().splitlines() == [
        f"no study: {results / 'optuna.db'} does not exist "
        "(`dmlbench search` or `dmlbench run` makes it)"
    ]
    assert not results.exists()


def test_a_sqlite_url_that_does_not_exist_is_not_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "studies" / "mine.db"
    assert main([*STATUS, "--storage", f"sqlite:///{db}"]) == 0
    assert capsys.readouterr().out.startswith(f"no study: {db} does not exist")
    assert not db.parent.exists()


def test_an_existing_database_is_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from dmlbench.options import SearchOptions
    from dmlbench.search.storage import open_storage, storage_url

    results = tmp_path / "results"
    options = SearchOptions()
    open_storage(storage_url(options, results), options)  # an empty study database
    assert main([*STATUS, "--results-dir", str(results)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("protocol glyphs-mini (") and "contrastive" in out
    assert "not started" in out
