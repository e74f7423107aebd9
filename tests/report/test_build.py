"""build_reports: one set of files per protocol hash, never a mixed table, comparisons only on a match."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dmlbench.records import ProtocolRef, Record, Timings, is_baseline
from dmlbench.report import MixedProtocolsError, records_frame, summary_table
from dmlbench.report.build import build_reports

PUBLISHED = Path(__file__).resolve().parents[2] / "results" / "published"
SEARCH = {"trial": 1, "trials": 4, "metric": "recall@1", "value": 0.8, "epochs": 3}


def rec(
    method: str,
    seed: int = 0,
    h: str = "a" * 64,
    name: str = "p",
    stage: str = "final",
    overrides: dict[str, Any] | None = None,
    epochs: int = 0,
    steps: int = 0,
    wall: float = 1.0,
    m: dict[str, float] | None = None,
) -> Record:
    """A fake record of protocol ``name`` / hash ``h``, like tests/test_records.py:make but
    without the (slow) environment probe, so dozens of them cost nothing. Its data
    fingerprint is that of the name's base protocol: ``X`` and ``X@defaults`` are one data
    set, two protocols are two (the rankings count a data set once)."""
    return Record(
        protocol=ProtocolRef(name=name, version=1, hash=h),
        data_fingerprint=f"f-{name.split('@')[0]}",
        method=method,
        seed=seed,
        stage=stage,
        metrics=m or {"recall@1": 0.5},
        curve=[{"epoch": float(e), "loss": 1.0} for e in range(epochs)],
        overrides=overrides or {},
        timings=Timings(wall_seconds=wall, train_seconds=wall / 2, steps=steps),
    )


def tuned(records: list[Record]) -> list[Record]:
    """``records`` as selected by a 4-trial search (:data:`SEARCH`): a tuned board, which the
    comparison across data sets reads; the rows without learning name no search, as real ones."""
    return [r if is_baseline(r.method) else r.model_copy(update={"search": SEARCH})
            for r in records]  # fmt: skip


def cub_and_glyph_records() -> list[Record]:
    """cub200 (matches published numbers), a glyphs-like protocol and a third hash, all three
    tuned and on data sets of their own."""
    out = []
    for s in range(2):
        out += [
            rec("npairs", s, "c" * 64, "cub200", m={"recall@1": 0.5 + 0.02 * s, "nmi": 0.6}),
            rec("proxy-nca", s, "c" * 64, "cub200", m={"recall@1": 0.56, "nmi": 0.62}),
            rec("untrained", s, "c" * 64, "cub200", m={"recall@1": 0.3, "nmi": 0.4}),
            rec("pixels", s, "c" * 64, "cub200", m={"recall@1": 0.2, "nmi": 0.3}),
            rec("npairs", s, "d" * 64, "glyphs-mini", m={"recall@1": 0.7}),
            rec("contrastive", s, "d" * 64, "glyphs-mini", m={"recall@1": 0.72}),
            rec("contrastive", s, "e" * 64, "glyphs", m={"recall@1": 0.6}),
        ]
    return tuned(out)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    """One build of :func:`cub_and_glyph_records` shared by the tests that only read it."""
    out = tmp_path_factory.mktemp("reports")
    return out, build_reports(cub_and_glyph_records(), out, PUBLISHED)


def test_one_report_per_hash_and_mixed_hashes_never_reach_one_table(
    built: tuple[Path, list[Path]],
) -> None:
    with pytest.raises(MixedProtocolsError):  # what a naive single table would do
        summary_table(records_frame(cub_and_glyph_records()))
    tmp_path, written = built
    assert all(p.is_file() for p in written)
    stems = ["cub200-cccccccccccc", "glyphs-mini-dddddddddddd", "glyphs-eeeeeeeeeeee"]
    for stem in stems:
        for suffix in (".md", ".csv", ".tex", ".html", "-bars.png", "-bars.svg", "-budget.md"):
            assert tmp_path / f"{stem}{suffix}" in written, f"{stem}{suffix}"
    pages = sorted(f"{s}.html" for s in stems)
    assert sorted(p.name for p in tmp_path.glob("*.html")) == sorted([*pages, "index.html"])
    cross = ["cross-dataset.md", "cross-dataset.csv", "cross-dataset-agreement.csv"]
    assert {tmp_path / name for name in cross} <= set(written)
    # each table holds only its own hash's methods
    glyph_md = (tmp_path / "glyphs-mini-dddddddddddd.md").read_text()
    assert "| contrastive" in glyph_md and "proxy-nca" not in glyph_md


def test_reported_vs_reproduced_only_where_a_published_number_matches(
    built: tuple[Path, list[Path]],
) -> None:
    tmp_path = built[0]
    published = sorted(p.name for p in tmp_path.glob("*-published.*"))
    assert published == ["cub200-cccccccccccc-published.csv", "cub200-cccccccccccc-published.md"]
    md = (tmp_path / "cub200-cccccccccccc-published.md").read_text()
    assert "| npairs" in md and "| proxy-nca" in md and "untrained" not in md
    assert "Fehervari et al. 2019, Table 2 (Inception-BN column)" in md


def test_no_comparison_without_published_dir_or_matching_method(tmp_path: Path) -> None:
    build_reports(cub_and_glyph_records(), tmp_path / "a", None)
    assert not list((tmp_path / "a").glob("*-published.*"))
    # cub200, but only a method without a published CUB number
    records = [rec("contrastive", s, "c" * 64, "cub200", m={"recall@1": 0.5}) for s in range(2)]
    build_reports(records, tmp_path / "b", PUBLISHED)
    assert not list((tmp_path / "b").glob("*-published.*"))


def test_runs_with_overrides_get_own_files_and_no_comparison(tmp_path: Path) -> None:
    smoke = {"max_steps": 3}
    records = [
        rec("npairs", s, "c" * 64, "cub200", overrides=smoke, m={"recall@1": 0.1}) for s in range(2)
    ]
    written = build_reports(records, tmp_path, PUBLISHED)
    htmls = [
        p
        for p in written
        if p.suffix == ".html" and p.parent == tmp_path and p.name != "index.html"
    ]
    assert len(htmls) == 1 and not list(tmp_path.glob("*-published.*"))
    text = htmls[0].read_text()
    assert "runs with overrides" in text and "Not compared" in text
    # smoke tests are no data set: nothing is compared across data sets
    assert not list(tmp_path.glob("cross-dataset*")) and "Across data sets" not in text


def test_the_comparison_across_data_sets_never_mixes_label_kinds(tmp_path: Path) -> None:
    """A pose method's rank 1 among two is no class method's rank 1 among three: one section,
    table and CSV label per kind, and each page shows its own kind's."""
    import csv

    records = [
        rec("a", 0, "a" * 64, "glyphs", m={"recall@1": 0.9}),
        rec("b", 0, "a" * 64, "glyphs", m={"recall@1": 0.8}),
        rec("c", 0, "a" * 64, "glyphs", m={"recall@1": 0.7}),
        rec("log-ratio", 0, "b" * 64, "poses", m={"ndcg@10": 0.95}),
        rec("triplet-dense", 0, "b" * 64, "poses", m={"ndcg@10": 0.85}),
        rec("untrained", 0, "b" * 64, "poses", m={"ndcg@10": 0.5}),
        rec("pixels", 0, "b" * 64, "poses", m={"ndcg@10": 0.6}),
    ]
    build_reports(tuned(records), tmp_path)
    md = (tmp_path / "cross-dataset.md").read_text(encoding="utf-8")
    class_part, continuous_part = md.split("## Class labels")[1].split("## Continuous labels")
    assert "| a " in class_part and "log-ratio" not in class_part
    assert "| log-ratio " in continuous_part and "| a " not in continuous_part
    with (tmp_path / "cross-dataset.csv").open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["method"], r["label_kind"], r["mean_rank"]) for r in rows] == [
        ("a", "class", "1.0"), ("b", "class", "2.0"), ("c", "class", "3.0"),
        ("log-ratio", "continuous", "1.0"), ("triplet-dense", "continuous", "2.0"),
    ]  # fmt: skip
    page = (tmp_path / f"poses-{'b' * 12}.html").read_text(encoding="utf-8")
    assert "<h3>Continuous labels</h3>" in page and "Class labels" not in page
    index = (tmp_path / "index.html").read_text(encoding="utf-8")
    assert "<h3>Class labels</h3>" in index and "<h3>Continuous labels</h3>" in index


