"""A board's folder beside its page: per method its page and curves, and the board's pictures.

For the board page ``<stem>.html`` the report writes ``<stem>/``:

- ``<method>.html`` and ``<method>-curves.png`` for every method of the board
  (:mod:`dmlbench.report.method_page`, :mod:`dmlbench.report.curves`), from the records alone;
- ``budget.png`` (:mod:`dmlbench.report.budget_curves`) where the board has search trials:
  each method's best validation score against trials spent, over its search studies, the
  methods still rising at the budget named under it (on the page and in the board's Markdown);
- ``grid.png`` and ``map.png`` (:mod:`dmlbench.report.pictures`) where seed 0's test embeddings
  of the board's best method were kept (:mod:`dmlbench.report.kept`), the grid beside those
  of the baseline (``untrained`` unless another is named) when they were kept too.

Everything is drawn from what the records and kept files hold, so re-running the report over
the same files redraws the same pictures; nothing is trained here.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from dmlbench.metrics.catalogue import HITS_METRIC
from dmlbench.records import UNTRAINED, Record, atomic_write_text, is_baseline
from dmlbench.report.budget_curves import write_budget_curves
from dmlbench.report.curves import write_curves
from dmlbench.report.html import Page, board_and_external
from dmlbench.report.kept import KeptEmbeddings, load_kept
from dmlbench.report.method_page import render_method_page
from dmlbench.report.pictures import QUERIES, K, load_test_images, write_grid, write_map

log = logging.getLogger(__name__)
Kept = Mapping[tuple[str, str], Path]  # (protocol hash12, method) -> embeddings file


def best_method(page: Page) -> str | None:
    """The board's first trained row (the board's order: best mean of the headline first)."""
    ranked, _ = board_and_external(page.results)
    return next((str(m) for m in ranked.index if not is_baseline(str(m))), None)


def write_extras(
    records: list[Record],
    stem: str,
    out_dir: Path,
    page: Page,
    kept: Kept | None = None,
    baseline: str = UNTRAINED,
) -> list[Path]:
    """Write ``<out_dir>/<stem>/``; set ``page.method_pages`` and ``page.pictures``; return
    the paths written."""
    folder = out_dir / stem
    ranked, _ = board_and_external(page.results)
    methods = [str(m) for m in ranked.index]
    curves = write_curves([r for r in records if r.method in methods], folder, page.title)
    written: list[Path] = list(curves.values())
    written += _budget(records, stem, out_dir, page)
    pictures = _pictures(records, folder, page, kept or {}, baseline)
    written += [folder / src for src, _ in pictures]
    page.pictures = [(f"{stem}/{src}", text) for src, text in pictures]
    for m in methods:
        finals = [r for r in records if r.method == m and r.stage == "final"]
        trials = [r for r in records if r.method == m and r.stage == "search-trial"]
        mine = [(s, t) for s, t in pictures if m in t.split(":")[0].split(" and ")]
        html = render_method_page(
            m,
            page.title,
            f"../{stem}.html",
            ranked.loc[[m]],
            finals,
            trials,
            curves[m].name if m in curves else None,
            mine,
        )
        path = folder / f"{m}.html"
        atomic_write_text(path, html)
        written.append(path)
        page.method_pages[m] = f"{stem}/{m}.html"
    return written


def _budget(records: list[Record], stem: str, out_dir: Path, page: Page) -> list[Path]:
    """Draw ``<stem>/budget.png``, link it from the page and name it, with the methods still
    rising, at the end of the board's Markdown ``<stem>.md``."""
    drawn = write_budget_curves(records, out_dir / stem, page.title)
    if drawn is None:
        return []
    path, text, _rising = drawn
    page.budget_curves = (f"{stem}/{path.name}", text)
    md = out_dir / f"{stem}.md"
    if md.is_file():
        body = md.read_text(encoding="utf-8").rstrip("\n")
        figure = f"![search budget]({stem}/{path.name})"
        atomic_write_text(md, f"{body}\n\n**Search budget.** {figure}\n\n{text}\n")
    return [path]


def _pictures(
    records: list[Record], folder: Path, page: Page, kept: Kept, baseline: str
) -> list[tuple[str, str]]:
    """(file name in ``folder``, caption) of the grid and the map, where embeddings were kept."""
    best = best_method(page)
    h12 = page.protocol_hash[:12]
    if best is None or (h12, best) not in kept:
        return []
    chosen: dict[str, KeptEmbeddings] = {best: load_kept(kept[h12, best])}
    if (h12, baseline) in kept and baseline != best:
        chosen[baseline] = load_kept(kept[h12, baseline])
    test = load_test_images(chosen[best])
    if test is None:
        return []
    record = {r.method: r for r in records if r.stage == "final" and r.seed == 0}
    names = " and ".join(chosen)
    credit = (
        f" The images are the data set's, drawn from third-party art or fonts under their "
        f"licences ({'; '.join(test.licences)}); the grid keeps them (ShareAlike included). "
        "Sources, authors, licences and changes: NOTICE.md."
        if test.licences
        else ""
    )
    marks = (
        "no hit or miss for continuous labels (grey frames)"
        if test.continuous
        else "green frame: same class as the query (hit), red: another class (miss)"
    )
    check = "; ".join(
        f"{m}: {HITS_METRIC} {100 * k.metrics[HITS_METRIC]:.2f}% in the kept re-run, "
        f"{100 * record[m].metrics[HITS_METRIC]:.2f}% in the record"
        for m, k in chosen.items()
        if HITS_METRIC in k.metrics and m in record and HITS_METRIC in record[m].metrics
    )
    grid_text = (
        f"{names}: {QUERIES} test queries (a seeded rule, the same for every method) and their "
        f"top {K} neighbours by cosine similarity, seed 0's test embeddings; {marks}."
        + (f" ({check}.)" if check else "")
        + credit
    )
    write_grid(test, chosen, f"{page.title}: retrieval, seed 0", folder / "grid.png")
    map_text = (
        f"{best}: t-SNE map of seed 0's test embeddings (scikit-learn, seeded), coloured by "
        f"{test.group_words}."
    )
    write_map(test, chosen[best], f"{best}, {page.title}", folder / "map.png")
    return [("grid.png", grid_text), ("map.png", map_text)]
