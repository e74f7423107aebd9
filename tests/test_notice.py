"""The licences hold: LICENSE matches pyproject, and every committed image made from
third-party art is credited in NOTICE.md and, where a docs page shows it, under the figure.

The figures of docs/datasets/ are renderings of emoji and icon art (CC-BY-4.0, CC-BY-SA-4.0,
CC-BY-SA-3.0, LGPL-3+, GPL-2+): shown without credit, licence and a note of changes, they
broke those licences. A new figure of art must be added to NOTICE.md before it is committed.
"""

from __future__ import annotations

import re
import subprocess
from fnmatch import fnmatch
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTICE = ROOT / "NOTICE.md"
ART_FIGURES = {  # committed image -> the licences its credit must name
    "docs/datasets/emoji.png": ("CC-BY-4.0", "CC-BY-SA-4.0", "OFL-1.1"),
    "docs/datasets/icons.png": ("CC-BY-SA-3.0", "LGPL-3", "LGPL-3+", "GPL-2+", "public domain"),
}
# Committed images whose names change with the boards (their protocol hashes): a pattern, its
# NOTICE.md section (headed by the pattern) and the licences it must name. The retrieval grids
# show the data sets' test images, drawn from emoji and icon art and from fonts.
ART_PATTERNS = {
    "reports/leaderboard/emoji-mini*/grid.png": ("CC-BY-4.0", "CC-BY-SA-4.0", "OFL-1.1"),
    "reports/leaderboard/icons-mini*/grid.png": (
        "CC-BY-SA-3.0", "LGPL-3", "LGPL-3+", "GPL-2+", "public domain", "licences.yaml",
    ),
    "reports/leaderboard/glyphs-mini*/grid.png": ("Bitstream Vera", "OFL-1.1"),
}  # fmt: skip
NOT_ART = ("docs/leaderboard-page.png", "reports/")  # drawn by dmlbench from its records


def tracked_images() -> list[str]:
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z", "*.png", "*.svg", "*.jpg", "*.jpeg", "*.gif", "*.webp"],
            cwd=ROOT, capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return [name for name in out.split("\0") if name]


def test_the_licence_file_is_mit_as_pyproject_says() -> None:
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License") and "Copyright (c) dmlbench contributors" in text
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")  # no tomllib on 3.10
    assert re.search(r'^license = \{ text = "MIT" \}$', pyproject, re.M)


def test_every_committed_image_is_credited_or_known_not_to_be_art() -> None:
    images = tracked_images()
    assert set(ART_FIGURES) <= set(images)
    patterned = [i for i in images if any(fnmatch(i, p) for p in ART_PATTERNS)]
    unknown = [
        i
        for i in images
        if i not in ART_FIGURES and i not in patterned and not i.startswith(NOT_ART)
    ]
    assert not unknown, f"add to NOTICE.md (and ART_FIGURES) or NOT_ART: {unknown}"


@pytest.mark.parametrize("pattern", sorted(ART_PATTERNS))
def test_notice_credits_every_committed_grid_of_art(pattern: str) -> None:
    """A retrieval grid of emoji, icons or glyphs is the data set's images: credited in
    NOTICE.md under its pattern, and under the figure on every page that shows it."""
    grids = [i for i in tracked_images() if fnmatch(i, pattern)]
    if not grids:
        pytest.skip(f"no committed image matches {pattern}")
    text = NOTICE.read_text(encoding="utf-8")
    assert f"### `{pattern}`\n" in text, f"NOTICE.md has no section for {pattern}"
    section = text.split(f"### `{pattern}`\n", 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]
    for licence in ART_PATTERNS[pattern]:
        assert licence in section, (pattern, licence)
    assert "**Changes:**" in section and "**Licence of the figure:**" in section
    for grid in grids:
        board = Path(grid).parent
        pages = [ROOT / f"{board}.html", *sorted((ROOT / board).glob("*.html"))]
        shown = [p for p in pages if f'src="{board.name}/grid.png"' in p.read_text("utf-8")
                 or 'src="grid.png"' in p.read_text("utf-8")]  # fmt: skip
        assert shown, f"{grid} is shown on no page"
        for page in shown:
            html = page.read_text(encoding="utf-8")
            caption = html.split("grid.png", 2)[-1].split("</figcaption>", 1)[0]
            assert "NOTICE.md" in caption, page
            if "CC-BY-SA-4.0" in ART_PATTERNS[pattern]:
                assert "CC-BY-SA" in caption, page


@pytest.mark.parametrize("figure", sorted(ART_FIGURES))
def test_notice_names_source_licence_and_changes(figure: str) -> None:
    text = NOTICE.read_text(encoding="utf-8")
    section = text.split(f"### `{figure}`\n", 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]
    for licence in ART_FIGURES[figure]:
        assert licence in section, (figure, licence)
    assert "**Changes:**" in section and "**Licence of the figure:**" in section
    assert len(re.findall(r"https://", section)) >= 4  # a link per source


@pytest.mark.parametrize("figure", sorted(ART_FIGURES))
def test_the_page_showing_a_figure_credits_it_under_the_figure(figure: str) -> None:
    """ShareAlike: the licence of the derived figure is stated where it is shown."""
    shown = 0
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = page.read_text(encoding="utf-8")
        link = Path(figure).relative_to("docs").as_posix() if page.parent.name == "docs" else figure
        for m in re.finditer(
            rf"!\[([^\]]*)\]\({re.escape(link)}\)\n\n(\*Figure:.*?\*)\n", text, re.S
        ):
            shown += 1
            alt, caption = m.groups()
            assert "CC-BY-SA" in alt and "CC-BY-SA" in caption, page.name
            assert "NOTICE.md" in caption, page.name
    assert shown >= 1, f"{figure} is shown nowhere with a caption"
