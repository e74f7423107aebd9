"""Self-contained HTML: one page per protocol hash, and the pieces the index and the method
pages share (:mod:`dmlbench.report.index_page`, :mod:`dmlbench.report.method_page`).

A page holds the title, protocol name/version/hash, the results table with what it may claim
(seeds, each method's verdict against the best of the others, stability over seeds; each
method's name linked to its page), the retrieval grid and embedding map where drawn, the plots
(bars, forest plot of the verdicts, captions in words), the reported-vs-reproduced table, the
tuning budget and each method's verdict and rank on every tuned board of the page's label kind
(:mod:`dmlbench.report.crossdata`).

Tables can be sorted by any column and a board's rows filtered by method name and verdict: a
reader looking for one method among twenty, or for the methods not worse than the best, should
not have to read the whole table. The style sheet and the small script doing this live in
``assets/`` and are inlined, so a page opens offline and from a file system (no CDN, no
server); plots are ``<img>`` tags with paths relative to the page (PNG files written beside
it). Without JavaScript the tables are plain tables. Every text cell is HTML-escaped; the
Markdown bold of the formatted tables becomes ``<strong>``. A cell showing a number carries it
from the frame (``data-value``, :class:`~dmlbench.report.tables.Shown`), and the script sorts
by that number rather than re-reading the text.

Rows of models not trained under the protocol's budget (``section`` = ``external`` in a
page's results, :mod:`dmlbench.report.external`) are shown in a table of their own under the
board's, never sorted in among the ranked rows.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from html import escape
from importlib.resources import files

import numpy as np
import pandas as pd

from dmlbench import __version__
from dmlbench.report.captions import caption
from dmlbench.report.crossdata import INTRO as ACROSS_TEXT
from dmlbench.report.external import EXTERNAL
from dmlbench.report.external import TEXT as EXTERNAL_TEXT
from dmlbench.report.external import TITLE as EXTERNAL_TITLE
from dmlbench.report.tables import Shown

_BOLD = re.compile(r"^\*\*(.*)\*\*$")
VERDICT = "verdict"  # the column whose cells get a colour and a filter
SECTION = "section"  # the results column telling a board's rows from external models' rows
NOT_JUDGED = "\u2014"  # the verdict cell of a method nothing was judged for (untrained)
_VERDICT_ORDER = ["worse", "equivalent", "undecided"]
HOW_TO = (
    "Click a column header to sort by it (numbers by their mean; click again to reverse); type "
    "in a board's box to show only the methods whose name contains the text, and untick a "
    "verdict to hide its methods."
)

RESULTS_TEXT = "Test-class metrics in % (mld@K in label units, lower is better), {caption}."
COMPARISON_TEXT = (
    "Published numbers for the same data set and setting ({setting}), in % as printed; ours is "
    "mean ± std over seeds (the value alone for one seed); difference = ours − published."
)
NO_TUNED = "No tuned board: nothing is compared across data sets."
Across = dict[str, tuple[pd.DataFrame, list[str]]]
"""Per label kind (its title, the heading): the tuned boards side by side as display strings,
and the lines naming the boards left out."""


@dataclass
class Page:
    """Everything one protocol hash's page shows (tables as display strings)."""

    title: str
    protocol: str
    version: int
    protocol_hash: str
    results: pd.DataFrame
    caption: str
    comparison: pd.DataFrame | None = None
    setting: str | None = None
    budget: pd.DataFrame | None = None
    confidence: pd.DataFrame | None = None
    across: Across = field(default_factory=dict)
    images: list[str] = field(default_factory=list)
    claims: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    no_comparison_reason: str | None = None
    across_report: str | None = None
    overridden: bool = False
    method_pages: dict[str, str] = field(default_factory=dict)
    """Per method, its page (href relative to the board page: ``<stem>/<method>.html``)."""
    pictures: list[tuple[str, str]] = field(default_factory=list)
    """The retrieval grid and embedding map: (src relative to the board page, caption)."""
    budget_curves: tuple[str, str] | None = None
    """Best validation score against trials spent (:mod:`dmlbench.report.budget_curves`):
    (src relative to the board page, caption naming the methods still rising)."""


