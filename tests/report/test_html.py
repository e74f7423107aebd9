"""The HTML pages: parse, are self-contained (inline style and script, nothing fetched), show
the tables, every <img> they reference exists; the index shows each board with its filters."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd

from dmlbench.records import ExternalModel, Record
from dmlbench.report.html import Page, asset, html_table, render_page
from dmlbench.report.index_page import render_index
from dmlbench.report.tables import Shown
from tests.report.test_build import built, rec

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
        if tag not in {"meta", "img", "br", "input"}:
            self.open.append(tag)
        if tag == "img":
            self.images.append(a["src"] or "")
        elif tag == "table":
            self.tables += 1
        elif tag == "h2":
            self._h2 = True
        elif tag in {"link", "iframe"} or (tag in {"script", "style"} and "src" in a):
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
            "Across data sets",
        } <= set(p.headings)


def test_cub_page_shows_results_comparison_budget_and_ranking(
    built: tuple[Path, list[Path]],
) -> None:
    tmp_path = built[0]
    page = tmp_path / "cub200-cccccccccccc.html"
    p = parse(page)
    assert p.tables == 5  # results, confidence, reported vs reproduced, budget, across data sets
    text = page.read_text()
    across = text.split("<h2>Across data sets</h2>")[1]
    assert '<a href="cross-dataset.md">' in across and "<th>cub200 verdict</th>" in across
    assert (
        '<td>proxy-nca</td><td>undecided</td><td data-value="1.0">1</td>' in across
    )  # not elsewhere
    assert "c" * 64 in text  # the full protocol hash
    assert "<strong>" in text and "**" not in text
    glyph = parse(tmp_path / "glyphs-mini-dddddddddddd.html")
    assert glyph.tables == 4  # no published setting: no comparison table
    assert "No published setting" in (tmp_path / "glyphs-mini-dddddddddddd.html").read_text()


def test_index_shows_the_boards_side_by_side_and_links_the_report(
    built: tuple[Path, list[Path]],
) -> None:
    index = (built[0] / "index.html").read_text(encoding="utf-8")
    across = index.split("<h2>Across data sets</h2>")[1]
    assert '<a href="cross-dataset.md">cross-dataset.md</a>' in across
    heads = re.findall(r"<th>([^<]*)</th>", across.split("</thead>")[0])
    assert heads == ["method", "cub200 verdict", "cub200 rank", "glyphs verdict", "glyphs rank",
                     "glyphs-mini verdict", "glyphs-mini rank", "data sets", "mean rank"]  # fmt: skip


def test_cells_are_escaped() -> None:
    df = pd.DataFrame({"recall@1": ["<b>x</b>", "**1.0 ± 0.1**"]}, index=["a&b", "c"])
    out = html_table(df)
    assert "&lt;b&gt;x&lt;/b&gt;" in out and "a&amp;b" in out
    assert '<strong>1.0<span class="sd"> ± 0.1</span></strong>' in out  # spread in small print
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
    assert "t<script>" not in html and "<title>t&lt;script&gt;</title>" in html


def external_record(name: str, h: str, protocol: str) -> Record:
    """A model trained elsewhere, scored on ``protocol``'s test split."""
    model = ExternalModel(name=name, trained_by="x", trained_on="ImageNet-1k", embedding_size=8)
    fields = rec(name, 0, h, protocol, m={"recall@1": 0.99}).model_dump()
    return Record.model_validate(fields | {"stage": "external", "external": model})


