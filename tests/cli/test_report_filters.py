"""``dmlbench report``'s selection: sweep points only with ``--sweeps`` and never compared
across data sets, and a selection that leaves nothing is one line naming the filters, the
folder and the closest name.

Before, a plain ``dmlbench report`` in a fresh clone read ``results/sweeps`` (177 files) and
ranked its points as protocols, and ``--protocol cub-200`` said only "no records found".
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dmlbench.cli.main import main
from dmlbench.records import Record, record_path, save_record
from dmlbench.report.plots import sweep_name
from tests.report.test_build import rec, tuned

SWEPT = [sweep_name("glyphs-mini", "model.embedding_size", v) for v in ("16", "32")]


def _save(results: Path, records: list[Record]) -> None:
    for r in records:
        save_record(r, record_path(results, r.protocol.name, r.protocol.hash, r.method, r.seed))


def _board(name: str, h: str) -> list[Record]:
    """A tuned board: the comparison across data sets would read it, were it no sweep point."""
    return tuned(
        [rec(m, 0, h=h, name=name, m={"recall@1": x}) for m, x in (("a", 0.4), ("b", 0.6))]
    )


def _report(results: Path, out: Path, *extra: str) -> int:
    argv = ["report", "--results-dir", str(results), "--reports-dir", str(out), *extra]
    return main(argv)


@pytest.fixture
def results(tmp_path: Path) -> Path:
    """A board, a ``--trials 4`` board (not a sweep) and two sweep points in ``sweeps/``."""
    folder = tmp_path / "results"
    _save(folder, _board("glyphs-mini", "e" * 64) + _board("glyphs-mini@trials=4", "d" * 64))
    for i, name in enumerate(SWEPT):
        _save(folder / "sweeps", _board(name, str(i) * 64))
    return folder


def test_default_report_leaves_sweep_points_out(
    results: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "reports"
    assert _report(results, out) == 0
    names = [p.name for p in out.iterdir()]
    assert not [n for n in names if "model.embedding_size" in n], names
    # another budget is a protocol, not a sweep point: its own table; on the same data as
    # glyphs-mini, so named under the comparison, not compared (one data set counts once)
    assert [n for n in names if n.startswith("glyphs-mini@trials=4-") and n.endswith(".md")]
    across = (out / "cross-dataset.md").read_text(encoding="utf-8")
    assert "Not compared: glyphs-mini@trials=4" in across and "One data set: glyphs-mini" in across
    assert "model.embedding_size" not in capsys.readouterr().out


def test_sweeps_flag_reports_them_but_never_compares_them(
    results: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "reports"
    assert _report(results, out, "--sweeps") == 0
    assert (out / "sweep-glyphs-mini-model.embedding_size.png").is_file()
    assert [p for p in out.glob("*model.embedding_size=16-*.md")]  # a table per point
    across = (out / "cross-dataset.md").read_text(encoding="utf-8")
    assert "Not compared: glyphs-mini@trials=4" in across and "model.embedding_size" not in across
    index = (out / "index.html").read_text(encoding="utf-8").split("<h2>Across data sets</h2>")
    assert len(index) == 2 and "model.embedding_size" not in index[1]
    capsys.readouterr()


def test_sweep_points_alone(
    results: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweeps = results / "sweeps"
    assert _report(sweeps, tmp_path / "r1") == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line == (
        f"error: {sweeps}: no records found; left out: 4 records of sweep points "
        "(--sweeps reports them)"
    )
    out = tmp_path / "r2"
    assert _report(sweeps, out, "--sweeps") == 0
    assert not list(out.glob("cross-dataset*"))
    assert "Across data sets" not in (out / "index.html").read_text(encoding="utf-8")


def test_protocol_filter_names_the_filter_the_folder_and_the_closest_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "results"
    _save(results, _board("cub200", "c" * 64))
    _save(results / "leaderboard", _board("glyphs-mini", "e" * 64))
    assert _report(results, tmp_path / "reports", "--protocol", "cub-200") == 2
    err = capsys.readouterr().err
    [line] = err.strip().splitlines()
    assert line == (
        f"error: {results}: no records found for --protocol cub-200 (did you mean 'cub200'?); "
        f"protocols there: cub200; left out: {results / 'leaderboard'} "
        "(--include-leaderboard reads it)"
    )


def test_a_protocol_naming_a_sweep_point_is_reported_without_the_flag(
    results: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "reports"
    assert _report(results, out, "--protocol", SWEPT[0], "--format", "json") == 0
    assert "(2 rows" in capsys.readouterr().out