def test_search_trials_only_give_no_report_but_count_in_budget(tmp_path: Path) -> None:
    trials = [rec("npairs", 0, "f" * 64, "q", stage="search-trial", epochs=2) for _ in range(3)]
    assert build_reports(trials, tmp_path, PUBLISHED) == []
    final = rec("npairs", 0, "f" * 64, "q", epochs=5, m={"recall@1": 0.4})
    build_reports([*trials, final], tmp_path, PUBLISHED)
    budget = (tmp_path / "q-ffffffffffff-budget.csv").read_text().splitlines()
    head = ["method", "trials", "complete", "pruned", "search_epochs", "finals", "n_seeds"]
    assert budget[0].split(",")[:8] == [*head, "epochs"]
    assert budget[1].split(",")[:8] == ["npairs", "3", "0", "0", "6", "1", "1", "11"]


def test_one_protocol_hash_on_two_copies_of_the_data_is_refused(tmp_path: Path) -> None:
    from dmlbench.errors import DmlbenchError

    a, b = rec("npairs", 0), rec("npairs", 1)
    b = b.model_copy(update={"data_fingerprint": "0123456789abcdef-damaged"})
    with pytest.raises(DmlbenchError, match=r"different data \(fingerprints 0123456789ab, f-p\)"):
        build_reports([a, b], tmp_path)