def test_index_links_every_page_and_shows_sweep_plots(tmp_path: Path) -> None:
    from dmlbench.report.build import build_reports
    from dmlbench.report.plots import sweep_name

    records = [
        rec("a", 0, h="e" * 64, name="glyphs-mini"),
        external_record("big-net", "e" * 64, "glyphs-mini"),
    ]
    for i, size in enumerate(["16", "32"]):
        name = sweep_name("glyphs-mini", "model.embedding_size", size)
        records += [rec(m, s, h=str(i) * 64, name=name, m={"recall@1": 0.3 + 0.1 * i + 0.01 * s})
                    for m in ("a", "b") for s in (0, 1)]  # fmt: skip
    build_reports(records, tmp_path)
    index = tmp_path / "index.html"
    p = parse(index)
    assert p.external == [] and "Sweeps" in p.headings
    text = index.read_text()
    links = re.findall(r'<a href="([^"#]+)"', text)
    assert all((tmp_path / href).is_file() for href in links)
    pages = [h for h in links if h.endswith(".html") and "/" not in h]
    assert len(pages) == 3
    assert [h for h in links if "/" in h] == ["glyphs-mini-eeeeeeeeeeee/a.html"]  # its page
    # glyphs-mini's hyper-parameters were given, not searched: no tuned board to compare
    across = text.split("<h2>Across data sets</h2>")[1]
    assert "No tuned board" in across and "<table" not in across.split("<h2>")[0]
    assert 'The boards left out and why: <a href="cross-dataset.md">' in across
    anchors = re.findall(r'<a href="#([^"]+)"', text)  # the contents: one per board
    assert sorted(anchors) == sorted(h.removesuffix(".html") for h in pages)
    assert all(f'id="{a}"' in text for a in anchors)
    forests = [i for i in p.images if "-forest." in i]
    assert len(forests) == 2  # two sweep points judged, each board beside its forest plot
    assert not [h for h in links if "-cd." in h]
    assert [i for i in p.images if i not in forests] == [
        "sweep-glyphs-mini-model.embedding_size.png"
    ]
    assert all((tmp_path / i).read_bytes()[:4] == b"\x89PNG" for i in p.images)
    for page in (index, tmp_path / f"glyphs-mini-{'e' * 12}.html"):  # external: own table
        board = page.read_text().split('<section class="board" id="glyphs-mini-e')[-1]
        ranked, _, external = board.split("</section>")[0].partition("scroll external")
        assert "big-net" in external and "ImageNet-1k" in external
        assert '<td><a href="glyphs-mini-eeeeeeeeeeee/a.html">a</a></td>' in ranked
        assert "big-net" not in ranked and "<th>section</th>" not in board


COLUMNS = ["recall@1", "recall@2", "recall@4", "recall@8", "map@r", "r_precision", "nmi"]
VERDICT_COLUMNS = ["seeds", "vs best of others (95% CI)", "verdict", "P(rank 1)", "P(top 3)"]
# method: Recall@1 mean, verdict. gamma's 9.5 sorts above 60.8 as text, not as a number.
BOARD = {
    "alpha": (60.8, "worse"),
    "beta": (72.0, "undecided"),
    "gamma": (9.5, "worse"),
    "delta": (71.5, "equivalent"),
    "epsilon": (55.0, "worse"),
    "untrained": (12.2, "—"),
}


def synthetic_page(external: bool = True) -> Page:
    """A 13-column board as build_reports displays it (rows in no particular order), with an
    external model's row marked as the report's external section marks it."""
    rows = {}
    for method, (r1, verdict) in BOARD.items():
        metrics = [  # each cell keeps its mean, as format_table's do
            Shown(f"{r1 + 2 * i:.1f} ± 1.{i}", (r1 + 2 * i) / 100) for i in range(len(COLUMNS))
        ]
        judged = verdict != "—"
        rows[method] = [
            *metrics,
            "3",
            f"{r1 - 72.0:+.1f} [-3.0, +3.0]" if judged else "—",
            verdict,
            f"{r1 / 100:.2f}" if judged else "—",
            "1.00" if judged else "—",
            "",
        ]
    results = pd.DataFrame.from_dict(
        rows, orient="index", columns=[*COLUMNS, *VERDICT_COLUMNS, "trained_by"]
    )
    results.insert(0, "section", "protocol")
    if external:
        results.loc["clip-vit"] = ["external", *(["99.0 ± 0.1"] * 7), "1", *[""] * 4, "OpenAI"]
    return Page(
        title="glyphs-mini v3, tuned",
        protocol="glyphs-mini",
        version=3,
        protocol_hash="b" * 64,
        results=results.rename_axis("method"),
        caption="mean ± std over 3 seeds",
        images=["glyphs-mini-bbbbbbbbbbbb-bars.png", "glyphs-mini-bbbbbbbbbbbb-forest.png"],
        claims=["Verdict worse: the interval lies below 0."],
    )


def _rows(table_html: str) -> list[str]:
    return re.findall(r"<tr><td>([^<]+)</td>", table_html)


def test_index_board_is_sortable_filterable_and_keeps_external_models_apart() -> None:
    html = render_index([("glyphs-mini-bbbbbbbbbbbb.html", synthetic_page())], [], {})
    board = html[html.index('<section class="board"') : html.index("</section>")]
    tables = re.findall(r'<table class="sortable">.*?</table>', board, re.S)
    assert len(tables) == 2  # the board's rows, the external model's rows
    assert _rows(tables[0]) == list(BOARD) and _rows(tables[1]) == ["clip-vit"]
    assert "<th>section</th>" not in board and "trained_by" not in tables[0]
    assert "verdict" not in tables[1] and "OpenAI" in tables[1]
    boxes = re.findall(r'class="verdict-filter" value="([^"]+)"', board)
    assert boxes == ["worse", "equivalent", "undecided", "—"]
    assert 'class="method-filter"' in board and 'id="glyphs-mini-bbbbbbbbbbbb"' in board
    assert '<td class="v-worse" data-verdict="worse">worse</td>' in tables[0]
    assert '<td class="v-none" data-verdict="—">—</td>' in tables[0]
    assert '<img src="glyphs-mini-bbbbbbbbbbbb-forest.png"' in board  # beside the table
    assert "-bars.png" not in board
    assert '<a href="glyphs-mini-bbbbbbbbbbbb.html">glyphs-mini v3, tuned</a>' in board


