"""What a table may claim: seeds in the caption, bold by significance, legend, stability, CSVs."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest
from scipy import stats

from dmlbench.records import Record
from dmlbench.report import records_frame
from dmlbench.report.board import analyse_board, write_reports
from dmlbench.report.build import build_reports
from tests.report.test_build import rec

H = "b" * 64
STEM = f"p-{'b' * 12}"
WINNER = {"a": [0.80, 0.81, 0.79, 0.80, 0.82], "b": [0.70, 0.71, 0.69, 0.72, 0.70]}
TIE = {
    "a": [0.70, 0.72, 0.69, 0.71, 0.70],
    "b": [0.71, 0.70, 0.70, 0.72, 0.69],  # 0.002 lower on average, either side per seed
    "c": [0.50, 0.51, 0.49, 0.52, 0.50],
}


def board(values: dict[str, list[float]], untrained: float | None = 0.3) -> list[Record]:
    """Finals of one hash, one per (method, seed); an untrained row on every seed."""
    out = [
        rec(m, s, H, m={"recall@1": v, "nmi": v - 0.1})
        for m, vs in values.items()
        for s, v in enumerate(vs)
    ]
    if untrained is not None:
        seeds = max(len(vs) for vs in values.values())
        out += [rec("untrained", s, H, m={"recall@1": untrained, "nmi": 0.2}) for s in range(seeds)]
    return out


def test_one_clear_winner_is_the_only_bold_cell(tmp_path: Path) -> None:
    [(_, _, md)] = write_reports(board(WINNER), tmp_path)
    assert "mean ± std over 5 seeds" in md
    rows = {line.split("|")[1].strip(): line for line in md.splitlines() if line.startswith("| ")}
    assert "| **80.4 ± 1.1** |" in rows["a"] and "**" not in rows["b"] + rows["untrained"]
    assert md.count("**") == 2  # one bold cell, in the headline column only
    assert (
        "Bold (recall@1): not significantly worse than the best, paired t-test over seeds, "
        "Holm-corrected, α = 0.05" in md
    )
    assert "Stability over seeds (recall@1): top-2 order (a > b) holds in 5 of 5 seeds" in md


def test_a_tie_within_seed_noise_bolds_both(tmp_path: Path) -> None:
    [(_, _, md)] = write_reports(board(TIE), tmp_path)
    rows = {line.split("|")[1].strip(): line for line in md.splitlines() if line.startswith("| ")}
    assert rows["a"].count("**") == 2 and rows["b"].count("**") == 2
    assert "**" not in rows["c"] and "**" not in rows["untrained"]


def test_one_seed_bolds_nothing_and_shows_no_spread(tmp_path: Path) -> None:
    records = board({"a": [0.9], "b": [0.5]})
    [(_, _, md)] = write_reports(records, tmp_path)
    assert "one seed (0): no spread, no significance claimed" in md
    assert "**" not in md and "±" not in md.split("|", 1)[1] and "Stability" not in md
    assert "Nothing in bold: one seed" in md
    numbers = _rows(tmp_path / f"{STEM}.csv")
    assert numbers["a"]["recall@1_std"] == "" and numbers["a"]["recall@1_lo"] == ""
    assert numbers["a"]["n_seeds"] == "1" and float(numbers["a"]["recall@1_mean"]) == 0.9


def test_the_untrained_row_is_never_a_candidate() -> None:
    b = analyse_board(records_frame(board(WINNER, untrained=0.99)))
    assert b.bold == {"recall@1": ["a"]}
    assert b.best is not None and "untrained" not in b.best.methods


def test_captions_for_mixed_seed_counts() -> None:
    mixed = analyse_board(records_frame(board({"a": [0.8, 0.81, 0.79], "b": [0.7]}, None)))
    assert mixed.caption.startswith("mean ± std over 1–3 seeds")
    assert "one seed shows its value alone" in mixed.caption
    other = analyse_board(records_frame([rec("a", 3, H), rec("b", 5, H)]))
    assert other.caption == "one seed each (3, 5): no spread, no significance claimed"


def test_lower_is_better_headline() -> None:
    recs = [rec(m, s, H, m={"mld@1": v}) for m, v in (("a", 1.0), ("b", 2.0)) for s in range(4)]
    recs = [r.model_copy(update={"metrics": {"mld@1": r.metrics["mld@1"] + 0.01 * r.seed}})
            for r in recs]  # fmt: skip
    b = analyse_board(records_frame(recs))
    assert b.metric == "mld@1" and not b.higher_is_better and b.bold == {"mld@1": ["a"]}


def _rows(path: Path) -> dict[str, dict[str, str]]:
    with path.open(encoding="utf-8") as fh:
        return {row["method"]: row for row in csv.DictReader(fh)}


def test_every_csv_is_numbers_and_the_summary_has_t_intervals(tmp_path: Path) -> None:
    records = board(WINNER)
    records[0] = records[0].model_copy(update={"search": {"trial": 1, "trials": 4,
        "metric": "recall@1", "value": 0.8, "epochs": 3}})  # fmt: skip
    written = build_reports(records, tmp_path)
    csvs = [p for p in written if p.suffix == ".csv"]
    assert {p.name for p in csvs} >= {f"{STEM}.csv", f"{STEM}-budget.csv",
                                      f"{STEM}-confidence.csv", "ranking.csv"}  # fmt: skip
    for path in csvs:
        text = path.read_text(encoding="utf-8")
        for bad in ("±", "n/a", "—", "**"):
            assert bad not in text, f"{path.name} holds {bad!r}"
    summary = _rows(tmp_path / f"{STEM}.csv")
    a = [0.80, 0.81, 0.79, 0.80, 0.82]
    half = stats.t.ppf(0.975, 4) * stats.tstd(a) / math.sqrt(5)
    assert float(summary["a"]["recall@1_mean"]) == pytest.approx(sum(a) / 5)
    assert float(summary["a"]["recall@1_std"]) == pytest.approx(stats.tstd(a))
    assert float(summary["a"]["recall@1_lo"]) == pytest.approx(sum(a) / 5 - half)
    assert float(summary["a"]["recall@1_hi"]) == pytest.approx(sum(a) / 5 + half)
    assert summary["a"]["n_seeds"] == "5" and "nmi_hi" in summary["a"]
    confidence = _rows(tmp_path / f"{STEM}-confidence.csv")
    assert float(confidence["a"]["recall@1_lo"]) == pytest.approx(sum(a) / 5 - half)
    assert confidence["untrained"]["selected"] == "" and confidence["a"]["n_seeds"] == "5"
    budget = _rows(tmp_path / f"{STEM}-budget.csv")
    assert float(budget["a"]["wall_seconds"]) == 5.0 and budget["a"]["n_seeds"] == "5"


def test_html_and_latex_bold_the_same_methods(tmp_path: Path) -> None:
    build_reports(board(TIE), tmp_path)
    page = (tmp_path / f"{STEM}.html").read_text(encoding="utf-8")
    assert page.count("<strong>") == 2 and "<strong>70.4 ± 1.1</strong>" in page
    assert "mean ± std over 5 seeds" in page and "Stability over seeds" in page
    tex = (tmp_path / f"{STEM}.tex").read_text(encoding="utf-8")
    assert tex.count(r"\textbf") == 2 and r"$\alpha$ = 0.05" in tex


def test_cd_diagram_per_hash_embedded_and_indexed(tmp_path: Path) -> None:
    records = [*board(TIE), rec("a", 0, "c" * 64, "q"), rec("untrained", 0, "c" * 64, "q")]
    written = build_reports(records, tmp_path)
    names = {p.name for p in written}
    assert {f"{STEM}-cd.png", f"{STEM}-cd.svg"} <= names
    assert not any(n.startswith("q-") and "-cd." in n for n in names)  # one trained method
    assert f'src="{STEM}-cd.png"' in (tmp_path / f"{STEM}.html").read_text(encoding="utf-8")
    index = (tmp_path / "index.html").read_text(encoding="utf-8")
    assert f'href="{STEM}-cd.png"' in index and f'href="{STEM}-cd.svg"' in index
    assert "5 seeds" in (tmp_path / f"{STEM}-cd.svg").read_text(encoding="utf-8")


def test_bar_axis_never_calls_one_seed_a_spread() -> None:
    import pandas as pd

    from dmlbench.report.bars import bar_data, spread_words
    from dmlbench.report.tables import summary_table

    assert spread_words(pd.Series([1, 1])) == "one seed: no spread (no error bars)"
    assert spread_words(pd.Series([3, 3])) == "mean ± std over 3 seeds"
    assert "no error bar for n=1" in spread_words(pd.Series([1, 3]))
    data = bar_data(summary_table(records_frame(board({"a": [0.9], "b": [0.5]}))), "recall@1")
    assert data["std"].tolist() == [0.0, 0.0, 0.0]  # drawn without bars, labelled n=1
