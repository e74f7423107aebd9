"""Titles say which board and which budget; notes under a board's table say what it leaves out."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import pytest

from dmlbench.protocol import load_protocol
from dmlbench.records import ProtocolRef, Record
from dmlbench.report.build import build_reports
from dmlbench.report.titles import (
    board_title,
    budget_words,
    search_studies,
    search_trials,
    wrap_title,
)
from tests.report.test_build import rec

DEFAULTS_WORDS = "paper defaults, no search"


def board(
    name: str, h: str, search: dict[str, int] | None = None, version: int = 1
) -> list[Record]:
    """Two trained methods and the untrained row over two seeds (a forest plot is drawn)."""
    out = []
    for seed in range(2):
        for method, value in (("a", 0.8), ("b", 0.6), ("untrained", 0.1)):
            r = rec(method, seed, h, name, m={"recall@1": value + 0.01 * seed})
            update: dict[str, Any] = {
                "protocol": r.protocol.model_copy(update={"version": version})
            }
            if search and method != "untrained":
                update["search"] = dict(search)
            out.append(r.model_copy(update=update))
    return out


def test_tuned_and_defaults_boards_name_their_budget_everywhere(tmp_path: Path) -> None:
    """The shipped protocol is rebuilt from the records' name and its hash checked, so the
    title states its declared search budget: in the Markdown heading, the HTML title and
    heading, and the forest plot's title; several search studies are named as such."""
    tuned = load_protocol("glyphs-mini")
    defaults = tuned.without_search()
    assert tuned.search.trials == 4 and tuned.search.studies == 3
    records = [
        *board(tuned.name, tuned.hash, version=tuned.version),
        *board(defaults.name, defaults.hash, version=defaults.version),
    ]
    build_reports(records, tmp_path)
    expected = [
        (tuned, "tuned: 3 searches of 4 trials per method on validation classes"),
        (defaults, DEFAULTS_WORDS),
    ]
    for protocol, words in expected:
        stem = f"{protocol.name}-{protocol.short_hash}"
        margin = "; equivalence margin ±3 points"  # verdicts are printed: δ is in the title
        title = (
            f"{protocol.name} v{protocol.version}, {words}{margin} (protocol hash "
            f"{protocol.short_hash})"
        )
        md = (tmp_path / f"{stem}.md").read_text(encoding="utf-8")
        assert md.splitlines()[0] == f"## {title}"
        html = (tmp_path / f"{stem}.html").read_text(encoding="utf-8")
        assert f"<title>{title}</title>" in html and f"<h1>{title}</h1>" in html
        svg = (tmp_path / f"{stem}-forest.svg").read_text(encoding="utf-8")
        assert "equivalence margin" in svg and f"(protocol hash {protocol.short_hash})" in svg
        assert words in (tmp_path / f"{stem}.tex").read_text(encoding="utf-8")  # the caption


def test_budget_from_the_records_when_the_protocol_cannot_be_rebuilt() -> None:
    """A user's protocol (not shipped) or a shipped name with another hash: the records say
    what was spent; a shipped name never lends its budget to records of another hash."""
    mine = ProtocolRef(name="mine", version=1, hash="a" * 64)
    assert search_trials(mine, board("mine", "a" * 64, {"trials": 5})) == 5
    trials = [rec("a", 0, "a" * 64, "mine", stage="search-trial") for _ in range(3)]
    assert search_trials(mine, trials) == 3
    assert search_trials(mine, board("mine", "a" * 64)) == 0
    stale = ProtocolRef(name="glyphs-mini", version=1, hash="f" * 64)
    assert board_title(stale, board("glyphs-mini", "f" * 64)) == (
        f"glyphs-mini v1, {DEFAULTS_WORDS} (protocol hash {'f' * 12})"
    )
    assert budget_words(20) == "tuned: 20-trial search per method on validation classes"
    studied = board("mine", "a" * 64, {"trials": 4, "studies": 3})
    assert search_studies(mine, studied) == 3 and search_studies(mine, trials) == 1
    assert board_title(mine, studied) == (
        "mine v1, tuned: 3 searches of 4 trials per method on validation classes "
        f"(protocol hash {'a' * 12})"
    )


def test_plot_titles_break_before_the_hash() -> None:
    title = board_title(ProtocolRef(name="mine", version=1, hash="a" * 64), [])
    assert wrap_title(title, 200) == title
    assert wrap_title(title, 40).splitlines() == [
        f"mine v1, {DEFAULTS_WORDS}",
        f"(protocol hash {'a' * 12})",
    ]


def test_notes_are_printed_with_their_boards_table(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Notes keyed by protocol name appear under that board's table in the Markdown and in
    its Results section on the HTML page (with the caption, above the sortable table), not
    with another board's or with the runs with overrides."""
    records = [*board("p", "a" * 64), *board("q", "b" * 64)]
    records.append(rec("a", 0, "a" * 64, "p", overrides={"max_steps": 1}))
    note = "dreml is not on this board: 12 networks per step exceed the CI budget."
    with caplog.at_level(logging.WARNING):
        build_reports(records, tmp_path, notes={"p": [note, "Second line."], "typo": ["x"]})
    md = (tmp_path / f"p-{'a' * 12}.md").read_text(encoding="utf-8")
    table_end = max(i for i, line in enumerate(md.splitlines()) if line.startswith("|"))
    under = md.splitlines()[table_end + 1 :]
    assert note in under and under.index(note) < under.index("Second line.")
    html = (tmp_path / f"p-{'a' * 12}.html").read_text(encoding="utf-8")
    results = re.search(r"<h2>Results</h2>(.*?)<h2>", html, re.S)
    assert results is not None and f'<p class="note">{note}</p>' in results.group(1)
    assert results.group(1).index(note) < results.group(1).index("</table>")
    for stem in (f"q-{'b' * 12}", f"p-{'a' * 12}-overrides"):
        for ext in ("md", "html"):
            assert note not in (tmp_path / f"{stem}.{ext}").read_text(encoding="utf-8")
    assert "notes for typo" in caplog.text
