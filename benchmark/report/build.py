"""``dmlbench report``: every report file, per protocol hash, plus one ranking across hashes.

Per protocol hash — and separately for its runs with overrides, as the Markdown tables do —
with the Markdown table's stem (``<protocol>-<hash12>``, ``…-overrides``):

- ``<stem>.md`` / ``.csv`` — the summary table (:func:`dmlbench.report.tables.write_reports`);
- ``<stem>.tex`` — the same table as a booktabs LaTeX table;
- ``<stem>-bars.png`` / ``.svg`` — the primary metric per method with error bars;
- ``<stem>-published.md`` / ``.csv`` — reported vs reproduced, only when a published number
  exists for the protocol's data set and setting (:mod:`dmlbench.report.published`) and the
  runs have no overrides (a ``--backbone-override`` run keeps the protocol's name);
- ``<stem>-budget.md`` / ``.csv`` — the tuning budget per method (all stages);
- ``<stem>-confidence.md`` / ``.csv`` — intervals over seeds and queries, and the selection;
- ``<stem>.html`` — one self-contained page with all of the above and every ``<stem>-*.png``
  found beside it (so plots other commands write there with that stem appear too).

And ``ranking.md`` / ``.csv``: the average rank of each method across the hashes present;
``sweep-<protocol>-<key>.png`` / ``.svg`` for every sweep (``dmlbench sweep``) found; and
``index.html`` linking every page, with the sweep plots and the ranking.

Records are grouped by protocol hash before any table is made, so the refusal to mix hashes in
one table (:class:`dmlbench.report.tables.MixedProtocolsError`) guards, but is never triggered.
Hashes with search-trial records only (no ``final`` record) get no report.
"""

from __future__ import annotations

import json
import logging
import re
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from dmlbench.errors import DmlbenchError
from dmlbench.records import Record, atomic_write_text
from dmlbench.report.bars import save_bars
from dmlbench.report.budget import format_budget, tuning_budget
from dmlbench.report.confidence import confidence_table
from dmlbench.report.html import Page, render_index, render_page
from dmlbench.report.latex import latex_table
from dmlbench.report.plots import sweep_points, write_sweep_plots
from dmlbench.report.published import (
    PublishedEntry,
    load_published,
    reported_vs_reproduced,
    setting_for,
)
from dmlbench.report.ranking import average_ranks, primary_metric
from dmlbench.report.tables import (
    MixedProtocolsError,
    format_table,
    records_frame,
    render_markdown,
    summary_table,
    write_reports,
)

OVERRIDE_NOTE = (
    "Runs with overrides (e.g. --max-steps, --backbone-override): smoke tests, not leaderboard "
    "numbers, and not compared with published numbers (their setting may not be the protocol's)."
)
RANKING_TEXT = (
    "Average rank of each method on each protocol's primary metric (1 = best; ties share the "
    "average rank); Borda = methods ranked minus rank, summed over protocols."
)
log = logging.getLogger(__name__)
RANKING_SMOKE = (
    "No run without overrides yet: this ranking is of smoke-test runs (with overrides), not a "
    "leaderboard."
)


