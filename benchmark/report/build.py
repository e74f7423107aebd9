"""``dmlbench report``: every report file, per protocol hash, plus the comparison across data
sets.

Per protocol hash — and separately for its runs with overrides, as the Markdown tables do —
with the Markdown table's stem (``<protocol>-<hash12>``, ``…-overrides``):

- ``<stem>.md`` / ``.csv`` — the summary table (:func:`dmlbench.report.board.write_reports`):
  Markdown with mean ± std (the value alone for one seed), each method's verdict against the
  best of the others (difference with its 95% interval, worse / equivalent / undecided,
  P(rank 1), P(top 3); :mod:`dmlbench.report.verdicts`), bold where a method is not worse than
  the best, a legend and Kendall τ over seeds; the CSV numbers only (mean, std, 95%
  t-interval per metric, ``n_seeds``, the verdict's numbers);
- ``<stem>.tex`` — the same table as a booktabs LaTeX table;
- ``<stem>-bars.png`` / ``.svg`` — the headline metric per method with error bars;
- ``<stem>-forest.png`` / ``.svg`` — the forest plot of the verdicts (difference to the best
  of the others, its interval, the ± δ band), where the board was judged
  (:mod:`dmlbench.report.forest`);
- ``<stem>-published.md`` / ``.csv`` — reported vs reproduced, only when a published number
  exists for the protocol's data set and setting (:mod:`dmlbench.report.published`) and the
  runs have no overrides (a ``--backbone-override`` run keeps the protocol's name);
- ``<stem>-budget.md`` / ``.csv`` — the tuning budget per method (all stages): search trials
  completed and pruned and the epochs the search trained;
- ``<stem>-confidence.md`` / ``.csv`` — intervals over seeds and queries, and the selection;
- ``<stem>-external.md`` / ``.csv`` — models trained elsewhere (``dmlbench evaluate``), apart
  from the board and never ranked (:mod:`dmlbench.report.external`); the board's Markdown
  ends with the same section and its page's results mark their rows ``section: external``;
- ``<stem>.html`` — one self-contained page with all of the above and every ``<stem>-*.png``
  found beside it (so plots other commands write there with that stem appear too);
- ``<stem>/`` — a page and a curves plot per method, linked from the board's tables, and the
  retrieval grid and embedding map where seed 0's test embeddings were kept
  (:mod:`dmlbench.report.extras`; not for sweep points, which are points of a plot).

And ``cross-dataset.md`` / ``.csv`` / ``-agreement.csv``: each method's verdict and rank on
every tuned board of one label kind side by side, and Kendall τ between data sets
(:mod:`dmlbench.report.crossdata`; runs with overrides and sweep points left out, nothing
written when no other run is present); ``<X>-defaults-vs-tuned.md`` / ``.csv`` for every
protocol ``X`` reported beside ``X@defaults``, paired over their shared seeds
(:mod:`dmlbench.report.defaults`); ``sweep-<protocol>-<key>.png`` / ``.svg`` for every sweep
(``dmlbench sweep``) found; and ``index.html`` with every page's board (its table, sortable and
filterable, beside its forest plot, linked to the page), the sweep plots, the
defaults-vs-tuned tables and the tuned boards side by side, linked to ``cross-dataset.md``.
Markdown, LaTeX and HTML are for reading; every CSV holds numbers (empty cells where a value
does not exist), for reading back with pandas.

Records are grouped by protocol hash before any table is made, so the refusal to mix hashes in
one table (:class:`dmlbench.report.tables.MixedProtocolsError`) guards, but is never triggered.
Hashes with search-trial records only (no ``final`` record) get no report.
"""

from __future__ import annotations

import json
import logging
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import pandas as pd

