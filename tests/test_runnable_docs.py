"""Every code block of docs/ marked runnable runs as written, so drift fails here, not for a reader.

The convention (docs/development.md, "Runnable examples"): an HTML comment on the line just
before a fence, ``<!-- runnable -->`` or ``<!-- runnable: FIXTURE ... -->``, marks a ``bash``
or ``python`` block that a reader can run as written on the embedded data. A page's marked
blocks run in order in one fresh folder (the working folder, as a reader's would be), with
the data cache of the session; the named fixtures are put there first (:data:`FIXTURES`). A
``bash`` block may hold only ``dmlbench`` commands (comments and ``\\`` continuations
allowed): each runs in this process, its globs expanded as a shell would, and must exit 0.
A ``python`` block is executed and must not raise.

docs/evaluate.md's "From a kept run" block was the first to drift: written for 24 px
glyphs-mini, it failed on v4's 16 px images ("mat1 and mat2 shapes cannot be multiplied").
"""

from __future__ import annotations

import contextlib
import glob
import io
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from dmlbench.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted((ROOT / "docs").glob("*.md"))
MARKER = re.compile(r"^<!-- runnable(?::[ \t]*(?P<fixtures>[\w \t-]*?))?[ \t]*-->$", re.M)
FENCE = re.compile(r"```(?P<lang>\w*)\n(?P<body>.*?)^```", re.S | re.M)


@dataclass(frozen=True)
class Block:
    """One marked block: its page, line, language, body, section heading and fixtures."""

    page: str
    line: int
    lang: str
    body: str
    heading: str
    fixtures: tuple[str, ...]

    @property
    def where(self) -> str:
        return f"docs/{self.page}:{self.line}"


def runnable_blocks(path: Path) -> list[Block]:
    """The blocks of ``path`` marked runnable, in page order."""
    text = path.read_text(encoding="utf-8")
    blocks = []
    for marker in MARKER.finditer(text):
        fence = FENCE.match(text, marker.end() + 1)  # the fence starts on the next line
        if fence is None:
            raise AssertionError(f"docs/{path.name}: a runnable marker not followed by a fence")
        before = text[: marker.start()]
        headings = re.findall(r"^#+ (.+)$", before, re.M)
        blocks.append(
            Block(
                page=path.name,
                line=before.count("\n") + 2,  # the fence's line, 1-based
                lang=fence["lang"],
                body=fence["body"],
                heading=headings[-1] if headings else "",
                fixtures=tuple((marker["fixtures"] or "").split()),
            )
        )
    return blocks


BLOCKS = [block for page in DOCS for block in runnable_blocks(page)]
PAGES = sorted({b.page for b in BLOCKS})


def make_results(folder: Path) -> None:
    """A results folder of your own runs (two seeds) beside a committed leaderboard seed."""
    from dmlbench.records import record_path, save_record
    from tests.report.test_build import rec

    for seed, recall in ((0, 0.6), (1, 0.7)):
        r = rec("npairs", seed, "a" * 64, "glyphs-mini", m={"recall@1": recall})
        save_record(r, record_path(folder / "results", "glyphs-mini", "a" * 64, "npairs", seed))
    board = rec("npairs", 7, "a" * 64, "glyphs-mini", m={"recall@1": 0.0})
    save_record(
        board, record_path(folder / "results" / "leaderboard", "glyphs-mini", "a" * 64, "npairs", 7)
    )


def make_letters(folder: Path) -> None:
    """``my_letters/``: two small images of the kinds a reader has (PNG, JPEG)."""
    from PIL import Image

    (folder / "my_letters").mkdir()
    for name, colour in (("a.png", 0), ("b.jpg", 200)):
        Image.new("RGB", (40, 30), (colour, colour, 255 - colour)).save(
            folder / "my_letters" / name
        )


FIXTURES: dict[str, Callable[[Path], None]] = {"results": make_results, "my_letters": make_letters}