def test_a_run_present_twice_is_counted_once(tmp_path: Path, caplog: Any) -> None:
    """The README tour's seed 0 beside the committed seed 0 must not become two seeds."""
    from dmlbench.report.build import unique_records

    records = [rec("npairs", 0, m={"recall@1": 0.5}), rec("npairs", 0, m={"recall@1": 0.5})]
    records.append(rec("npairs", 1, m={"recall@1": 0.7}))
    kept = unique_records(records)
    assert [r.seed for r in kept] == [0, 1]
    assert "appears twice" in caplog.text
    assert len(unique_records([rec("npairs", 0, stage="search-trial")] * 2)) == 2  # trials kept


def test_report_leaves_the_committed_leaderboard_out_unless_asked(tmp_path: Path) -> None:
    import subprocess
    import sys

    from dmlbench.records import record_path, save_record

    results = tmp_path / "results"
    mine, board = rec("npairs", 0, m={"recall@1": 0.5}), rec("npairs", 1, m={"recall@1": 0.9})
    save_record(mine, record_path(results, "p", mine.protocol.hash, "npairs", 0))
    save_record(board, record_path(results / "leaderboard", "p", board.protocol.hash, "npairs", 1))

    def report(*extra: str) -> str:
        out = tmp_path / "reports"
        cmd = [sys.executable, "-m", "dmlbench", "report", "--results-dir", str(results)]
        subprocess.run([*cmd, "--reports-dir", str(out), *extra], check=True, capture_output=True)
        return (out / f"p-{'a' * 12}.md").read_text()

    alone = report()
    assert "| npairs | 50.0 " in alone and "90.0" not in alone
    both = report("--include-leaderboard")
    assert "70.0 ± 28.3" in both  # the board's seed too: the user asked for it


def test_every_csv_of_a_build_is_numbers(built: tuple[Path, list[Path]]) -> None:
    """Incl. reported vs reproduced (in %, as printed) and the cross-data-set report's empty
    cells."""
    import csv

    tmp_path, written = built
    for path in (p for p in written if p.suffix == ".csv"):
        text = path.read_text(encoding="utf-8")
        assert not any(bad in text for bad in ("±", "n/a", "—", "**", "†")), path.name
    with (tmp_path / "cub200-cccccccccccc-published.csv").open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    npairs = next(r for r in rows if r["method"] == "npairs" and r["metric"] == "recall@1")
    assert float(npairs["ours_mean"]) == pytest.approx(51.0)  # seeds .50 and .52, in %
    assert float(npairs["ours_lo"]) < 51.0 < float(npairs["ours_hi"])
    assert npairs["n_seeds"] == "2"
    assert float(npairs["difference"]) == pytest.approx(51.0 - float(npairs["published"]))
    with (tmp_path / "cross-dataset.csv").open(encoding="utf-8") as fh:
        across = {r["method"]: r for r in csv.DictReader(fh)}
    assert set(across) == {"npairs", "proxy-nca", "contrastive"}  # no row without learning
    npairs = across["npairs"]
    assert [npairs[c] for c in ("label_kind", "data_sets", "cub200_rank")] == ["class", "2", "2.0"]
    assert npairs["glyphs_rank"] == npairs["glyphs_verdict"] == ""  # not run on glyphs


def test_each_board_is_analysed_once_per_render(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The per-board analysis is a bootstrap: the Markdown, the LaTeX, the plots and the page
    of one board share one (the render used to compute it twice)."""
    import dmlbench.report.board as board
    import dmlbench.report.build as build

    calls: list[str] = []
    real = board.analyse_board

    def counted(df: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(str(df["protocol_hash"].iloc[0]))
        return real(df, *args, **kwargs)

    monkeypatch.setattr(board, "analyse_board", counted)
    monkeypatch.setattr(build, "analyse_board", counted, raising=False)
    build_reports(cub_and_glyph_records(), tmp_path, PUBLISHED)
    assert sorted(calls) == ["c" * 64, "d" * 64, "e" * 64]