from dmlbench.metrics import catalogue
from dmlbench.records import UNTRAINED, Record, atomic_write_text
from dmlbench.report import crossdata
from dmlbench.report.bars import save_bars
from dmlbench.report.baselines import gate_shortfall, write_gate_report
from dmlbench.report.board import BoardAnalysis, display_table, write_boards
from dmlbench.report.budget import format_budget, tuning_budget
from dmlbench.report.confidence import confidence_frame, confidence_table
from dmlbench.report.defaults import write_defaults_vs_tuned
from dmlbench.report.external import by_hash, split_external, with_external_rows, write_external
from dmlbench.report.extras import Kept, write_extras
from dmlbench.report.forest import save_forest
from dmlbench.report.html import Across, Page, render_page
from dmlbench.report.index_page import render_index
from dmlbench.report.latex import latex_table, paper_caption
from dmlbench.report.plots import is_sweep_point, sweep_points, write_sweep_plots
from dmlbench.report.power import write_power_report
from dmlbench.report.published import (
    PublishedEntry,
    load_published,
    reported_vs_reproduced,
    setting_for,
)
from dmlbench.report.ranking import TRACKS, label_kind
from dmlbench.report.tables import (
    MixedProtocolsError,
    Shown,
    check_one_condition,
    numeric_summary,
    render_markdown,
    to_csv,
)
from dmlbench.report.titles import sweep_budgets

OVERRIDE_NOTE = (
    "Runs with overrides (e.g. --max-steps, --backbone-override): smoke tests, not leaderboard "
    "numbers, and not compared with published numbers (their setting may not be the protocol's)."
)
log = logging.getLogger(__name__)


def build_reports(
    records: Iterable[Record],
    out_dir: Path,
    published_dir: Path | None = None,
    linked_sweeps: list[str] | None = None,
    notes: Mapping[str, Sequence[str]] | None = None,
    kept: Kept | None = None,
    baseline: str = UNTRAINED,
    headline: str | None = None,
) -> list[Path]:
    """Write every report file for ``records`` into ``out_dir``; return the paths written.

    ``linked_sweeps``: sweep plots of another report (paths relative to ``out_dir``) that the
    index shows beside its own (the leaderboard's index shows ``reports/sweeps``' plots).

    ``notes``: lines to print under a protocol's table, in its Markdown and on its HTML page,
    keyed by protocol name (``glyphs-mini``, ``glyphs-mini@defaults``), e.g. which methods the
    board leaves out and why; a reader of a board cannot see what is missing from it. Not
    printed under the table of runs with overrides.

    Records are grouped by (protocol hash, has overrides), like the Markdown tables; each group
    gets its own files. The comparison across data sets reads the tuned boards without
    overrides, one per data set and label kind; a page shows those of its own kind.

    Each board also gets its folder ``<stem>/`` (:mod:`dmlbench.report.extras`): a page and
    curves per method, and, from ``kept`` (seed-0 test embeddings by (protocol hash12,
    method), :func:`dmlbench.report.kept.find_kept`), the retrieval grid of its best method
    beside ``baseline``'s and the embedding map. ``headline``: the protocol whose board the
    index opens on.
    """
    records, external = split_external(unique_records(records))
    check_one_condition(records)
    groups: dict[tuple[str, bool], list[Record]] = defaultdict(list)
    for r in records:
        groups[(r.protocol.hash, bool(r.overrides))].append(r)
    finals = [r for g in groups.values() for r in g if r.stage == "final"]
    external_written = write_external(external, out_dir)
    if not finals:
        return external_written
    notes = notes or {}
    for name in sorted(set(notes) - {r.protocol.name for r in finals}):
        log.warning("notes for %s: no final record of that protocol; not printed", name)
    out_dir.mkdir(parents=True, exist_ok=True)
    published = load_published(published_dir)
    # (a sweep's points are one experiment, not data sets: tuned_boards leaves them out)
    tuned = crossdata.tuned_boards(records)
    written: list[Path] = external_written + crossdata.write_boards(tuned, out_dir)
    report = f"{crossdata.STEM}.md" if tuned else None
    across = displayed(tuned)
    pages: list[tuple[Path, Page]] = []
    analyses: dict[str, BoardAnalysis] = {}  # of the boards without overrides, by hash
    external_of = by_hash(external)
    for key in sorted(groups):
        if any(r.stage == "final" for r in groups[key]):
            group, overridden = groups[key], key[1]
            lines = [] if overridden else board_lines(group, notes)
            own = {} if is_sweep_point(group[0].protocol.name) else across
            theirs = [] if overridden else external_of.get(key[0], [])
            paths, page, board = _one_group(
                group, overridden, out_dir, published, own, lines, theirs
            )
            if not overridden:
                analyses[key[0]] = board
            page.across_report = report
            page.overridden = overridden
            written += paths
            if not is_sweep_point(group[0].protocol.name):  # a point of a plot, not a board
                written += write_extras(group, paths[0].stem, out_dir, page, kept, baseline)
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
        sweep_pngs = write_sweep_plots(sweep_points(finals), out_dir, budgets=sweep_budgets(finals))
    except MixedProtocolsError as err:  # the tables are still right; only the plot is refused
        log.warning("sweep plots skipped: %s", err)
        sweep_pngs = []
    written += [q for p in sweep_pngs for q in (p, p.parent / f"{p.stem}.svg")]
    dvt_paths, dvt_tables = write_defaults_vs_tuned(records, out_dir)
    written += dvt_paths
    written += write_gate_report(_boards(groups), out_dir)
    written += write_power_report(_boards(groups), out_dir, analyses)
    index = out_dir / "index.html"
    # a protocol's boards together (with and without overrides), protocols by name
    boards = sorted(((html.name, page) for html, page in pages), key=lambda b: b[1].protocol)
    sweeps = [p.name for p in sweep_pngs] + list(linked_sweeps or [])
    atomic_write_text(index, render_index(boards, sweeps, across, dvt_tables, report, headline))
    written.append(index)
    return written