def build_reports(
    records: Iterable[Record], out_dir: Path, published_dir: Path | None = None
) -> list[Path]:
    """Write every report file for ``records`` into ``out_dir``; return the paths written.

    Records are grouped by (protocol hash, has overrides), like the Markdown tables; each group
    gets its own files. The ranking uses the runs without overrides (all runs, labelled as smoke
    tests, when there are none).
    """
    records = unique_records(records)
    check_one_data_copy(records)
    groups: dict[tuple[str, bool], list[Record]] = defaultdict(list)
    for r in records:
        groups[(r.protocol.hash, bool(r.overrides))].append(r)
    finals = [r for g in groups.values() for r in g if r.stage == "final"]
    if not finals:
        return []
    published = load_published(published_dir)
    eligible = [r for r in finals if not r.overrides]
    ranking = display_ranking(average_ranks(records_frame(eligible or finals)))
    smoke = None if eligible else RANKING_SMOKE
    pages: list[tuple[Path, Page]] = []
    written: list[Path] = []
    for key in sorted(groups):
        if any(r.stage == "final" for r in groups[key]):
            paths, page = _one_group(groups[key], key[1], out_dir, published, ranking, smoke)
            written += paths
            pages.append((out_dir / f"{paths[0].stem}.html", page))
    stems = [html.stem for html, _ in pages]
    for html, page in pages:  # plots beside the page, except those of a longer stem
        others = [s for s in stems if s != html.stem and s.startswith(html.stem)]
        page.images = sorted(
            p.name
            for p in out_dir.glob(f"{html.stem}-*.png")
            if not any(p.name.startswith(f"{o}-") for o in others)
        )
        atomic_write_text(html, render_page(page))
        written.append(html)
    try:
        sweep_pngs = write_sweep_plots(sweep_points(finals), out_dir)
    except MixedProtocolsError as err:  # the tables are still right; only the plot is refused
        log.warning("sweep plots skipped: %s", err)
        sweep_pngs = []
    written += [q for p in sweep_pngs for q in (p, p.with_suffix(".svg"))]
    index = out_dir / "index.html"
    titles = [(html.name, page.title) for html, page in pages]
    atomic_write_text(index, render_index(titles, [p.name for p in sweep_pngs], ranking))
    written.append(index)
    note = f"\n\n*{smoke}*" if smoke else ""
    md = f"## Ranking across protocols\n\n{RANKING_TEXT}{note}\n\n{render_markdown(ranking)}\n"
    for path, text in ((out_dir / "ranking.md", md), (out_dir / "ranking.csv", ranking.to_csv())):
        atomic_write_text(path, text)
        written.append(path)
    return written


def unique_records(records: Iterable[Record]) -> list[Record]:
    """Each final run (protocol hash, method, seed, overrides) once.

    Two copies of one run (a results folder copied into another, the committed leaderboard
    read beside a user's re-run) would enter the mean and the t-interval as two seeds. The
    first copy is kept and the collapse is reported.
    """
    seen: dict[tuple[str, ...], Record] = {}
    out = []
    for r in records:
        if r.stage != "final":  # trials are counted by the budget table, by trial number
            out.append(r)
            continue
        key = (
            r.protocol.hash, r.method, str(r.seed), r.stage,
            json.dumps(r.overrides, sort_keys=True, default=str),
        )  # fmt: skip
        if key in seen:
            log.warning(
                "%s: %s seed %s (%s) appears twice; counted once",
                r.protocol.name, r.method, r.seed, r.stage,
            )  # fmt: skip
            continue
        seen[key] = r
        out.append(r)
    return out


def check_one_data_copy(records: Iterable[Record]) -> None:
    """Refuse a protocol hash whose records were computed on different data.

    ``data.root`` is not part of the protocol hash (it is machine-specific), so two copies of
    a data set (one damaged or re-packed) give the same hash; the data fingerprint in every
    record tells them apart, and one table must never average over both.
    """
    prints: dict[str, set[str]] = defaultdict(set)
    names: dict[str, str] = {}
    for r in records:
        prints[r.protocol.hash].add(r.data_fingerprint)
        names[r.protocol.hash] = r.protocol.name
    for h, fps in prints.items():
        if len(fps) > 1:
            shown = ", ".join(sorted(f[:12] for f in fps))
            raise DmlbenchError(
                f"{names[h]} ({h[:12]}): records computed on different data (fingerprints "
                f"{shown}); report them from separate results folders"
            )


