"""The report's script in a real browser: sort a board by a column, filter it by name and verdict;
and the committed leaderboard's index: it opens on the headline board, its forest plots are
legible, and every board has its retrieval grid, embedding map, curves and method pages.

Headless Debian chromium driven by Selenium through the system chromedriver, offline (Selenium
Manager is told not to download a driver). Skipped, with the reason, where either is missing.
The page is built from a small synthetic board, so the test does not depend on the committed
leaderboard's numbers.

By hand, a laptop-sized screenshot of any page, scrolled to an optional anchor (how
docs/leaderboard-page.png is made: the tuned glyphs-mini board)::

    python -m tests.report.test_html_browser reports/leaderboard/index.html \
        docs/leaderboard-page.png glyphs-mini-319b3ae60807
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from dmlbench.report.index_page import render_index
from dmlbench.report.tables import Shown
from tests.report.test_html import BOARD, synthetic_page

LAPTOP = (1366, 768)
BUDGET_COUNTS = [
    "trials",
    "complete",
    "pruned",
    "search_epochs",
    "finals",
    "seeds",
    "epochs",
    "steps",
]


def browser_paths() -> tuple[str | None, str | None]:
    """The Debian chromium binary (not its shell launcher) and the system chromedriver."""
    binary = next(
        (
            p
            for p in ("/usr/lib/chromium/chromium", shutil.which("chromium"))
            if p and Path(p).is_file()
        ),
        shutil.which("chromium-browser") or shutil.which("google-chrome"),
    )
    return binary, shutil.which("chromedriver")


def start_browser(size: tuple[int, int] = LAPTOP) -> Any:
    """Headless chromium at ``size`` CSS pixels, with the system driver and no network."""
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    binary, driver = browser_paths()
    if binary is None or driver is None:
        raise RuntimeError(
            "chromium and chromedriver are needed (apt-get install chromium chromium-driver)"
        )
    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager must not look for a driver online
    options = Options()
    options.binary_location = binary
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={size[0]},{size[1]}", "--hide-scrollbars", "--force-device-scale-factor=1"):  # fmt: skip
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(executable_path=driver), options=options)


def screenshot(page: Path, png: Path, size: tuple[int, int] = LAPTOP, anchor: str = "") -> None:
    """Save a ``size`` screenshot of ``page`` (the top of it, or of the element ``anchor``
    names, as a laptop shows it)."""
    browser = start_browser(size)
    try:
        browser.get(page.resolve().as_uri() + (f"#{anchor}" if anchor else ""))
        png.parent.mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(png))
    finally:
        browser.quit()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    pytest.importorskip("selenium", reason="selenium is in the test extra")
    binary, driver = browser_paths()
    if binary is None or driver is None:
        pytest.skip(
            "chromium or chromedriver not installed (apt-get install chromium chromium-driver)"
        )
    b = start_browser()
    yield b
    b.quit()


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The index of one synthetic 13-column board with an external model's row."""
    out = tmp_path_factory.mktemp("browser") / "index.html"
    out.write_text(render_index([("board.html", synthetic_page())], [], {}), encoding="utf-8")
    return out


BOARD_TABLE = ".board .scroll:not(.external) table"
EXTERNAL_TABLE = ".board .scroll.external table"
ROWS = """return Array.from(document.querySelectorAll(arguments[0] + ' tbody tr'))
    .filter(r => !r.hidden).map(r => Array.from(r.cells, c => c.textContent.trim()));"""


def _rows(browser: Any, table: str = BOARD_TABLE) -> list[list[str]]:
    """The cells of the rows the page shows, in the order shown."""
    return browser.execute_script(ROWS, table)


def _header(browser: Any, name: str) -> tuple[Any, int]:
    from selenium.webdriver.common.by import By

    heads = browser.find_elements(By.CSS_SELECTOR, f"{BOARD_TABLE} thead th")
    names = [h.text.strip(" ▲▼") for h in heads]
    return heads[names.index(name)], names.index(name)


def test_sort_by_recall_then_filter_by_name_and_verdict(browser: Any, index: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    browser.get(index.as_uri())
    external = _rows(browser, EXTERNAL_TABLE)
    th, col = _header(browser, "recall@1")
    th.click()  # numbers: best first, by the mean each cell carries (data-value)
    shown = [float(r[col].split("±")[0]) for r in _rows(browser)]
    means = sorted((r1 for r1, _ in BOARD.values()), reverse=True)
    assert shown == means and _rows(browser)[0][0] == "beta"
    th.click()
    assert [float(r[col].split("±")[0]) for r in _rows(browser)] == means[::-1]
    assert _rows(browser, EXTERNAL_TABLE) == external  # never sorted in with the board

    box = browser.find_element(By.CSS_SELECTOR, ".board input.method-filter")
    box.send_keys("gam")
    assert [r[0] for r in _rows(browser)] == ["gamma"]
    box.send_keys(Keys.CONTROL, "a", Keys.DELETE)
    assert len(_rows(browser)) == len(BOARD)

    _, v = _header(browser, "verdict")
    browser.find_element(By.CSS_SELECTOR, '.board input.verdict-filter[value="worse"]').click()
    kept = [m for m, (_, verdict) in BOARD.items() if verdict != "worse"]
    assert sorted(r[0] for r in _rows(browser)) == sorted(kept)
    assert "worse" not in {r[v] for r in _rows(browser)}


def test_sorting_reads_the_numbers_the_cells_carry(browser: Any, tmp_path: Path) -> None:
    """Two means that round to the same text sort by the numbers behind them (``data-value``,
    from the frame), not by the text: the script never re-reads "71.5 ± 1.0"."""
    page = synthetic_page(external=False)
    page.results.loc["alpha", "recall@1"] = Shown("71.5 ± 1.0", 0.7149)
    page.results.loc["delta", "recall@1"] = Shown("71.5 ± 1.0", 0.7152)
    out = tmp_path / "index.html"
    out.write_text(render_index([("board.html", page)], [], {}), encoding="utf-8")
    browser.get(out.as_uri())
    th, col = _header(browser, "recall@1")
    th.click()
    values = browser.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0] + ' tbody tr'),"
        " r => parseFloat(r.cells[arguments[1]].getAttribute('data-value')));",
        BOARD_TABLE,
        col,
    )
    assert values == sorted(values, reverse=True) and len(values) == len(BOARD)
    assert [r[0] for r in _rows(browser)][:3] == ["beta", "delta", "alpha"]
    th.click()
    assert [r[0] for r in _rows(browser)][-3:] == ["alpha", "delta", "beta"]