def board_lines(group: list[Record], notes: Mapping[str, Sequence[str]]) -> list[str]:
    """The lines under a board's table: how it falls short of the gate, if it does (a reader
    of the board must not take its verdicts for a measurement of metric learning; a sweep's
    point is a point of a plot, not a board), then the caller's notes for its protocol."""
    ref = group[0].protocol
    finals = [r for r in group if r.stage == "final"]
    shortfall = None if is_sweep_point(ref.name) else gate_shortfall(ref.name, ref.hash, finals)
    warning = [] if shortfall is None else [
        f"Not shown to measure metric learning: {shortfall}; not compared across data sets."
    ]  # fmt: skip
    return warning + list(notes.get(ref.name, ()))


def _boards(groups: Mapping[tuple[str, bool], list[Record]]) -> dict[tuple[str, str], list[Record]]:
    """The boards of the gate table: groups without overrides that have finals, sweep points
    left out (a point of a plot is not a board), by (protocol name, hash)."""
    return {
        (g[0].protocol.name, h): g
        for (h, overridden), g in groups.items()
        if not overridden
        and any(r.stage == "final" for r in g)
        and not is_sweep_point(g[0].protocol.name)
    }


def displayed(boards: crossdata.Boards) -> Across:
    """Per label kind with a tuned board (keyed by its :data:`TRACKS` title): its boards side
    by side as display strings, and the lines naming the boards left out."""
    return {
        TRACKS[k]: (crossdata.display_side_by_side(crossdata.side_by_side(sets), sets), lines)
        for k, (sets, lines) in boards.items()
        if sets
    }


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


