"""Results as data: the tidy frame, its board column, the docs example and report --format json."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import pytest

from dmlbench.records import Record, record_path, save_record
from dmlbench.report.results import COLUMNS, load_results, results_frame, results_json
from tests.report.test_build import rec

RECORDS_DOC = Path(__file__).resolve().parents[2] / "docs" / "records.md"
README = RECORDS_DOC.parents[1] / "README.md"
SEARCH = {"trial": 2, "trials": 4, "metric": "recall@1", "value": 0.7, "epochs": 3}


def results_folder(root: Path) -> list[Record]:
    """A tuned board (two seeds and a search trial), its @defaults board and the leaderboard."""
    tuned = [rec("npairs", s, "a" * 64, "glyphs-mini", m={"recall@1": 0.6 + 0.1 * s, "nmi": 0.5})
             for s in range(2)]  # fmt: skip
    for r in tuned:
        r.search, r.hparams, r.env = SEARCH, {"lr": 0.001}, {"git_commit": "abc123"}
    trial = rec("npairs", 0, "a" * 64, "glyphs-mini", stage="search-trial",
                m={"val_recall@1": 0.7})  # fmt: skip
    trial.trial = 3
    defaults = rec("npairs", 0, "d" * 64, "glyphs-mini@defaults", m={"recall@1": 0.5})
    smoke = rec("npairs", 0, "e" * 64, "glyphs-tiny", overrides={"max_steps": 2})
    records = [*tuned, trial, defaults, smoke]
    for r in records:
        path = record_path(root, r.protocol.name, r.protocol.hash, r.method, r.seed, r.stage,
                           r.overrides, r.trial)  # fmt: skip
        save_record(r, path)
    board = rec("npairs", 0, "f" * 64, "poses-mini@defaults", m={"ndcg@10": 0.9})
    save_record(board, record_path(root / "leaderboard", "poses-mini@defaults", "f" * 64,
                                   "npairs", 0))  # fmt: skip
    return records


def test_one_row_per_record_and_metric(tmp_path: Path) -> None:
    results_folder(tmp_path / "results")
    df = load_results(tmp_path / "results")
    assert list(df.columns) == COLUMNS
    assert (
        len(df) == 2 * 2 + 1 + 1 + 1 + 1
    )  # two metrics × two seeds, trial, defaults, smoke, board
    by = {(r.protocol, r.seed, r.stage, r.metric): r for r in df.itertuples()}
    seed1 = by[("glyphs-mini", 1, "final", "recall@1")]
    assert seed1.value == pytest.approx(0.7) and seed1.board == "tuned"
    assert json.loads(seed1.hparams) == {"lr": 0.001} and seed1.git_commit == "abc123"
    assert seed1.protocol_hash == "a" * 64 and seed1.protocol_version == 1
    assert seed1.data_fingerprint == rec("npairs", name="glyphs-mini").data_fingerprint
    assert seed1.wall_seconds == 1.0
    trial = by[("glyphs-mini", 0, "search-trial", "val_recall@1")]
    assert trial.board == "fixed" and trial.value == pytest.approx(0.7)
    assert by[("glyphs-mini@defaults", 0, "final", "recall@1")].board == "defaults"
    smoke = by[("glyphs-tiny", 0, "final", "recall@1")]
    assert smoke.board == "fixed" and json.loads(smoke.overrides) == {"max_steps": 2}
    assert len(load_results(tmp_path / "results", skip=("leaderboard",))) == len(df) - 1


def test_a_single_record_file_and_a_missing_path(tmp_path: Path) -> None:
    [first, *_] = results_folder(tmp_path)
    path = record_path(tmp_path, "glyphs-mini", "a" * 64, "npairs", 0)
    df = load_results(str(path))
    assert sorted(df["metric"]) == ["nmi", "recall@1"] and set(df["seed"]) == {first.seed}
    with pytest.raises(FileNotFoundError):
        load_results(tmp_path / "nowhere")


def test_a_damaged_record_is_skipped_with_a_warning(tmp_path: Path) -> None:
    results_folder(tmp_path)
    (tmp_path / "glyphs-mini" / "broken.json").write_text("[1, 2]")
    with pytest.warns(UserWarning, match="broken.json: damaged record skipped"):
        df = load_results(tmp_path)
    assert len(df) == 8


def readme_example(doc: Path) -> str:
    section = doc.read_text(encoding="utf-8").split("## Results as data\n", 1)[1]
    section = section.split("\n## ", 1)[0]
    [code] = re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)
    return code


@pytest.mark.parametrize("doc", [README, RECORDS_DOC], ids=lambda p: p.name)
def test_the_readme_example_runs_as_written(
    doc: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code = readme_example(doc)
    assert len([ln for ln in code.strip().splitlines() if ln.strip()]) == 3  # three lines
    results_folder(tmp_path / "results")
    for folder in ("leaderboard", "sweeps"):  # committed seeds of the same protocol hash
        board = rec("npairs", 7, "a" * 64, "glyphs-mini", m={"recall@1": 0.0, "nmi": 0.5})
        save_record(board, record_path(tmp_path / "results" / folder, "glyphs-mini", "a" * 64,
                                       "npairs", 7))  # fmt: skip
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, doc.name, "exec"), {})
    printed = out.getvalue()
    assert "npairs" in printed and "recall@1" in printed and "val_recall@1" not in printed
    assert "0.65" in printed  # the mean of the user's two seeds: no committed seed mixed in


def test_report_format_json_writes_the_same_rows(tmp_path: Path) -> None:
    from dmlbench.cli.main import main

    records = results_folder(tmp_path / "results")
    out = tmp_path / "reports"
    argv = ["report", "--results-dir", str(tmp_path / "results"), "--reports-dir", str(out)]
    assert main([*argv, "--format", "json"]) == 0
    assert [p.name for p in out.iterdir()] == ["results.json"]  # only the data
    rows = json.loads((out / "results.json").read_text(encoding="utf-8"))
    expected = results_frame(records)  # the leaderboard is left out, as in the tables
    assert len(rows) == len(expected) and list(rows[0]) == COLUMNS
    assert rows == json.loads(results_json(expected))
    assert [r["value"] for r in rows] == expected["value"].tolist()  # exact floats
    assert main([*argv, "--format", "json", "--protocol", "glyphs-mini@defaults"]) == 0
    rows = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert {r["protocol"] for r in rows} == {"glyphs-mini@defaults"}
    assert rows[0]["git_commit"] is None and rows[0]["board"] == "defaults"
