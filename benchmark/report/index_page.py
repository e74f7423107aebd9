"""``index.html``: every board of a report on one page, opening on the headline board.

Each board is shown with its table (method names linked to their pages), its forest plot and,
folded, its retrieval grid and embedding map; then the sweeps, the defaults-vs-tuned tables
and the tuned boards side by side. The board a reader came for (the README's headline board,
``headline``) comes first, right under the contents, so the page opens on it; the others
follow in protocol order.
"""

from __future__ import annotations

from html import escape

import pandas as pd

from dmlbench.report.html import (
    DEFAULTS_TEXT,
    HOW_TO,
    RESULTS_TEXT,
    Across,
    Page,
    across_section,
    board_html,
    document,
    figures,
    html_table,
    paragraph,
    section,
)


def _index_board(href: str, page: Page) -> str:
    """A page's board on the index: its linked title, caption, claims (folded), table,
    forest plot and (folded) pictures."""
    forests = [src for src in page.images if src.endswith("-forest.png")]
    folded = "".join(
        [*(paragraph(n) for n in page.claims), *(paragraph(n, "note") for n in page.notes)]
    )
    texts = [paragraph(RESULTS_TEXT.format(caption=page.caption), "note")]
    if folded:
        texts.append(f"<details><summary>Reading the verdicts; notes</summary>{folded}</details>")
    if page.pictures:
        shown = "".join(
            f'<figure class="picture"><a href="{escape(src)}"><img src="{escape(src)}" '
            f'alt="{escape(text)}" loading="lazy"></a><figcaption>{escape(text)}</figcaption>'
            "</figure>"
            for src, text in page.pictures
        )
        texts.append(
            '<details class="pictures"><summary>Retrieval grid and embedding map</summary>'
            f"{shown}</details>"
        )
    return board_html(
        f'<h3><a href="{escape(href)}">{escape(page.title)}</a></h3>',
        page.results,
        texts,
        forests[0] if forests else None,
        anchor=href.removesuffix(".html"),
        links=page.method_pages,
    )


def headline_first(pages: list[tuple[str, Page]], headline: str | None) -> list[tuple[str, Page]]:
    """``pages`` with the board of protocol ``headline`` (without overrides) first."""
    first = [p for p in pages if p[1].protocol == headline and not p[1].overridden][:1]
    return first + [p for p in pages if p not in first]


def render_index(
    pages: list[tuple[str, Page]],
    sweep_images: list[str],
    across: Across,
    defaults_vs_tuned: list[tuple[str, pd.DataFrame]] | None = None,
    across_report: str | None = None,
    headline: str | None = None,
) -> str:
    """``index.html``: every protocol-hash page's board (``(href, page)``: its table, linked
    to the page, beside its forest plot), the board of protocol ``headline`` first, the sweep
    plots (which span hashes: one derived protocol per point, so they belong to no single
    page), the defaults-vs-tuned tables and the tuned boards side by side per label kind,
    linked to ``across_report`` (the cross-data-set report) where one was written."""
    pages = headline_first(pages, headline)
    contents = "\n".join(
        f'<li><a href="#{escape(href.removesuffix(".html"))}">{escape(page.title)}</a></li>'
        for href, page in pages
    )
    parts = [
        "<h1>dmlbench reports</h1>",
        paragraph(HOW_TO, "note"),
        f"<nav><ul>\n{contents}\n</ul></nav>",
        section("Boards", *(_index_board(href, page) for href, page in pages)),
    ]
    if sweep_images:
        parts.append(
            section(
                "Sweeps",
                paragraph("One derived protocol (own hash) per point; one line per method."),
                *figures(sweep_images),
            )
        )
    for title, table in defaults_vs_tuned or []:
        parts.append(section(title, paragraph(DEFAULTS_TEXT), html_table(table)))
    if across or across_report:
        parts.append(across_section(across, across_report))
    return document("dmlbench reports", "\n".join(parts), "index")