DEFAULTS_TEXT = (
    "Headline metric in %, paired: mean over the seeds both boards share under the paper "
    "defaults and after tuning, the difference tuned − defaults with its 95% simultaneous "
    "interval and verdict. Selection on one validation fold is noisy, so tuned can come out "
    "worse than the defaults."
)
CONFIDENCE_TEXT = (
    "Headline metric in %: mean ± std over seeds (the value alone, and no interval, for one "
    "seed), the 95% Student-t interval of that mean, "
    "and the 95% bootstrap interval over test queries (resampling query classes). 'selected' "
    "is the search trial whose hyper-parameters and epoch count were retrained for every seed."
)


@cache
def asset(name: str) -> str:
    """The text of ``assets/<name>`` (the style sheet and script every page inlines)."""
    return (files("dmlbench.report") / "assets" / name).read_text(encoding="utf-8")


def _number(value: object) -> float | None:
    """The number a cell shows, from the frame (a :class:`Shown` cell's ``value``, or a plain
    int or float such as the seed count), never read back from its text; None for text."""
    if isinstance(value, Shown):
        return value.value
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | float | np.number):
        return None
    return float(value)


def _cell(value: object, tag: str = "td", verdict: bool = False) -> str:
    text = str(value)
    m = _BOLD.match(text)
    inner = m.group(1) if m else text
    mean, sd, spread = inner.partition(" ± ")  # the spread in small print: a narrower table
    body = escape(mean) + (f'<span class="sd">{sd}{escape(spread)}</span>' if sd else "")
    body = f"<strong>{body}</strong>" if m else body
    attrs = ""
    if verdict:
        slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "none"
        attrs = f' class="v-{slug}" data-verdict="{escape(text)}"'
    number = _number(value) if tag == "td" else None
    if number is not None and math.isfinite(number):  # the script sorts by it
        attrs += f' data-value="{number!r}"'
    return f"<{tag}{attrs}>{body}</{tag}>"


def html_table(
    df: pd.DataFrame,
    index_name: str | None = "method",
    verdicts: bool = True,
    links: Mapping[str, str] | None = None,
) -> str:
    """A ``<table>`` the page's script sorts by a click on a header; the index becomes the
    first column unless ``index_name`` is None. With ``verdicts``, a ``verdict`` column's cells
    carry their verdict (``data-verdict``, class ``v-<verdict>``) for colour and filters;
    ``links`` makes an index cell a link (a method's name to its page)."""
    head = ([index_name] if index_name is not None else []) + [str(c) for c in df.columns]
    verdict_at = head.index(VERDICT) if verdicts and VERDICT in head else -1
    lines = ['<table class="sortable">']
    lines.append("<thead><tr>" + "".join(_cell(h, "th") for h in head) + "</tr></thead>")
    lines.append("<tbody>")
    for idx, row in zip(df.index, df.values, strict=True):
        cells = ([idx] if index_name is not None else []) + list(row)
        tds = [_cell(c, verdict=i == verdict_at) for i, c in enumerate(cells)]
        href = (links or {}).get(str(idx)) if index_name is not None else None
        if href:
            tds[0] = f'<td><a href="{escape(href)}">{escape(str(idx))}</a></td>'
        lines.append("<tr>" + "".join(tds) + "</tr>")
    lines += ["</tbody>", "</table>"]
    return "\n".join(lines)