def _one_group(
    records: list[Record],
    overridden: bool,
    out_dir: Path,
    published: list[PublishedEntry],
    ranking: pd.DataFrame,
    ranking_note: str | None,
) -> tuple[list[Path], Page]:
    """Every file of one (hash, overrides) group except its HTML page, which is returned."""
    finals = [r for r in records if r.stage == "final"]
    [(title, md_path, _)] = write_reports(finals, out_dir)
    stem, ref = md_path.stem, finals[0].protocol
    title += " — runs with overrides" if overridden else ""
    written = [md_path, md_path.with_suffix(".csv")]
    table = summary_table(records_frame(finals))

    tex = out_dir / f"{stem}.tex"
    label = "tab:" + re.sub(r"[^A-Za-z0-9:-]", "-", stem)
    caption = f"{title}: test-class metrics in %, mean ± std over seeds; best in bold."
    atomic_write_text(tex, latex_table(table, caption, label))
    written.append(tex)

    metric = primary_metric([c for c in table.columns if c != "seeds" and table[c].notna().any()])
    if metric is not None:
        written += save_bars(table, metric, title, out_dir / f"{stem}-bars")

    s = None if overridden else setting_for(ref.name)
    setting = f"{s.dataset}, {s.backbone}, {s.embedding_size}-d" if s else None
    # (the other settings are compared per published number and marked where they differ)
    entries = [] if overridden else published
    comparison = display_comparison(reported_vs_reproduced(entries, ref.name, table))
    footnotes = comparison.attrs.get("footnotes", [])
    if len(comparison):
        written += _write_table(
            out_dir / f"{stem}-published",
            f"{title}: reported vs reproduced",
            comparison,
            footnotes,
        )
    budget = format_budget(tuning_budget(records))
    written += _write_table(out_dir / f"{stem}-budget", f"{title}: tuning budget", budget)
    confidence = confidence_table(finals)
    written += _write_table(
        out_dir / f"{stem}-confidence", f"{title}: confidence and selection", confidence
    )

    page = Page(
        title=title,
        protocol=ref.name,
        version=ref.version,
        protocol_hash=ref.hash,
        results=format_table(table),
        seeds=int(table["seeds"].max()),
        comparison=comparison,
        setting=setting,
        budget=budget,
        confidence=confidence,
        ranking=ranking,
        notes=([OVERRIDE_NOTE] if overridden else []) + footnotes,
        no_comparison_reason="Not compared: runs with overrides." if overridden else None,
        ranking_note=ranking_note,
    )
    return written, page


def _write_table(
    stem: Path, title: str, formatted: pd.DataFrame, footnotes: list[str] | None = None
) -> list[Path]:
    md, csv = stem.with_suffix(".md"), stem.with_suffix(".csv")
    notes = "".join(f"\n{n}\n" for n in footnotes or [])
    atomic_write_text(md, f"## {title}\n\n{render_markdown(formatted)}\n{notes}")
    atomic_write_text(csv, formatted.to_csv())
    return [md, csv]


def display_comparison(comp: pd.DataFrame) -> pd.DataFrame:
    """Strings for the reported-vs-reproduced table, indexed by method.

    A published value whose recorded settings differ from ours (normalisation, image size,
    batch size, pretraining) carries a mark ``†N``; footnote N, in ``.attrs["footnotes"]``,
    names each difference, so no pair of unlike runs reads as like with like.
    """
    notes: list[str] = []
    marks = []
    for differs in comp.get("settings_differ", pd.Series([""] * len(comp))):
        if not differs:
            marks.append("")
            continue
        if differs not in notes:
            notes.append(differs)
        marks.append(f" †{notes.index(differs) + 1}")
    pairs = zip(comp["ours"], comp["ours_std"], strict=True)
    out = pd.DataFrame(
        {
            "metric": comp["metric"],
            "published": [f"{v:g}{m}" for v, m in zip(comp["published"], marks, strict=True)],
            "ours": [f"{m:.1f} ± {s:.1f}" for m, s in pairs],
            "difference": [f"{d:+.1f}" for d in comp["difference"]],
            "kind": comp["kind"],
            "source": comp["source"],
        }
    )
    out.index = pd.Index(comp["method"], name="method")
    out.attrs["footnotes"] = [f"†{i}: settings differ: {n}." for i, n in enumerate(notes, 1)]
    return out


def display_ranking(ranking: pd.DataFrame) -> pd.DataFrame:
    """Strings: average rank to 2 decimals, Borda and per-protocol ranks to 1, blanks as —."""
    metrics: dict[str, str] = ranking.attrs.get("metrics", {})
    out = pd.DataFrame(index=ranking.index)
    out["average rank"] = [f"{v:.2f}" for v in ranking["average_rank"]]
    out["borda"] = [f"{v:.1f}" for v in ranking["borda"]]
    out["protocols"] = [str(int(v)) for v in ranking["protocols"]]
    for col, metric in metrics.items():
        out[f"{col} ({metric})"] = ["—" if np.isnan(v) else f"{v:.1f}" for v in ranking[col]]
    return out