def test_style_and_script_are_inline_and_fetch_nothing(tmp_path: Path) -> None:
    index = tmp_path / "index.html"
    index.write_text(render_index([("p.html", synthetic_page(False))], [], {}), encoding="utf-8")
    p = parse(index)
    assert p.external == []
    text = index.read_text(encoding="utf-8")
    assert text.count("<script>") == 1 and text.count("<style>") == 1
    assert asset("leaderboard.js") in text and asset("leaderboard.css") in text
    for name in ("leaderboard.js", "leaderboard.css"):
        assert not re.search(r"https?:|//[a-z]|@import|fetch\(|XMLHttpRequest", asset(name))
    assert "scroll external" not in text  # no external rows: no empty table for them


def test_assets_ship_with_the_package() -> None:
    import tomllib

    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    data = tomllib.loads(pyproject.read_text(encoding="utf-8"))["tool"]["setuptools"]
    globs = data["package-data"]["dmlbench.report"]
    assets = Path(__file__).resolve().parents[2] / "benchmark" / "report" / "assets"
    shipped = {p.name for g in globs for p in assets.parent.glob(g)}
    assert shipped == {p.name for p in assets.iterdir()} == {"leaderboard.js", "leaderboard.css"}


def test_cells_carry_the_numbers_of_the_frame_not_of_their_text() -> None:
    """A :class:`Shown` cell's number (or a plain count) is written as ``data-value`` for the
    script to sort by; text cells, the missing "—" and headers carry none."""
    df = pd.DataFrame(
        {
            "recall@1": [Shown("**45.9 ± 1.2**", 0.45912), "—"],
            "seeds": [3, 1],
            "verdict": ["worse", "—"],
        },
        index=["a", "b"],
    )
    html = html_table(df)
    assert (
        '<td data-value="0.45912"><strong>45.9<span class="sd"> ± 1.2</span></strong></td>' in html
    )
    assert '<td data-value="3.0">3</td>' in html
    assert html.count("data-value") == 3 and "<th data-value" not in html


NUMBER_LIKE = re.compile(r"^(<strong>)?[-+−\[]?\d")


def test_every_number_in_every_table_carries_its_value(built: tuple[Path, list[Path]]) -> None:
    """The script sorts by ``data-value`` only (no parsing of the text): every cell showing a
    number, in the board, confidence, comparison, budget and across-data-sets tables, has one."""
    pages = sorted(built[0].glob("*.html"))
    checked = 0
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for table in re.findall(r"<table.*?</table>", text, re.S):
            for row in re.findall(r"<tr>(.*?)</tr>", table.split("</thead>")[-1], re.S):
                for attrs, body in re.findall(r"<td([^>]*)>(.*?)</td>", row)[1:]:
                    if NUMBER_LIKE.match(body):
                        assert "data-value=" in attrs, (page.name, body)
                        checked += 1
    assert checked > 50


def test_method_names_link_to_their_pages() -> None:
    page = synthetic_page(external=False)
    page.method_pages = {"beta": "glyphs-mini-bbbbbbbbbbbb/beta.html"}
    for html in (render_page(page), render_index([("g.html", page)], [], {})):
        assert '<td><a href="glyphs-mini-bbbbbbbbbbbb/beta.html">beta</a></td>' in html
        assert "<td>alpha</td>" in html  # no page: no link


def test_the_index_opens_on_the_headline_board() -> None:
    def page(protocol: str, overridden: bool = False) -> Page:
        p = synthetic_page(external=False)
        p.protocol, p.title, p.overridden = protocol, f"{protocol} {overridden}", overridden
        return p

    pages = [("a.html", page("emoji-mini")), ("b.html", page("glyphs-mini", True)),
             ("c.html", page("glyphs-mini"))]  # fmt: skip
    html = render_index(pages, [], {}, headline="glyphs-mini")
    ids = re.findall(r'<section class="board" id="([^"]+)"', html)
    assert ids == ["c", "a", "b"]  # the headline board first, the overridden one keeps its place
    assert re.findall(r'<section class="board" id="([^"]+)"', render_index(pages, [], {})) == [
        "a", "b", "c"
    ]  # fmt: skip