def _one_group(
    records: list[Record],
    overridden: bool,
    out_dir: Path,
    published: list[PublishedEntry],
    across: Across,
    board_notes: list[str],
    external: list[Record],
) -> tuple[list[Path], Page, BoardAnalysis]:
    """Every file of one (hash, overrides) group except its HTML page, which is returned
    with the board's analysis;
    ``board_notes`` are printed under its table, ``external`` records after it, unranked;
    ``across``: :func:`displayed`, of which the page shows its own label kind's."""
    finals = [r for r in records if r.stage == "final"]
    ref = finals[0].protocol
    [done] = write_boards([*finals, *external], out_dir, {ref.name: board_notes})
    md_path, df, table, board = done.path, done.frame, done.table, done.analysis
    stem = md_path.stem
    title = done.title + (" — runs with overrides" if overridden else "")
    written = [md_path, out_dir / f"{stem}.csv"]

    tex = out_dir / f"{stem}.tex"
    label = "tab:" + re.sub(r"[^A-Za-z0-9:-]", "-", stem)
    caption = paper_caption(title, table, board, f"{stem}.csv")
    atomic_write_text(tex, latex_table(table, board, caption, label))
    written.append(tex)

    if board.metric is not None:
        written += save_bars(table, board.metric, title, out_dir / f"{stem}-bars")
        if board.verdicts is not None:
            written += save_forest(
                board.verdicts, board.metric, board.margin, title, out_dir / f"{stem}-forest"
            )

    s = None if overridden else setting_for(ref.name)
    setting = f"{s.dataset}, {s.backbone}, {s.embedding_size}-d" if s else None
    # (the other settings are compared per published number and marked where they differ)
    entries = [] if overridden else published
    numbers = reported_vs_reproduced(entries, ref.name, table)
    comparison = display_comparison(numbers)
    footnotes = comparison.attrs.get("footnotes", [])
    if len(comparison):
        written += _write_table(
            out_dir,
            f"{stem}-published",
            f"{title}: reported vs reproduced",
            comparison,
            comparison_numbers(numbers, numeric_summary(df)),
            footnotes,
        )
    numeric_budget = tuning_budget(records)
    budget = format_budget(numeric_budget)
    written += _write_table(
        out_dir,
        f"{stem}-budget",
        f"{title}: tuning budget",
        budget,
        numeric_budget.rename(columns={"seeds": "n_seeds"}),
    )
    confidence = confidence_table(finals)
    written += _write_table(
        out_dir,
        f"{stem}-confidence",
        f"{title}: confidence and selection",
        confidence,
        confidence_frame(finals),
    )

    kinds = {TRACKS[k] for r in finals if (k := label_kind(r.method, r.metrics)) is not None}
    own = {title: v for title, v in across.items() if title in kinds or not kinds}
    page = Page(
        title=title,
        protocol=ref.name,
        version=ref.version,
        protocol_hash=ref.hash,
        results=with_external_rows(display_table(table, board), external),
        caption=board.caption,
        claims=board.notes,
        comparison=comparison,
        setting=setting,
        budget=budget,
        confidence=confidence,
        across=own,
        notes=([OVERRIDE_NOTE] if overridden else []) + board_notes + footnotes,
        no_comparison_reason="Not compared: runs with overrides." if overridden else None,
    )
    return written, page, board


def _write_table(
    out_dir: Path,
    name: str,
    title: str,
    formatted: pd.DataFrame,
    numbers: pd.DataFrame,
    footnotes: list[str] | None = None,
) -> list[Path]:
    """``<name>.md`` from the display strings, ``<name>.csv`` from the numbers."""
    md, csv = out_dir / f"{name}.md", out_dir / f"{name}.csv"
    notes = "".join(f"\n{n}\n" for n in footnotes or [])
    atomic_write_text(md, f"## {title}\n\n{render_markdown(formatted)}\n{notes}")
    atomic_write_text(csv, to_csv(numbers))
    return [md, csv]


def comparison_numbers(comp: pd.DataFrame, numeric: pd.DataFrame) -> pd.DataFrame:
    """The reported-vs-reproduced CSV: numbers in %, as the published values are printed, with
    our 95% t-interval over seeds (empty for one seed)."""
    out = comp.rename(columns={"ours": "ours_mean"}).set_index("method")
    scale = [catalogue.scale(m) for m in out["metric"]]
    for side in ("lo", "hi"):
        values = [
            numeric.at[m, f"{k}_{side}"] for m, k in zip(out.index, out["metric"], strict=True)
        ]
        out[f"ours_{side}"] = [v * f for v, f in zip(values, scale, strict=True)]
    first = ["metric", "kind", "source", "published", "ours_mean", "ours_std", "ours_lo"]
    return out[[*first, "ours_hi", "n_seeds", "difference", "settings_differ"]]


def display_comparison(comp: pd.DataFrame) -> pd.DataFrame:
    """Strings for the reported-vs-reproduced table, indexed by method; the numbers keep their
    value (:class:`~dmlbench.report.tables.Shown`, in % as printed) for the page to sort by.

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
            "published": [
                Shown(f"{v:g}{m}", v) for v, m in zip(comp["published"], marks, strict=True)
            ],
            "ours": [
                Shown(f"{m:.1f}" if pd.isna(s) else f"{m:.1f} ± {s:.1f}", m) for m, s in pairs
            ],
            "seeds": [Shown(str(int(n)), n) for n in comp["n_seeds"]],
            "difference": [Shown(f"{d:+.1f}", d) for d in comp["difference"]],
            "kind": comp["kind"],
            "source": comp["source"],
        }
    )
    out.index = pd.Index(comp["method"], name="method")
    out.attrs["footnotes"] = [f"†{i}: settings differ: {n}." for i, n in enumerate(notes, 1)]
    return out
