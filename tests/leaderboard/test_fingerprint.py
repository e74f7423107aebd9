"""The seconds-long fingerprint: this machine is on one of the committed boards' numeric paths
(:mod:`dmlbench.leaderboard.fingerprint`), another MKL branch is noticed, and the paths'
files are found, matched, refused when stale or damaged, and recorded only where they should."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from dmlbench.errors import DmlbenchError
from dmlbench.leaderboard import check, fingerprint, tolerances
from dmlbench.provenance import cpu_name

LEADERBOARD_DIR = Path(__file__).resolve().parents[2] / "results" / "leaderboard"


def _skip_off_path() -> None:
    """Only another architecture or a changed kernel setting skips: on x86-64 under the
    portable setting an unknown numeric path fails, loudly."""
    tol = tolerances.load_tolerances(LEADERBOARD_DIR)
    assert tol is not None
    if why := check.off_path(tol):
        pytest.skip(f"{why}: not bit-identical")


@pytest.mark.slow
def test_this_machine_is_on_a_committed_numeric_path() -> None:
    _skip_off_path()
    tol = tolerances.load_tolerances(LEADERBOARD_DIR)
    committed = fingerprint.load(LEADERBOARD_DIR)
    assert tol is not None and committed is not None
    now = fingerprint.this_machine()
    assert now["protocol"] == committed["protocol"]
    assert now["setting"] == committed["setting"]
    where = fingerprint.locate(LEADERBOARD_DIR, tol.checksums)
    assert where.why_not is None, f"{cpu_name()}: {where.why_not}"


def test_the_fingerprint_runs_a_frozen_protocol() -> None:
    """glyphs-mini v4, whatever version the shipped glyphs-mini is at: the committed paths'
    fingerprints stay valid when the headline protocol changes."""
    frozen = fingerprint.fingerprint_protocol()
    assert frozen.hash.startswith("13eb26e7aa5d") and frozen.model.pretrained is None
    committed = fingerprint.load(LEADERBOARD_DIR)
    assert committed is not None and committed["protocol"] == f"glyphs-mini {frozen.short_hash}"


@pytest.mark.slow
def test_another_mkl_branch_gives_another_fingerprint() -> None:
    """The fingerprint can fail: MKL's vendor-chosen branch (AUTO) rounds differently."""
    _skip_off_path()
    env = {**os.environ, "MKL_CBWR": "AUTO"}
    out = subprocess.run(
        [sys.executable, "-m", fingerprint.__name__, "--leaderboard-dir", "unused"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    auto = yaml.safe_load(out)
    assert auto["setting"]["mkl"] == "AUTO"
    assert auto["weights_sha256"] != fingerprint.this_machine()["weights_sha256"]


def test_a_damaged_fingerprint_file_is_one_line(tmp_path: Path) -> None:
    (tmp_path / fingerprint.FILE).write_bytes(b"\xff\xfe: [")
    with pytest.raises(fingerprint.DmlbenchError, match=fingerprint.FILE):
        fingerprint.load(tmp_path)


# -- numeric paths, with made-up fingerprints (no training) ------------------------------------

BOARD = {"weights_sha256": "b" * 64, "metrics_sha256": "c" * 64}
OTHER = {"weights_sha256": "d" * 64, "metrics_sha256": "e" * 64}
CHECKSUMS = {"glyphs-mini/x.json": "0" * 64}


def _board(folder: Path, *paths: dict[str, Any]) -> Path:
    (folder / fingerprint.FILE).write_text(yaml.safe_dump(BOARD))
    for p in paths:
        (folder / fingerprint.PATHS).mkdir(exist_ok=True)
        (folder / fingerprint.PATHS / f"{p['name']}.yaml").write_text(yaml.safe_dump(p))
    return folder


def _path(name: str = "intel", checksums: dict[str, str] = CHECKSUMS) -> dict[str, Any]:
    return fingerprint.ReplayPath(
        name=name,
        cpus=["Some CPU"],
        setting={"torch": "AVX2"},
        boards=fingerprint.board_digests(checksums),
        git_commit="abc",
        created="2026-11-28T00:00:00+00:00",
        metrics={"glyphs-mini": {"contrastive": {"recall@1": 0.5}}},
        **OTHER,
    ).model_dump()


def test_the_boards_own_path_is_located(tmp_path: Path) -> None:
    where = fingerprint.locate(_board(tmp_path, _path()), CHECKSUMS, here=BOARD)
    assert where.replay is None and where.why_not is None


def test_another_recorded_path_is_located_with_its_values(tmp_path: Path) -> None:
    where = fingerprint.locate(_board(tmp_path, _path()), CHECKSUMS, here=OTHER)
    assert where.why_not is None and where.replay is not None
    assert where.replay.metrics["glyphs-mini"]["contrastive"]["recall@1"] == 0.5


def test_boards_added_or_regenerated_since_a_path_was_recorded_are_named(
    tmp_path: Path,
) -> None:
    """The path's values stay valid for the boards it recorded; a board regenerated since
    (another digest) or added since (none) is named as unrecorded."""
    folder = _board(tmp_path, _path(checksums={"glyphs-mini/x.json": "1" * 64}))
    now = {**CHECKSUMS, "hanzi-mini/y.json": "2" * 64}
    where = fingerprint.locate(folder, now, here=OTHER)
    assert where.why_not is None and where.replay is not None
    assert where.unrecorded == ("glyphs-mini", "hanzi-mini")
    where = fingerprint.locate(_board(tmp_path, _path()), now, here=OTHER)
    assert where.unrecorded == ("hanzi-mini",)


def test_board_digests_split_the_checksums_by_board() -> None:
    """One digest per board, each that of its own records only: adding a board leaves the
    others' digests as they were."""
    both = {**CHECKSUMS, "hanzi-mini/y.json": "2" * 64}
    digests = fingerprint.board_digests(both)
    assert digests["glyphs-mini"] == fingerprint.board_digests(CHECKSUMS)["glyphs-mini"]
    assert digests["hanzi-mini"] == fingerprint.board_digest({"hanzi-mini/y.json": "2" * 64})


def test_the_committed_paths_name_every_committed_board() -> None:
    """Each recorded path holds values for every board on the leaderboard at the version
    committed; a board not yet recorded there is allowed only while its path is named in
    the check's warning (CI shows it), so this test lists them."""
    tol = tolerances.load_tolerances(LEADERBOARD_DIR)
    assert tol is not None
    digests = fingerprint.board_digests(tol.checksums)
    for replay in fingerprint.load_paths(LEADERBOARD_DIR):
        stale = {b for b in digests if replay.boards.get(b) != digests[b]}
        assert stale <= UNRECORDED.get(replay.name, set()), (replay.name, sorted(stale))
        assert set(replay.metrics) == set(replay.boards)


#: Boards that landed from one vendor's machine and wait for their other path's recording
#: (dmlbench check --record-path NAME --protocol P on a machine of that path).
UNRECORDED: dict[str, set[str]] = {
    "intel": {
        "hanzi-mini",
        "hanzi-mini@defaults",
        "glyphs-mini",
        "glyphs-mini@defaults",
        "poses-mini",
        "poses-mini@defaults",
        "hangul-mini",
        "hangul-mini@defaults",
    }
}


def test_an_unknown_path_names_every_known_one(tmp_path: Path) -> None:
    here = {"weights_sha256": "f" * 64, "metrics_sha256": "f" * 64}
    where = fingerprint.locate(_board(tmp_path, _path()), CHECKSUMS, here=here)
    assert where.replay is None and where.why_not is not None
    assert "ffffffffffff" in where.why_not and "'intel'" in where.why_not
    assert "bbbbbbbbbbbb" in where.why_not and "--record-path" in where.why_not


def test_a_damaged_or_misnamed_path_file_is_one_line(tmp_path: Path) -> None:
    folder = _board(tmp_path, _path())
    renamed = folder / fingerprint.PATHS / "amd.yaml"
    (folder / fingerprint.PATHS / "intel.yaml").rename(renamed)
    with pytest.raises(DmlbenchError, match="names the path 'intel', not 'amd'"):
        fingerprint.load_paths(folder)
    renamed.write_text("name: amd\nmetrics: {}\n")
    with pytest.raises(DmlbenchError, match=r"amd\.yaml: not a numeric path's file"):
        fingerprint.load_paths(folder)


def test_the_check_compares_with_this_paths_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a recorded path the reference is that path's re-run; on the board's path, or an
    unknown one (with a warning naming the way out), the committed records."""
    from dmlbench.records import Record

    folder = _board(tmp_path, _path())
    tol = tolerances.load_tolerances(LEADERBOARD_DIR)
    assert tol is not None
    tol = tol.model_copy(update={"checksums": CHECKSUMS})
    record = Record.model_construct(metrics={"recall@1": 0.4})
    board = {"glyphs-mini": {"contrastive": record}}
    notes: list[str] = []
    for here, expected in [
        (OTHER, 0.5),
        (BOARD, 0.4),
        ({"weights_sha256": "9", "metrics_sha256": "9"}, 0.4),
    ]:
        monkeypatch.setattr(fingerprint, "this_machine", lambda here=here: here)
        ref, unrecorded = check.reference_metrics(folder, tol, board, notes.append)
        assert ref["glyphs-mini", "contrastive"]["recall@1"] == expected
        assert unrecorded == ()
    assert "path 'intel'" in notes[0] and "--record-path NAME" in notes[-1] and len(notes) == 2


def test_a_board_added_since_the_path_was_recorded_is_compared_with_its_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a recorded path, a board the path holds no values for is compared with its
    committed records, with a warning that names the command recording it; the recorded
    boards keep their path's values."""
    from dmlbench.records import Record

    folder = _board(tmp_path, _path())
    tol = tolerances.load_tolerances(LEADERBOARD_DIR)
    assert tol is not None
    tol = tol.model_copy(update={"checksums": {**CHECKSUMS, "hanzi-mini/y.json": "2" * 64}})
    board = {
        "glyphs-mini": {"contrastive": Record.model_construct(metrics={"recall@1": 0.4})},
        "hanzi-mini": {"contrastive": Record.model_construct(metrics={"recall@1": 0.3})},
    }
    notes: list[str] = []
    monkeypatch.setattr(fingerprint, "this_machine", lambda: OTHER)
    ref, unrecorded = check.reference_metrics(folder, tol, board, notes.append)
    assert unrecorded == ("hanzi-mini",)
    assert ref["glyphs-mini", "contrastive"]["recall@1"] == 0.5  # the path's value
    assert ref["hanzi-mini", "contrastive"]["recall@1"] == 0.3  # the committed record's
    assert "--record-path intel --protocol hanzi-mini" in notes[-1]
    assert "cannot promise" in notes[-1]


def test_record_path_refuses_where_there_is_nothing_to_record(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No values for the board's own path (its records are the values), no name that is not
    a plain word, and no second name for a recorded path: each one line, before any run."""
    tol = tolerances.load_tolerances(LEADERBOARD_DIR)
    assert tol is not None
    monkeypatch.setattr(check, "off_path", lambda _tol: None)
    with pytest.raises(DmlbenchError, match="lower-case"):
        check.record_path(LEADERBOARD_DIR, "../Intel")
    committed = fingerprint.load(LEADERBOARD_DIR)
    assert committed is not None
    monkeypatch.setattr(fingerprint, "this_machine", lambda: committed)
    with pytest.raises(DmlbenchError, match="reproduces the board's own records"):
        check.record_path(LEADERBOARD_DIR, "again")
    for recorded in fingerprint.load_paths(LEADERBOARD_DIR):
        monkeypatch.setattr(fingerprint, "this_machine", lambda r=recorded: r.model_dump())
        with pytest.raises(DmlbenchError, match=f"this machine is on '{recorded.name}'"):
            check.record_path(LEADERBOARD_DIR, f"{recorded.name}-2")


def test_record_path_of_some_boards_keeps_the_others_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--record-path intel --protocol P``: re-runs only P's boards (a stand-in for the
    training here) and writes their values and digests beside the file's values of the other
    boards, unchanged to the bit (emoji-mini: a board the path holds current values of)."""
    import shutil

    from dmlbench.records import Record

    folder = tmp_path / "leaderboard"
    shutil.copytree(LEADERBOARD_DIR, folder)
    [before] = [p for p in fingerprint.load_paths(folder) if p.name == "intel"]
    monkeypatch.setattr(check, "off_path", lambda _tol: None)
    monkeypatch.setattr(fingerprint, "this_machine", lambda: before.model_dump())
    ran: list[str] = []

    def fake_run(lb_dir, names, methods, progress, on_entry, *args, **kwargs):  # type: ignore[no-untyped-def]
        ran.extend(names)
        for n in names:
            for i, m in enumerate(before.metrics[n]):
                record = Record.model_construct(metrics={"recall@1": 0.125})
                on_entry(check.CheckedEntry(i, 0, n, m, 0.0, record, []))
        return []

    monkeypatch.setattr(check, "run_check", fake_run)
    check.record_path(folder, "intel", names=["emoji-mini", "emoji-mini@defaults"])
    [after] = [p for p in fingerprint.load_paths(folder) if p.name == "intel"]
    assert ran == ["emoji-mini", "emoji-mini@defaults"]
    current = {b: d for b, d in before.boards.items() if b not in UNRECORDED["intel"]}
    assert after.boards == current  # the values of boards regenerated since are dropped
    assert set(after.metrics) == set(current)
    for n in after.metrics:
        changed = n.startswith("emoji-mini")
        assert (after.metrics[n] == before.metrics[n]) != changed
    assert after.metrics["emoji-mini"]["contrastive"] == {"recall@1": 0.125}