def board_and_external(table: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The board's rows and the external ones (``section`` column), order kept; the section
    column goes, and so does each part's columns that are empty throughout it (the verdict
    columns of external models, the trained-by columns of the board's methods)."""
    if SECTION not in table.columns:
        return table, table.iloc[:0]
    external = (table[SECTION] == EXTERNAL).to_numpy()
    rows = table.drop(columns=SECTION)
    return _filled(rows[~external]), _filled(rows[external])


def _filled(part: pd.DataFrame) -> pd.DataFrame:
    return part.loc[:, (part.astype(str) != "").any(axis=0)]


def _verdict_filters(table: pd.DataFrame) -> str:
    if VERDICT not in table.columns:
        return ""
    present = [str(v) for v in table[VERDICT].unique()]
    values = [v for v in _VERDICT_ORDER if v in present]
    values += sorted(v for v in present if v not in _VERDICT_ORDER)
    boxes = [
        f'<label><input type="checkbox" class="verdict-filter" value="{escape(v)}" checked> '
        f"{escape('not judged' if v == NOT_JUDGED else v)}</label>"
        for v in values
    ]
    return "<span>verdict:</span>" + "".join(boxes)


def board_html(
    title: str,
    table: pd.DataFrame,
    texts: list[str],
    forest: str | None = None,
    anchor: str | None = None,
    links: Mapping[str, str] | None = None,
) -> str:
    """One board: the name filter and verdict boxes, its table in its own scroll box (so a
    wide table never makes the page scroll sideways), then its forest plot (beside the table
    where the screen has room for both at a legible size, under it otherwise), the external
    rows in a table of their own; ``title`` is HTML, ``texts`` the paragraphs under the
    title, ``links`` each method's page."""
    ranked, external = board_and_external(table)
    ident = f' id="{escape(anchor)}"' if anchor else ""
    controls = (
        '<div class="controls"><label>method: <input type="search" class="method-filter" '
        'placeholder="filter by name" aria-label="filter methods by name"></label>'
        f'{_verdict_filters(ranked)}<span class="shown"></span></div>'
    )
    tables = [f'<div class="scroll">{html_table(ranked, links=links)}</div>']
    if len(external):
        tables += [
            f'<p class="external-caption"><strong>{escape(EXTERNAL_TITLE)}.</strong> '
            f"{escape(EXTERNAL_TEXT)}</p>",
            f'<div class="scroll external">{html_table(external, "model", False)}</div>',
        ]
    body = [f'<div class="board-tables">{"".join(tables)}</div>']
    if forest:
        src, svg = escape(forest), escape(forest.removesuffix(".png") + ".svg")  # both written
        body.append(
            f'<figure class="forest"><a href="{src}"><img src="{src}" '
            'alt="forest plot of the verdicts"></a>'
            "<figcaption>Difference to the best of the other methods, 95% simultaneous "
            f'interval, ± δ equivalence band (<a href="{svg}">SVG</a>).</figcaption></figure>'
        )
    return "\n".join(
        [
            f'<section class="board"{ident}>',
            title,
            *texts,
            controls,
            f'<div class="board-body">{"".join(body)}</div>',
            "</section>",
        ]
    )


def section(title: str, *parts: str) -> str:
    return "\n".join([f"<h2>{escape(title)}</h2>", *parts])


def paragraph(text: str, cls: str | None = None) -> str:
    attr = f' class="{cls}"' if cls else ""
    return f"<p{attr}>{escape(text)}</p>"


def document(title: str, body: str, body_class: str | None = None) -> str:
    cls = f' class="{body_class}"' if body_class else ""
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{escape(title)}</title>\n<style>\n{asset('leaderboard.css')}</style>\n"
        f"</head>\n<body{cls}>\n{body}\n"
        f'<p class="note">Generated by dmlbench {escape(__version__)}.</p>\n'
        f"<script>\n{asset('leaderboard.js')}</script>\n</body>\n</html>\n"
    )


