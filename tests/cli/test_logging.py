"""``-q`` / ``-v`` / ``--log-file``: what reaches stderr and what the log file keeps."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from dmlbench.cli.main import build_parser, main
from dmlbench.engine import progress
from tests.test_protocol import BASE


@pytest.fixture
def own_logging(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The root logger as a fresh ``dmlbench`` process sees it: pytest's capture handlers
    (added to this list for the test's call) are dropped by :func:`bare`."""
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])
    monkeypatch.setattr(root, "level", logging.WARNING)
    yield
    progress.reset_logging()


def bare(argv: list[str]) -> int:
    """``main(argv)`` with no foreign handler on the root logger, as in a real process."""
    logging.getLogger().handlers.clear()
    return main(argv)


def _argv(tmp_path: Path, *extra: str) -> list[str]:
    proto = tmp_path / "p.yaml"
    proto.write_text(BASE)
    return [
        "run", "--protocol", str(proto), "--method", "contrastive", "--seed", "0",
        "--max-steps", "2", "--no-search", "--results-dir", str(tmp_path / "res"),
        "--reports-dir", str(tmp_path / "rep"), *extra,
    ]  # fmt: skip


def test_progress_lines_quiet_verbose_and_log_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], own_logging: None
) -> None:
    log = tmp_path / "run.log"
    assert bare(["--log-file", str(log), *_argv(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert "  contrastive seed 0 epoch 1/1: loss " in err and "elapsed, ETA" in err
    stamped = r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d   contrastive seed 0 epoch 1/1: loss "
    assert re.search(stamped, log.read_text(), re.M)

    assert bare(["-q", "--log-file", str(log), *_argv(tmp_path, "--force")]) == 0
    assert "epoch 1/1" not in capsys.readouterr().err  # -q: warnings and errors only
    assert len(re.findall(stamped, log.read_text(), re.M)) == 2  # appended, even under -q

    assert bare(["-v", *_argv(tmp_path)]) == 0  # everything reused: says so with -v
    assert "reusing" in capsys.readouterr().err


def test_a_failing_command_ends_its_log_file_with_the_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], own_logging: None
) -> None:
    log = tmp_path / "run.log"
    assert bare(["--log-file", str(log), "run", "--method", "multi-similarty"]) == 2
    assert "did you mean 'multi-similarity'" in capsys.readouterr().err
    assert "error: " in log.read_text() and "multi-similarty" in log.read_text()


def test_track_is_an_option_of_the_commands_that_train() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name, choice in sub.choices.items():
        has = any(a.dest == "track" for a in choice._actions)
        assert has == (name in ("run", "search", "sweep")), name
    with pytest.raises(SystemExit):
        build_parser().parse_args(["-q", "-v", "list"])  # one or the other