def test_a_wide_board_does_not_scroll_the_laptop_page_sideways(browser: Any, index: Path) -> None:
    browser.get(index.as_uri())
    width = browser.execute_script("return document.documentElement.scrollWidth")
    assert width <= browser.execute_script("return window.innerWidth")


def test_budget_table_sorts_by_the_seconds_its_cells_carry(browser: Any, tmp_path: Path) -> None:
    """The budget's times ("45 s", "12.5 min") sort by seconds (``data-value``), as no
    reading of the text could: the script has no text fallback any more."""
    from dmlbench.report.budget import format_budget
    from dmlbench.report.html import render_page

    budget = pd.DataFrame(
        {c: [1, 1, 1] for c in BUDGET_COUNTS}
        | {"train_seconds": [45.0, 750.0, 90.0], "wall_seconds": [50.0, 760.0, 100.0]},
        index=pd.Index(["a", "b", "c"], name="method"),
    )
    page = synthetic_page(external=False)
    page.budget = format_budget(budget)
    out = tmp_path / "page.html"
    out.write_text(render_page(page), encoding="utf-8")
    browser.get(out.as_uri())
    table = "h2 + p + table"  # the budget table, after its heading and paragraph
    heads = browser.execute_script(
        "return Array.from(document.querySelectorAll('table.sortable thead th'))"
        ".filter(th => th.textContent.trim() === 'wall time');"
    )
    assert len(heads) == 1
    heads[0].click()  # numbers: largest first
    assert [r[0] for r in _rows(browser, table)] == ["b", "c", "a"]  # 12.7 min, 100 s, 50 s


LEADERBOARD = Path(__file__).resolve().parents[2] / "reports" / "leaderboard" / "index.html"
HEADLINE = "glyphs-mini-"  # the README's headline board (dmlbench.leaderboard.readme.BOARD)


def _committed(browser: Any) -> None:
    if not LEADERBOARD.is_file():
        pytest.skip("no committed leaderboard report")
    browser.get(LEADERBOARD.as_uri())


def test_the_committed_index_opens_on_the_headline_board_with_a_legible_forest_plot(
    browser: Any,
) -> None:
    from dmlbench.leaderboard.readme import report_path

    _committed(browser)
    first = browser.execute_script(
        "var b = document.querySelector('section.board');"
        "return [b.id, b.getBoundingClientRect().top, window.innerHeight];"
    )
    assert first[0] == report_path(LEADERBOARD.parent).stem and first[0].startswith(HEADLINE)
    assert first[1] < first[2]  # its title on the first screen
    widths = browser.execute_script(
        "return Array.from(document.querySelectorAll('figure.forest img'),"
        " i => [i.getBoundingClientRect().width, i.naturalWidth]);"
    )
    assert widths and all(w >= 600 for w, _ in widths)  # was about 370 px
    assert all(natural > 0 for _, natural in widths)


def test_the_committed_boards_have_pictures_curves_and_method_pages(browser: Any) -> None:
    _committed(browser)
    boards = browser.execute_script(
        "return Array.from(document.querySelectorAll('section.board'), b => [b.id,"
        " Array.from(b.querySelectorAll('.scroll:not(.external) td a'), a => a.href),"
        " Array.from(b.querySelectorAll('details.pictures img'), i => i.getAttribute('src'))]);"
    )
    assert len(boards) >= 8
    for ident, methods, pictures in boards:
        if ident.endswith("-overrides"):
            continue
        assert len(methods) >= 2, ident
        assert sorted(Path(p).name for p in pictures) == ["grid.png", "map.png"], ident
    ident, methods, pictures = boards[0]
    for src in pictures:  # loaded, not a broken image
        browser.get(LEADERBOARD.parent.joinpath(src).as_uri())
        assert browser.execute_script("return document.images[0].naturalWidth") > 0
    browser.get(methods[0])  # a method's page: its curves and its way back to the board
    shown = browser.execute_script(
        "return [Array.from(document.images, i => [i.getAttribute('src'), i.naturalWidth]),"
        " Array.from(document.querySelectorAll('a'), a => a.getAttribute('href'))];"
    )
    images, links = shown
    assert any(src.endswith("-curves.png") and width > 0 for src, width in images)
    assert f"../{ident}.html" in links and "../index.html" in links


if __name__ == "__main__":
    screenshot(
        Path(sys.argv[1]), Path(sys.argv[2]), anchor=sys.argv[3] if len(sys.argv) > 3 else ""
    )