def commands(body: str) -> list[list[str]]:
    """The ``dmlbench`` commands of a bash block (continuations joined, comments dropped)."""
    out = []
    for line in re.sub(r"\\\n\s*", " ", body).splitlines():
        words = shlex.split(line, comments=True)
        if not words:
            continue
        if words[0] != "dmlbench":
            raise AssertionError(f"a runnable bash block holds only dmlbench commands: {line!r}")
        out.append(words)
    return out


def expand(words: list[str]) -> list[str]:
    """A shell's glob expansion: a word with ``*`` becomes its matches (none: an error)."""
    out = []
    for word in words:
        if "*" in word:
            matches = sorted(glob.glob(word))
            if not matches:
                raise AssertionError(f"{word}: no file matches")
            out += matches
        else:
            out.append(word)
    return out


def run_block(block: Block, folder: Path) -> str:
    """Run one block in ``folder`` (the working folder); its standard output."""
    for name in block.fixtures:
        FIXTURES[name](folder)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        if block.lang == "bash":
            for words in commands(block.body):
                status = main(expand(words)[1:])
                assert status == 0, f"{block.where}: `{shlex.join(words)}` exited {status}"
        elif block.lang == "python":
            exec(compile(block.body, block.where, "exec"), {"__name__": "__main__"})
        else:
            raise AssertionError(f"{block.where}: a runnable block is bash or python")
    return out.getvalue()


def test_the_marked_blocks_are_found() -> None:
    """The evaluate.md example of the issue is among them, and every fixture named exists."""
    assert any(b.page == "evaluate.md" and "evaluate_external" in b.body for b in BLOCKS)
    assert len(BLOCKS) >= 5
    for block in BLOCKS:
        assert block.lang in ("bash", "python"), block.where
        assert set(block.fixtures) <= set(FIXTURES), block.where


def test_development_md_lists_every_runnable_block() -> None:
    """docs/development.md names each covered block by page and section, so the list holds."""
    text = (ROOT / "docs" / "development.md").read_text(encoding="utf-8")
    listed = text.split("## Runnable examples", 1)[1].split("\n## ", 1)[0]
    for block in BLOCKS:
        assert f"docs/{block.page}, “{block.heading}”" in listed, block.where


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES)
def test_a_pages_runnable_blocks_run_as_written(
    page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page's marked blocks, in order, in one fresh working folder."""
    monkeypatch.chdir(tmp_path)
    for block in [b for b in BLOCKS if b.page == page]:
        printed = run_block(block, tmp_path)
        if block.lang == "python" and "load_results" in block.body:
            assert "0.65" in printed  # your two seeds' mean, no committed seed averaged in


def test_a_failing_block_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner can fail: a wrong flag, a missing file, a raising snippet, a shell line."""
    monkeypatch.chdir(tmp_path)
    bad = [
        Block("x.md", 1, "bash", "dmlbench run --no-such-flag\n", "", ()),
        Block(
            "x.md", 1, "bash", "dmlbench embed --record results/*/none.json --out x.npz\n", "", ()
        ),
        Block("x.md", 1, "python", "raise RuntimeError('drift')\n", "", ()),
        Block("x.md", 1, "bash", "rm -rf results\n", "", ()),
    ]
    for block in bad:
        with pytest.raises((AssertionError, SystemExit, RuntimeError)):
            run_block(block, tmp_path)


def test_the_leaderboard_reproduce_block_is_the_readme_command() -> None:
    """docs/leaderboard.md's defaults row is the README's, which
    tests/leaderboard/test_readme_reproduce.py re-runs to the last bit: not run twice."""
    text = (ROOT / "docs" / "leaderboard.md").read_text(encoding="utf-8")
    section = text.split("## Reproducing one committed row", 1)[1]
    shown = shlex.split(FENCE.search(section)["body"], comments=True)  # type: ignore[index]
    [readme] = [
        shlex.split(line, comments=True)
        for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
        if "# a defaults row" in line
    ]
    assert shown == readme
