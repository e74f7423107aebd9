"""What a table may claim: seeds in the caption, verdicts against the best of the others, bold
for "not worse than the best", the legend, Kendall τ, CSVs; the committed board's regression."""

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
    [(title, _, md)] = write_reports(board(WINNER), tmp_path)
    assert "mean ± std over 5 seeds" in md and "equivalence margin ±3 points" in title
    rows = {line.split("|")[1].strip(): line for line in md.splitlines() if line.startswith("| ")}
    assert "| **80.4 ± 1.1** |" in rows["a"] and "**" not in rows["b"] + rows["untrained"]
    assert md.count("**") == 2  # one bold cell, in the headline column only
    assert "| worse " in rows["b"] and "| — " in rows["untrained"]
    assert "Bold (recall@1): not worse than the best." in md
    assert "Hsu's multiple comparison with the best" in md and "never a test of every pair" in md
    assert "carry no per-query values" in md  # no per-query hits in these records
    assert "no method is called equivalent" in md
    assert "Stability over seeds (recall@1): mean Kendall τ between two seeds' rankings" in md
    assert "top-" not in md  # P(rank 1) and P(top 3) replace the top-3 order line


def test_a_tie_within_seed_noise_bolds_both(tmp_path: Path) -> None:
    [(_, _, md)] = write_reports(board(TIE), tmp_path)
    rows = {line.split("|")[1].strip(): line for line in md.splitlines() if line.startswith("| ")}
    assert rows["a"].count("**") == 2 and rows["b"].count("**") == 2
    assert "**" not in rows["c"] and "**" not in rows["untrained"]
    # a tie inside ±3, but these records carry no per-query hits: the interval misses the
    # test-query component, so it is never printed as equivalent
    assert "| undecided " in rows["a"] and "| worse " in rows["c"]


def test_verdict_columns_and_csv_numbers(tmp_path: Path) -> None:
    write_reports(board(TIE), tmp_path)
    numbers = _rows(tmp_path / f"{STEM}.csv")
    a, c = numbers["a"], numbers["c"]
    assert a["verdict"] == "undecided" and c["verdict"] == "worse"  # seeds only: no equivalent
    assert float(c["recall@1_vs_best_hi"]) < 0 < float(a["recall@1_vs_best_hi"])
    assert float(a["p_rank1"]) + float(numbers["b"]["p_rank1"]) == pytest.approx(1.0)
    assert float(c["p_top3"]) == 1.0 and float(c["p_rank1"]) == 0.0  # 3 trained methods
    assert numbers["untrained"]["verdict"] == "" and a["equivalence_margin"] == "0.03"


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
    assert b.verdicts is not None and "untrained" not in b.verdicts.index


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
                                      f"{STEM}-confidence.csv", "cross-dataset.csv",
                                      "cross-dataset-agreement.csv"}  # fmt: skip
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
    assert (
        page.count("<strong>") == 2
        and '<strong>70.4<span class="sd"> ± 1.1</span></strong>' in page
    )
    assert "mean ± std over 5 seeds" in page and "Stability over seeds" in page
    assert "<th>verdict</th>" in page
    tex = (tmp_path / f"{STEM}.tex").read_text(encoding="utf-8")
    assert tex.count(r"\bfseries") == 2 and "equivalence margin" in tex and "undecided" in tex


def test_forest_plot_per_judged_board_embedded_and_indexed(tmp_path: Path) -> None:
    records = [*board(TIE), rec("a", 0, "c" * 64, "q"), rec("untrained", 0, "c" * 64, "q")]
    written = build_reports(records, tmp_path)
    names = {p.name for p in written}
    assert {f"{STEM}-forest.png", f"{STEM}-forest.svg"} <= names
    assert not any("-cd." in n for n in names)  # the CD diagram is gone
    assert not any(n.startswith("q-") and "-forest." in n for n in names)  # nothing judged
    page = (tmp_path / f"{STEM}.html").read_text(encoding="utf-8")
    assert f'src="{STEM}-forest.png"' in page
    index = (tmp_path / "index.html").read_text(encoding="utf-8")
    assert f'href="{STEM}-forest.png"' in index and f'href="{STEM}-forest.svg"' in index
    assert "equivalence margin" in (tmp_path / f"{STEM}-forest.svg").read_text(encoding="utf-8")


def test_forest_data_is_the_verdicts_in_points() -> None:
    from dmlbench.report.forest import forest_data

    b = analyse_board(records_frame(board(TIE)))
    assert b.verdicts is not None
    data = forest_data(b.verdicts, "recall@1")
    assert list(data.index) == list(b.verdicts.index)
    assert data.loc["c", "difference"] == pytest.approx(100 * b.verdicts.loc["c", "difference"])
    assert (data["lower"] <= data["difference"]).all() and (
        data["difference"] <= data["upper"]
    ).all()


def test_on_the_committed_board_a_method_ten_points_behind_is_worse_never_equivalent_or_bold() -> (
    None
):
    """Regression on the committed glyphs-mini defaults board (one study; seeds and test
    classes crossed): every method 10 or more Recall@1 points below the best is *worse* and
    not bold, and the bold set is not the 16 of 20 that Holm over all 190 pairs printed on v4's
    tuned board."""
    from dmlbench.records import load_records

    lb = Path(__file__).resolve().parents[2] / "results" / "leaderboard" / "glyphs-mini@defaults"
    records, _ = load_records(lb)
    finals = [r for r in records if r.stage == "final" and not r.overrides]
    b = analyse_board(records_frame(finals), finals)
    assert b.verdicts is not None and b.resampled == "seeds and test classes"
    v = b.verdicts
    behind = v[v["mean"] <= v["mean"].max() - 0.10]
    assert len(behind) >= 4
    assert (behind["verdict"] == "worse").all()
    assert not set(behind.index) & set(b.bold["recall@1"])
    assert len(b.bold["recall@1"]) < 8


def test_bar_axis_never_calls_one_seed_a_spread() -> None:
    import pandas as pd

    from dmlbench.report.bars import bar_data, spread_words
    from dmlbench.report.tables import summary_table

    assert spread_words(pd.Series([1, 1])) == "one seed: no spread (no error bars)"
    assert spread_words(pd.Series([3, 3])) == "mean ± std over 3 seeds"
    assert "no error bar for n=1" in spread_words(pd.Series([1, 3]))
    data = bar_data(summary_table(records_frame(board({"a": [0.9], "b": [0.5]}))), "recall@1")
    assert data["std"].tolist() == [0.0, 0.0, 0.0]  # drawn without bars, labelled n=1


def test_the_legend_names_a_search_that_left_the_study_pool() -> None:
    """A board whose seeds are nested in 3 studies says how the search's luck is counted, and
    names the methods whose studies disagree beyond the pool (their own 2 df)."""
    from dataclasses import replace

    import numpy as np

    from dmlbench.report.board import _own_studies
    from dmlbench.report.moments import crossed_moments

    rng = np.random.default_rng(3)
    sums = rng.binomial(10, 0.5, (5, 12, 40)).astype(float)
    sums[2] += rng.normal(0, 25, 3)[np.arange(12) % 3, None]
    mc = crossed_moments(tuple("abcde"), sums, np.full(40, 10.0), np.arange(12) % 3)
    assert _own_studies(mc) == ("c",)
    plain = analyse_board(records_frame(board(WINNER)), board(WINNER))
    nested = replace(plain, studies=3, own_studies=_own_studies(mc))
    assert "pooled over the methods" in nested.legend and "here c:" in nested.legend
    assert "pooled over the methods" not in plain.legend
