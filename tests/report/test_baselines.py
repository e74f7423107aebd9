"""The gate table: every board against its rows that need no learning, from records alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from dmlbench.report.baselines import gate_table, write_gate_report
from dmlbench.report.build import build_reports
from dmlbench.report.gate import BELOW_START, GateError, gate, no_better_than_start, require
from dmlbench.report.plots import sweep_name
from tests.report.test_build import rec

H = "b" * 64


def board(values: dict[str, list[float]], name: str = "p", metric: str = "recall@1") -> list:
    return [
        rec(method, seed, H, name, m={metric: v})
        for method, vs in values.items()
        for seed, v in enumerate(vs)
    ]


def test_gain_is_over_the_best_row_that_needs_no_learning() -> None:
    """pixels (0.30) beats the untrained network (0.10): the gain is measured from it, and a
    board 9 points above it fails the 10-point gate; 11 points above passes."""
    rows = {"pixels": [0.30, 0.30], "untrained": [0.10, 0.12], "a": [0.39, 0.39], "b": [0.2, 0.2]}
    table = gate_table({("p", H): board(rows)})
    row = table.iloc[0]
    assert (row["best method"], row["best row without learning"]) == ("a", "pixels")
    assert (row["gain (points)"], row["gate"]) == (9.0, "fails")
    rows["a"] = [0.41, 0.41]
    assert gate_table({("p", H): board(rows)}).iloc[0]["gate"] == "passes"


def test_a_board_without_a_row_its_protocol_has_is_not_judged() -> None:
    """15 points over the untrained network, but no pixels row: raw pixels might be the
    best row (poses-mini v4's were, on validation), so the board neither passes nor fails;
    `check --update` refuses to write it, naming the row."""
    rows = {"untrained": [0.50, 0.50], "a": [0.65, 0.65]}
    row = gate_table({("p", H): board(rows)}).iloc[0]
    assert (row["gain (points)"], row["gate"]) == (15.0, "not judged: no pixels row")
    means = {"untrained": {"recall@1": 0.5}, "a": {"recall@1": 0.65}}
    g = gate("p", means, rows=("pixels", "untrained", "pretrained"))
    assert not g.passed and g.missing == ("pixels", "pretrained")
    assert g.status == "not judged: no pixels or pretrained row"
    with pytest.raises(GateError, match=r"p FAILS the gate: .*lacks the pixels, pretrained row"):
        require([g])
    assert gate("p", means | {"pixels": {"recall@1": 0.2}}, rows=("pixels",)).passed


def test_methods_no_better_than_the_starting_point_are_counted() -> None:
    """Two of three methods sit at or below the pretrained row's mean; without a pretrained
    row the column says so instead of a count."""
    rows = {
        "pixels": [0.2, 0.2],
        "pretrained": [0.5, 0.5],
        "a": [0.7, 0.72],
        "b": [0.5, 0.5],
        "c": [0.45, 0.55],
    }
    assert gate_table({("p", H): board(rows)}).iloc[0][BELOW_START] == "2 of 3"
    del rows["pretrained"]
    assert gate_table({("p", H): board(rows)}).iloc[0][BELOW_START] == "no pretrained row"


def test_below_start_respects_the_direction_of_the_metric() -> None:
    means = {"pretrained": {"mld@1": 1.0}, "a": {"mld@1": 0.8}, "b": {"mld@1": 1.2}}
    assert no_better_than_start(means, "mld@1", higher=False) == ("b",)
    assert no_better_than_start(means, "mld@1", higher=True) == ("a",)
    assert no_better_than_start({"a": {"mld@1": 1.0}}, "mld@1") == ()


def test_build_reports_writes_the_table_for_boards_only(tmp_path: Path) -> None:
    """A board with rows that need no learning gets its line; runs with overrides (smoke
    tests) are not a board and get none."""
    records = board({"pixels": [0.2, 0.2], "a": [0.5, 0.6], "b": [0.4, 0.45]})
    records.append(rec("a", 0, "c" * 64, "q", overrides={"max_steps": 5}))
    records.append(rec("pixels", 0, "c" * 64, "q", overrides={"max_steps": 5}))
    build_reports(records, tmp_path)
    text = (tmp_path / "gate.md").read_text(encoding="utf-8")
    assert "| p (bbbbbbbb)" in text and "| q (" not in text
    assert (tmp_path / "gate.csv").read_text(encoding="utf-8").count("\n") == 2


def test_a_board_below_the_gate_says_so_under_its_table(tmp_path: Path) -> None:
    """A board 5 points over raw pixels is written (a user's run is never hidden), with a line
    under its table, in Markdown and HTML, saying it measures no metric learning; one 30 points
    over them has no such line."""
    rows = {"pixels": [0.45, 0.45], "untrained": [0.1, 0.1], "a": [0.5, 0.5], "b": [0.4, 0.45]}
    build_reports(board(rows), tmp_path)
    line = "Not shown to measure metric learning: below the gate (best method +5.0 points over"
    assert line in (tmp_path / f"p-{H[:12]}.md").read_text(encoding="utf-8")
    assert line in (tmp_path / f"p-{H[:12]}.html").read_text(encoding="utf-8")
    build_reports(board({**rows, "pixels": [0.2, 0.2]}), tmp_path)
    assert "Not shown" not in (tmp_path / f"p-{H[:12]}.md").read_text(encoding="utf-8")
    point = sweep_name("p", "model.embedding_size", "16")  # a point of a plot, not a board
    build_reports(board(rows, name=point), tmp_path / "sweep")
    assert "Not shown" not in next((tmp_path / "sweep").glob("*.md")).read_text(encoding="utf-8")


def test_no_table_without_rows_that_need_no_learning(tmp_path: Path) -> None:
    assert write_gate_report({("p", H): board({"a": [0.5, 0.6]})}, tmp_path) == []
    assert not (tmp_path / "gate.md").exists()


def test_tables_and_plots_mark_methods_no_better_than_the_start(tmp_path: Path) -> None:
    """b's mean is below the pretrained row's: its verdict cell in the Markdown table, the
    forest plot's data and the paper table say so; a's do not."""
    from dmlbench.report.board import analyse_board
    from dmlbench.report.forest import forest_data
    from dmlbench.report.tables import records_frame

    values = {
        "pixels": [0.2] * 3,
        "pretrained": [0.5] * 3,
        "a": [0.70, 0.72, 0.71],
        "b": [0.45, 0.47, 0.46],
        "c": [0.60, 0.58, 0.62],
    }
    records = board(values)
    analysis = analyse_board(records_frame(records), records)
    assert analysis.below_start == ("b",)
    assert analysis.verdicts is not None
    data = forest_data(analysis.verdicts, "recall@1")
    assert data["below_start"].to_dict() == {"a": False, "b": True, "c": False}
    build_reports(records, tmp_path)
    md = next(p for p in tmp_path.glob("p-*.md") if p.stem.count("-") == 1)
    rows = {line.split("|")[1].strip(): line for line in md.read_text().splitlines() if "|" in line}
    assert BELOW_START in rows["b"] and BELOW_START not in rows["a"]
    assert BELOW_START.capitalize() in md.read_text()
    tex = next(tmp_path.glob("p-*.tex")).read_text()
    assert tex.count(r"$^\dagger$") == 1 and "dagger" in tex.split("caption")[1]


def test_bar_plot_draws_the_starting_point_and_labels_what_stays_below_it() -> None:
    import pandas as pd

    from dmlbench.report.bars import draw_bars

    data = pd.DataFrame(
        {"mean": [70.0, 45.0, 50.0, 20.0], "std": [1.0, 1.0, 0.0, 0.0], "seeds": [3] * 4},
        index=["a", "b", "pretrained", "pixels"],
    )
    ax = draw_bars(data, "recall@1", "t").axes[0]
    labels = {t.get_position()[1]: t.get_text() for t in ax.texts}
    assert BELOW_START in labels[2] and BELOW_START not in labels[3]  # b (y=2), a (y=3)
    dashed = [line for line in ax.get_lines() if line.get_linestyle() == "--"]
    assert len(dashed) == 1 and dashed[0].get_xdata()[0] == 50.0
