"""One self-contained HTML page per protocol hash.

The page holds the title, protocol name/version/hash, the results table with what it may claim
(seeds, each method's verdict against the best of the others, stability over seeds), the plots
(bars, forest plot of the verdicts), the reported-vs-reproduced table, the tuning budget and the
ranking across the data sets of the page's label kind. No external CSS, JavaScript or fonts
(the style sheet is inline), so the page opens offline and from a file system; plots are
``<img>`` tags with paths relative to the page (PNG files written beside it). Every text cell is
HTML-escaped; the Markdown bold of the formatted tables becomes ``<strong>``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html import escape

import pandas as pd

from dmlbench import __version__

_BOLD = re.compile(r"^\*\*(.*)\*\*$")

STYLE = """
body { font-family: system-ui, sans-serif; max-width: 72rem; margin: 2rem auto; padding: 0 1rem;
       color: #111; line-height: 1.4; }
table { border-collapse: collapse; margin: 0.5rem 0 1.5rem; font-size: 0.9rem; }
th, td { padding: 0.25rem 0.6rem; border-bottom: 1px solid #ccc; text-align: right; }
th:first-child, td:first-child { text-align: left; }
thead th { border-bottom: 2px solid #111; }
code { background: #f3f3f3; padding: 0 0.2rem; }
figure { margin: 1rem 0; } img { max-width: 100%; border: 1px solid #ddd; }
.note { color: #555; font-size: 0.9rem; }
"""
RESULTS_TEXT = "Test-class metrics in % (mld@K in label units, lower is better), {caption}."
COMPARISON_TEXT = (
    "Published numbers for the same data set and setting ({setting}), in % as printed; ours is "
    "mean ± std over seeds (the value alone for one seed); difference = ours − published."
)
RANKING_TEXT = (
    "Average rank on each data set's primary metric (1 = best, ties share the average rank); "
    "Borda = methods ranked minus rank, summed over data sets; one board per data set (a tuned "
    "board and its @defaults board are one data set). One ranking per label kind: a method is "
    "ranked only against methods of its own kind."
)


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
    rankings: dict[str, pd.DataFrame] = field(default_factory=dict)
    images: list[str] = field(default_factory=list)
    claims: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    no_comparison_reason: str | None = None
    ranking_note: str | None = None


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


def _cell(value: object, tag: str = "td") -> str:
    text = str(value)
    m = _BOLD.match(text)
    body = f"<strong>{escape(m.group(1))}</strong>" if m else escape(text)
    return f"<{tag}>{body}</{tag}>"


def html_table(df: pd.DataFrame, index_name: str | None = "method") -> str:
    """A plain ``<table>``; the index becomes the first column unless ``index_name`` is None."""
    head = ([index_name] if index_name is not None else []) + [str(c) for c in df.columns]
    lines = ["<table>", "<thead><tr>" + "".join(_cell(h, "th") for h in head) + "</tr></thead>"]
    lines.append("<tbody>")
    for idx, row in zip(df.index, df.values, strict=True):
        cells = ([idx] if index_name is not None else []) + list(row)
        lines.append("<tr>" + "".join(_cell(c) for c in cells) + "</tr>")
    lines += ["</tbody>", "</table>"]
    return "\n".join(lines)


def _section(title: str, *parts: str) -> str:
    return "\n".join([f"<h2>{escape(title)}</h2>", *parts])


def _p(text: str, cls: str | None = None) -> str:
    attr = f' class="{cls}"' if cls else ""
    return f"<p{attr}>{escape(text)}</p>"


def render_page(page: Page) -> str:
    """The complete HTML document."""
    parts = [
        f"<h1>{escape(page.title)}</h1>",
        f"<p>Protocol <code>{escape(page.protocol)}</code> version {page.version}, "
        f"hash <code>{escape(page.protocol_hash)}</code>. Numbers of different protocol "
        "hashes are never put in one table.</p>",
        _section(
            "Results",
            _p(RESULTS_TEXT.format(caption=page.caption)),
            html_table(page.results),
            *(_p(n) for n in page.claims),
            *(_p(n, "note") for n in page.notes),
        ),
    ]
    if page.confidence is not None and len(page.confidence):
        parts.append(
            _section(
                "Confidence and selection",
                _p(CONFIDENCE_TEXT),
                html_table(page.confidence),
            )
        )
    if page.images:
        figs = [
            f'<figure><img src="{escape(src)}" alt="{escape(src)}">'
            f"<figcaption>{escape(src)}</figcaption></figure>"
            for src in page.images
        ]
        parts.append(_section("Plots", *figs))
    if page.comparison is not None and len(page.comparison):
        parts.append(
            _section(
                "Reported vs reproduced",
                _p(COMPARISON_TEXT.format(setting=page.setting)),
                html_table(page.comparison),
            )
        )
    else:
        why = page.no_comparison_reason or (
            f"No published number for this data set and setting ({page.setting})."
            if page.setting
            else "No published setting is declared for this protocol."
        )
        parts.append(_section("Reported vs reproduced", _p(why, "note")))
    if page.budget is not None:
        parts.append(
            _section(
                "Tuning budget",
                _p(
                    "Per method: search trials (completed, pruned), the epochs its search "
                    "trained, final runs, epochs and steps trained in all, time."
                ),
                html_table(page.budget),
            )
        )
    if page.rankings:
        note = [_p(page.ranking_note, "note")] if page.ranking_note else []
        parts.append(
            _section("Ranking across data sets", _p(RANKING_TEXT), *note, *_rankings(page.rankings))
        )
    body = "\n".join(parts)
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{escape(page.title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
        f'{body}\n<p class="note">Generated by dmlbench {escape(__version__)}.</p>\n'
        "</body>\n</html>\n"
    )


def _rankings(rankings: dict[str, pd.DataFrame]) -> list[str]:
    return [f"<h3>{escape(k.capitalize())}</h3>\n{html_table(t)}" for k, t in rankings.items()]


def _links(items: list[tuple[str, str]]) -> str:
    lines = "\n".join(f'<li><a href="{escape(h)}">{escape(t)}</a></li>' for h, t in items)
    return f"<ul>\n{lines}\n</ul>"


def render_index(
    pages: list[tuple[str, str]],
    sweep_images: list[str],
    rankings: dict[str, pd.DataFrame],
    forest_plots: list[tuple[str, str]] | None = None,
    defaults_vs_tuned: list[tuple[str, pd.DataFrame]] | None = None,
    ranking_notes: list[str] | None = None,
) -> str:
    """``index.html``: a link to every protocol-hash page, every forest plot (``(href,
    title)``), the sweep plots (which span hashes: one derived protocol per point, so they
    belong to no single page), the defaults-vs-tuned tables and the rankings, with
    ``ranking_notes`` (the boards not ranked because their data set is)."""
    parts = ["<h1>dmlbench reports</h1>", _section("Protocols", _links(pages))]
    if forest_plots:
        why = (
            "Per board: each method's difference to the best of the other methods with its 95% "
            "simultaneous interval, and the ± δ equivalence band."
        )
        parts.append(_section("Forest plots", _p(why), _links(forest_plots)))
    if sweep_images:
        figs = [
            f'<figure><img src="{escape(src)}" alt="{escape(src)}">'
            f"<figcaption>{escape(src)}</figcaption></figure>"
            for src in sweep_images
        ]
        parts.append(
            _section(
                "Sweeps",
                _p("One derived protocol (own hash) per point; one line per method."),
                *figs,
            )
        )
    for title, table in defaults_vs_tuned or []:
        parts.append(_section(title, _p(DEFAULTS_TEXT), html_table(table)))
    if rankings:
        notes = [_p(n, "note") for n in ranking_notes or []]
        parts.append(
            _section("Ranking across data sets", _p(RANKING_TEXT), *notes, *_rankings(rankings))
        )
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>dmlbench reports</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
        + "\n".join(parts)
        + f'\n<p class="note">Generated by dmlbench {escape(__version__)}.</p>\n</body>\n</html>\n'
    )
