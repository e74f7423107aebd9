"""External models on boards: a section of their own after the board, never ranked, judged or
bold; their rows marked for the page; the committed leaderboard's check ignores them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd

from dmlbench.records import ExternalModel, Record, save_record
from dmlbench.report.build import build_reports
from dmlbench.report.external import EXTERNAL, PROTOCOL, with_external_rows
from tests.report.test_build import rec, tuned

H = "d" * 64


def external(name: str, recall: float, h: str = H, precision: str = "unknown") -> Record:
    """An external record that would top the board if it were ranked."""
    model = ExternalModel(
        name=name, trained_by="someone", trained_on="ImageNet-1k", embedding_size=512
    )
    fields = rec(name, 0, h, "glyphs-mini", m={"recall@1": recall}).model_dump()
    fields |= {"stage": "external", "external": model, "env": {"precision": precision}}
    return Record.model_validate(fields)


def board_records() -> list[Record]:
    """Two methods over three seeds (judged: verdicts, bold) and the rows without learning
    (the gate passes); tuned, so
    that the comparison across data sets reads the board."""
    out = []
    for s in range(3):
        out += [
            rec("contrastive", s, H, "glyphs-mini", m={"recall@1": 0.70 + 0.01 * s}),
            rec("npairs", s, H, "glyphs-mini", m={"recall@1": 0.60 + 0.01 * s}),
            rec("untrained", s, H, "glyphs-mini", m={"recall@1": 0.30}),
            rec("pixels", s, H, "glyphs-mini", m={"recall@1": 0.20}),
        ]
    return tuned(out)


def test_external_models_end_the_board_unranked(tmp_path: Path) -> None:
    """Also: an external record's precision ("unknown", here bf16) is no mixed condition."""
    big = external("big-net", 0.95, precision="bf16")
    records = [*board_records(), big, external("other", 0.99, "e" * 64)]
    written = {p.name for p in build_reports(records, tmp_path)}
    stem = f"glyphs-mini-{H[:12]}"
    board, _, section = (tmp_path / f"{stem}.md").read_text().partition("## External models")
    assert "big-net" not in board and "**" in board and "P(rank 1)" in board  # judged
    assert "| big-net " in section and "95.0" in section and "ImageNet-1k" in section
    assert "**" not in section and "P(rank" not in section.split("\n\n", 2)[2]
    for name in (f"{stem}.csv", f"{stem}-budget.csv", f"{stem}-confidence.csv"):
        assert "big-net" not in (tmp_path / name).read_text(), name
    across = pd.read_csv(tmp_path / "cross-dataset.csv", index_col="method")
    assert list(across.index) == ["contrastive", "npairs"]  # compared, without big-net
    numbers = pd.read_csv(tmp_path / f"{stem}-external.csv", index_col="model")
    assert numbers.loc["big-net", "recall@1_mean"] == 0.95
    assert numbers.loc["big-net", "embedding_size"] == 512
    # a hash with external records only: their own table, no board
    assert f"glyphs-mini-{'e' * 12}-external.md" in written
    assert f"glyphs-mini-{'e' * 12}.md" not in written


def test_page_rows_are_marked_by_section() -> None:
    board = pd.DataFrame({"recall@1": ["**70.0**", "60.0"], "verdict": ["", "worse"]})
    board.index = pd.Index(["contrastive", "npairs"], name="method")
    rows = with_external_rows(board, [external("big-net", 0.95)])
    assert list(rows["section"]) == [PROTOCOL, PROTOCOL, EXTERNAL]
    assert rows.loc["big-net", "recall@1"] == "95.0" and rows.loc["big-net", "verdict"] == ""
    assert rows.loc["big-net", "trained_by"] == "someone"
    assert with_external_rows(board, []) is board  # a page without external models: as before


def test_the_leaderboard_check_ignores_an_external_record(tmp_path: Path) -> None:
    from dmlbench.leaderboard import check
    from dmlbench.records import load_record

    committed = Path(__file__).parents[2] / "results" / "leaderboard"
    board = shutil.copytree(committed, tmp_path / "leaderboard")
    before = check.load_leaderboard(board)[1]
    final = next((board / "glyphs-mini").rglob("contrastive-seed0-final.json"))
    ext = external("contrastive", 0.9).model_copy(update={"protocol": load_record(final).protocol})
    save_record(ext, final.with_name(ext.filename()))
    assert check.load_leaderboard(board)[1] == before  # neither refused nor checked
