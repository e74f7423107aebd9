"""Every ``dmlbench …`` command shown in the README and docs/ parses: the subcommand exists
and accepts every flag and value written there (a renamed flag fails here, not for a reader)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from dmlbench.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PLACEHOLDER = "dmlbench <command> --help"  # the one line that names no real command


def shell_blocks(text: str) -> list[str]:
    """The bodies of the README's fenced code blocks in a shell language (or none)."""
    blocks: list[str] = []
    body: list[str] = []
    lang: str | None = None
    for line in text.splitlines():
        if line.startswith("```"):
            if lang is None:
                lang, body = line[3:].strip(), []
            else:
                if lang in ("", "bash", "sh", "console"):
                    blocks.append("\n".join(body))
                lang = None
        elif lang is not None:
            body.append(line)
    return blocks


def readme_commands(text: str) -> list[str]:
    """``dmlbench`` lines of the README's shell code blocks, continuations joined, comments
    dropped."""
    commands = []
    for block in shell_blocks(text):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = line.strip().removeprefix("$ ")
            if line.startswith("dmlbench ") and not line.startswith(PLACEHOLDER):
                commands.append(shlex.split(line, comments=True))
    return [shlex.join(c) for c in commands]


COMMANDS = [c for doc in DOCS for c in readme_commands(doc.read_text(encoding="utf-8"))]


def test_the_readme_shows_commands() -> None:
    assert len(COMMANDS) >= 15


@pytest.mark.parametrize("command", COMMANDS)
def test_a_readme_command_parses(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = shlex.split(command)[1:]
    try:
        args = build_parser().parse_args(argv)
    except SystemExit:
        pytest.fail(f"README: `{command}` does not parse: {capsys.readouterr().err.strip()}")
    assert args.command in argv  # the subcommand named (global options may come first)


def test_a_wrong_flag_in_a_readme_command_would_fail() -> None:
    """The check above can fail: a flag that does not exist is refused by the parser."""
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--no-such-flag"])