def render_page(page: Page) -> str:
    """The complete HTML document."""
    results = board_html(
        "<h2>Results</h2>",
        page.results,
        [
            paragraph(RESULTS_TEXT.format(caption=page.caption)),
            *(paragraph(n) for n in page.claims),
            *(paragraph(n, "note") for n in page.notes),
        ],
        links=page.method_pages,
    )
    parts = [
        f"<h1>{escape(page.title)}</h1>",
        f"<p>Protocol <code>{escape(page.protocol)}</code> version {page.version}, "
        f"hash <code>{escape(page.protocol_hash)}</code>. Numbers of different protocol "
        "hashes are never put in one table.</p>",
        results,
    ]
    if page.pictures:
        parts.append(pictures_section(page))
    if page.confidence is not None and len(page.confidence):
        parts.append(
            section(
                "Confidence and selection",
                paragraph(CONFIDENCE_TEXT),
                html_table(page.confidence, links=page.method_pages),
            )
        )
    if page.images:
        parts.append(section("Plots", *figures(page.images)))
    if page.comparison is not None and len(page.comparison):
        parts.append(
            section(
                "Reported vs reproduced",
                paragraph(COMPARISON_TEXT.format(setting=page.setting)),
                html_table(page.comparison),
            )
        )
    else:
        why = page.no_comparison_reason or (
            f"No published number for this data set and setting ({page.setting})."
            if page.setting
            else "No published setting is declared for this protocol."
        )
        parts.append(section("Reported vs reproduced", paragraph(why, "note")))
    if page.budget is not None:
        parts.append(
            section(
                "Tuning budget",
                paragraph(
                    "Per method: search trials (completed, pruned), the epochs its search "
                    "trained, final runs, epochs and steps trained in all, time."
                ),
                html_table(page.budget, links=page.method_pages),
                *_budget_figure(page),
            )
        )
    if page.across:
        parts.append(across_section(page.across, page.across_report))
    return document(page.title, "\n".join(parts))


def figures(images: list[str]) -> list[str]:
    """Each plot with its caption in words (:func:`dmlbench.report.captions.caption`)."""
    return [
        f'<figure><a href="{escape(src)}"><img src="{escape(src)}" alt="{escape(caption(src))}" '
        f'loading="lazy"></a><figcaption>{escape(caption(src))}</figcaption></figure>'
        for src in images
    ]


def _budget_figure(page: Page) -> list[str]:
    """The budget curves with their caption, where the board has search trials."""
    if page.budget_curves is None:
        return []
    src, text = (escape(x) for x in page.budget_curves)
    return [
        f'<figure class="picture"><a href="{src}"><img src="{src}" alt="{text}" '
        f'loading="lazy"></a><figcaption>{text}</figcaption></figure>'
    ]


def pictures_section(page: Page) -> str:
    """The board's retrieval grid and embedding map, with their captions, if drawn."""
    if not page.pictures:
        return ""
    return section(
        "Retrieval grid and embedding map",
        *(
            f'<figure class="picture"><a href="{escape(src)}"><img src="{escape(src)}" '
            f'alt="{escape(text)}" loading="lazy"></a><figcaption>{escape(text)}</figcaption>'
            "</figure>"
            for src, text in page.pictures
        ),
    )


def across_section(across: Across, report: str | None) -> str:
    """Each label kind's boards side by side with the boards left out under them, and the
    link to ``report``, the cross-data-set report with Kendall τ between data sets."""
    parts = [paragraph(ACROSS_TEXT if across else NO_TUNED)]
    if report:
        href = escape(report)
        what = (
            "Kendall τ between data sets, with its interval, and why no critical-difference "
            "diagram is drawn"
            if across
            else "The boards left out and why"
        )
        parts.append(f'<p>{what}: <a href="{href}">{href}</a>.</p>')
    for kind, (table, notes) in across.items():
        parts += [f"<h3>{escape(kind.capitalize())}</h3>", html_table(table)]
        parts += [paragraph(n, "note") for n in notes]
    return section("Across data sets", *parts)
