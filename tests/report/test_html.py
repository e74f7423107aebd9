"""The HTML page: parses, is self-contained, shows the tables, every <img> it references exists."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import pandas as pd

from dmlbench.report.html import Page, html_table, render_page
from tests.report.test_build import built

__all__ = ["built"]  # the module-scoped fixture: one build shared by this file's tests


class PageParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.images: list[str] = []
        self.tables = 0
        self.headings: list[str] = []
        self.external: list[str] = []
        self.open: list[str] = []
        self._h2 = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag not in {"meta", "img", "br"}:
            self.open.append(tag)
        if tag == "img":
            self.images.append(a["src"] or "")
        elif tag == "table":
            self.tables += 1
        elif tag == "h2":
            self._h2 = True
        elif tag in {"link", "script", "iframe"} or (tag == "style" and "src" in a):
            self.external.append(tag)

    def handle_endtag(self, tag: str) -> None:
        assert self.open and self.open[-1] == tag, f"</{tag}> closes <{self.open[-1:]}>"
        self.open.pop()
        self._h2 = False

    def handle_data(self, data: str) -> None:
        if self._h2:
            self.headings.append(data)


def parse(path: Path) -> PageParser:
    parser = PageParser()
    parser.feed(path.read_text(encoding="utf-8"))
    parser.close()
    assert parser.open == [], f"unclosed tags {parser.open}"
    return parser


def test_every_page_parses_and_its_images_exist(built: tuple[Path, list[Path]]) -> None:
    tmp_path = built[0]
    pages = sorted(p for p in tmp_path.glob("*.html") if p.name != "index.html")
    assert len(pages) == 3
    for page in pages:
        p = parse(page)
        assert p.external == [], "the page must not load CSS/JS from elsewhere"
        assert p.images, f"{page.name}: no plot"
        for src in p.images:
            assert not src.startswith(("http:", "https:", "/")), src
            image = page.parent / src
            assert image.is_file(), f"{page.name} references missing {src}"
            assert image.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert {
            "Results",
            "Confidence and selection",
            "Plots",
            "Tuning budget",
            "Ranking across data sets",
        } <= set(p.headings)


def test_cub_page_shows_results_comparison_budget_and_ranking(
    built: tuple[Path, list[Path]],
) -> None:
    tmp_path = built[0]
    page = tmp_path / "cub200-cccccccccccc.html"
    p = parse(page)
    assert p.tables == 5  # results, confidence, reported vs reproduced, budget, ranking
    text = page.read_text()
    assert "c" * 64 in text  # the full protocol hash
    assert "<strong>" in text and "**" not in text
    glyph = parse(tmp_path / "glyphs-mini-dddddddddddd.html")
    assert glyph.tables == 4  # no published setting: no comparison table
    assert "No published setting" in (tmp_path / "glyphs-mini-dddddddddddd.html").read_text()


def test_cells_are_escaped() -> None:
    df = pd.DataFrame({"recall@1": ["<b>x</b>", "**1.0 ± 0.1**"]}, index=["a&b", "c"])
    out = html_table(df)
    assert "&lt;b&gt;x&lt;/b&gt;" in out and "a&amp;b" in out
    assert "<strong>1.0 ± 0.1</strong>" in out
    page = Page(
        title="t<script>",
        protocol="p",
        version=1,
        protocol_hash="h",
        results=df,
        caption="one seed (0): no spread, no significance claimed",
        images=["x.png"],
    )
    html = render_page(page)
    assert "<script>" not in html and "t&lt;script&gt;" in html


def test_index_links_every_page_and_shows_sweep_plots(tmp_path: Path) -> None:
    import re

    from dmlbench.report.build import build_reports
    from dmlbench.report.plots import sweep_name
    from tests.report.test_build import rec

    records = [rec("a", 0, h="e" * 64, name="glyphs-mini")]
    for i, size in enumerate(["16", "32"]):
        name = sweep_name("glyphs-mini", "model.embedding_size", size)
        records += [rec(m, s, h=str(i) * 64, name=name, m={"recall@1": 0.3 + 0.1 * i + 0.01 * s})
                    for m in ("a", "b") for s in (0, 1)]  # fmt: skip
    build_reports(records, tmp_path)
    index = tmp_path / "index.html"
    p = parse(index)
    assert p.external == [] and "Sweeps" in p.headings
    links = re.findall(r'<a href="([^"]+)"', index.read_text())
    assert all((tmp_path / href).is_file() for href in links)
    assert len([h for h in links if h.endswith(".html")]) == 3
    assert len([h for h in links if "-forest." in h]) == 4  # two sweep points judged, PNG + SVG
    assert not [h for h in links if "-cd." in h]
    assert p.images == ["sweep-glyphs-mini-model.embedding_size.png"]
    assert (tmp_path / p.images[0]).read_bytes()[:4] == b"\x89PNG"
