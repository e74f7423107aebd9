"""The command line: help texts, one-line errors with exit status 2, run → report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dmlbench.cli.main import build_parser, main
from tests.cli.runner import run_cli
from tests.test_protocol import BASE

SUBCOMMANDS = ["run", "report", "list", "validate"]


def test_every_subcommand_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    for sub in SUBCOMMANDS:
        assert sub in out
    parser = build_parser()
    actions = [a for a in parser._actions if a.dest == "command"]
    for sub in actions[0].choices:
        with pytest.raises(SystemExit):
            main([sub, "--help"])
        text = capsys.readouterr().out
        assert ("usage: dmlbench" in text and "--" in text) or "positional" in text, sub


@pytest.mark.parametrize(
    ("edit", "fragment"),
    [
        (("model: {", "model: {embeding_size: 3, "), "model.embeding_size: unknown key"),
        (("size: 32", "size: lots"), "batch.size:"),
        (("seeds: [0]\n", ""), "seeds: required key is missing"),
    ],
    ids=["unknown-key", "wrong-type", "missing-field"],
)
def test_bad_protocol_is_one_line_exit_2(
    tmp_path: Path, edit: tuple[str, str], fragment: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(BASE.replace(*edit))
    for argv in (["validate", str(path)], ["run", "--protocol", str(path)]):
        assert_one_error_line(run_cli(*argv), path, fragment)


def test_a_new_process_prints_only_the_error_line(tmp_path: Path) -> None:
    """What the in-process cases cannot see: nothing else reaches stderr from a new
    interpreter (an import-time warning of a library, a traceback on the way out)."""
    path = tmp_path / "bad.yaml"
    path.write_text(BASE.replace("size: 32", "size: lots"))
    for argv in (["validate", str(path)], ["run", "--protocol", str(path)]):
        proc = subprocess.run(
            [sys.executable, "-m", "dmlbench", *argv], capture_output=True, text=True
        )
        assert_one_error_line(proc, path, "batch.size:")


def assert_one_error_line(
    proc: subprocess.CompletedProcess[str], path: Path, fragment: str
) -> None:
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert str(path) in lines[0] and fragment in lines[0]


def test_unknown_method_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--method", "multi-similarty", "--no-progress"]) == 2
    assert "did you mean 'multi-similarity'" in capsys.readouterr().err


def test_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "methods"]) == 0
    out = capsys.readouterr().out
    assert "multi-similarity" in out and "Schroff" in out
    assert main(["list", "methods", "*proxy*"]) == 0
    assert "contrastive" not in capsys.readouterr().out
    assert main(["list", "protocols"]) == 0
    assert "glyphs-mini" in capsys.readouterr().out
    assert main(["validate"]) == 0


def test_run_then_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    proto = tmp_path / "p.yaml"
    proto.write_text(BASE)
    args = [
        "run",
        "--protocol",
        str(proto),
        "--method",
        "contrastive",
        "--seed",
        "0",
        "--max-steps",
        "3",
        "--no-search",
        "--results-dir",
        str(tmp_path / "res"),
        "--reports-dir",
        str(tmp_path / "rep"),
        "--no-progress",
    ]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "| contrastive" in out and "| untrained" in out and "| pixels" in out
    assert "recall@1" in out
    files = sorted((tmp_path / "res").rglob("*.json"))
    assert [f.name.split("-override")[0] for f in files] == [
        "contrastive-seed0-final",
        "pixels-seed0-final",
        "untrained-seed0-final",
    ]
    record = json.loads(files[0].read_text())
    assert record["overrides"] == {"max_steps": 3}
    assert record["protocol"]["hash"] and record["data_fingerprint"] and record["env"]["packages"]
    # resume: the same command reuses the records instead of training again
    stamp = files[0].stat().st_mtime_ns
    assert main(args) == 0
    assert files[0].stat().st_mtime_ns == stamp
    capsys.readouterr()
    assert (
        main(
            [
                "report",
                "--results-dir",
                str(tmp_path / "res"),
                "--reports-dir",
                str(tmp_path / "rep2"),
            ]
        )
        == 0
    )
    assert "| contrastive" in capsys.readouterr().out
    pages = [p for p in (tmp_path / "rep2").glob("*.html") if p.name != "index.html"]
    assert len(pages) == 1 and (tmp_path / "rep2" / "index.html").is_file()


def test_help_into_a_pipe_nobody_reads_ends_quietly() -> None:
    """`dmlbench run --help | head -3`: the reader leaves before the help is written."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "dmlbench", "run", "--help"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    proc.stdout.close()  # before the interpreter has even imported dmlbench
    _, err = proc.communicate(timeout=120)
    assert err == "" and proc.returncode == 141


# The order a study meets the commands: train, then score, then report and check, then the
# housekeeping (each module's ORDER; a folder scan alone would list them alphabetically).
HELP_ORDER = [
    "run", "search", "sweep", "evaluate", "embed", "search-images", "report", "check", "list",
    "validate", "data", "pretrain", "cache",
]  # fmt: skip


def test_commands_are_found_by_scanning_and_listed_in_the_order_of_use() -> None:
    from dmlbench.cli.main import command_modules, command_name

    commands = command_modules()
    names = [command_name(m) for m in commands]
    assert names == HELP_ORDER
    choices = next(a for a in build_parser()._actions if a.dest == "command").choices
    assert list(choices) == HELP_ORDER  # each module is named as its command
    tracked = {n for n, parser in choices.items() if "--track" in parser.format_help()}
    assert tracked == {"run", "search", "sweep"}  # TRAINS = True: the commands that train
    help_text = build_parser().format_help()
    assert [help_text.index(f"\n    {n} ") for n in HELP_ORDER] == sorted(
        help_text.index(f"\n    {n} ") for n in HELP_ORDER
    )


def test_a_new_command_is_its_module(tmp_path: Path) -> None:
    (tmp_path / "hello.py").write_text(
        "ORDER = 15\n\n\n"
        "def add_parser(subparsers):\n"
        "    p = subparsers.add_parser('hello', help='say hello')\n"
        "    p.set_defaults(func=lambda args: print('hello') or 0)\n"
    )
    code = (
        "import dmlbench.cli as cli\n"
        f"cli.__path__.append({str(tmp_path)!r})\n"
        "from dmlbench.cli.main import build_parser, main\n"
        "print([m for m in build_parser()._actions if m.dest == 'command'][0].choices.keys())\n"
        "raise SystemExit(main(['hello']))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    first, second = out.stdout.splitlines()
    assert first.startswith("dict_keys(['run', 'hello', 'search'") and second == "hello"
