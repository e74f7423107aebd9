"""What one board's table may claim: seeds, the methods not separable from the best, stability.

A board is the set of final records of one protocol hash (and one overrides flag, as the tables
split them). A table of means invites the reader to crown the top row; Musgrave et al. ("A
Metric Learning Reality Check", ECCV 2020) showed how often such gaps vanish over seeds. So the
bold cells of every table are the methods that a paired t-test over seeds, Holm-corrected
(:mod:`dmlbench.report.significance`), cannot call worse than the best on the board's headline
metric; with one seed nothing is bold and the caption says so. The untrained row is never a
candidate. Where the records carry each test query's hit, the lines under the table add the
same claims over test queries (:mod:`dmlbench.report.query_tests`). :func:`write_reports`
writes the per-hash Markdown and CSV tables with these claims.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from dmlbench.records import Record, atomic_write_text
from dmlbench.report.query_tests import QueryTests, hit_rates, query_tests
from dmlbench.report.ranking import LOWER_IS_BETTER, primary_metric
from dmlbench.report.significance import (
    BestSet,
    method_means,
    not_worse_than_best,
    paired_seed_tests,
    ranking_stability,
    stability_summary,
)
from dmlbench.report.tables import (
    UNTRAINED,
    check_one_condition,
    format_table,
    metric_columns,
    numeric_summary,
    records_frame,
    render_markdown,
    summary_table,
    to_csv,
)
from dmlbench.report.titles import board_title

ALPHA = 0.05
LEGEND = (
    "Bold ({metric}): not significantly worse than the best, paired t-test over seeds, "
    "Holm-corrected, α = {alpha:g}; the untrained row is never a candidate."
)
OVERRIDE_MD = "*Runs with overrides (e.g. --max-steps): smoke tests, not leaderboard numbers.*"


@dataclass(frozen=True)
class Board:
    """The claims one table may make (see the module docstring)."""

    metric: str | None
    higher_is_better: bool
    seeds: pd.Series  # method -> number of seeds, every method including untrained
    seed_ids: tuple[int, ...]
    best: BestSet | None
    stability: str | None
    scores: pd.DataFrame  # method, seed, metric: trained methods only
    queries: QueryTests | None = None  # the same claims over test queries, where recorded

    @property
    def bold(self) -> dict[str, list[str]]:
        """Metric → methods to bold (empty when no difference can be claimed)."""
        if self.metric is None or self.best is None or not self.best.claimable:
            return {}
        return {self.metric: list(self.best.methods)}

    @property
    def caption(self) -> str:
        """How many seeds the numbers are over, in words; one seed is never called a spread."""
        counts = sorted(set(self.seeds.astype(int)))
        if counts == [1]:
            ids = ", ".join(map(str, self.seed_ids))
            which = f"one seed ({ids})" if len(self.seed_ids) == 1 else f"one seed each ({ids})"
            return f"{which}: no spread, no significance claimed"
        if len(counts) == 1:
            return f"mean ± std over {counts[0]} seeds"
        return (
            f"mean ± std over {counts[0]}–{counts[-1]} seeds (column seeds); a method with one "
            "seed shows its value alone"
            if counts[0] == 1
            else f"mean ± std over {counts[0]}–{counts[-1]} seeds (column seeds)"
        )

    @property
    def legend(self) -> str:
        """What the bold cells mean, or why nothing is bold."""
        if self.metric is None:
            return "no metric to compare"
        if self.bold:
            return LEGEND.format(metric=self.metric, alpha=ALPHA)
        if int(self.seeds.max()) < 2:
            return "Nothing in bold: one seed, so no method is claimed best."
        if self.scores["method"].nunique() < 2:
            return "Nothing in bold: fewer than two trained methods, nothing to compare."
        return "Nothing in bold: no two methods share two seeds, so no gap can be tested."

    @property
    def notes(self) -> list[str]:
        """The lines printed under a table: the legend, the stability over seeds, then the
        comparisons over test queries."""
        out = [self.legend]
        if self.stability is not None:
            out.append(f"Stability over seeds ({self.metric}): {self.stability}.")
        if self.queries is not None and self.metric == "recall@1":
            out += self.queries.notes
        return out


def higher_is_better(metric: str) -> bool:
    return not metric.startswith(LOWER_IS_BETTER)


def board_metric(df: pd.DataFrame) -> str | None:
    """The headline metric of a records frame: recall@1, else ndcg@10, else the first one."""
    return primary_metric([c for c in metric_columns(df) if df[c].notna().any()])


def analyse_board(df: pd.DataFrame, records: Iterable[Record] = ()) -> Board:
    """The :class:`Board` of a :func:`~dmlbench.report.tables.records_frame` of one board;
    ``records``, the same board's records, add the comparisons over test queries."""
    seeds = df.groupby("method")["seed"].nunique()
    ids = tuple(sorted({int(s) for s in df["seed"]}))
    metric = board_metric(df)
    if metric is None:
        empty = pd.DataFrame(columns=["method", "seed"])
        return Board(None, True, seeds, ids, None, None, empty)
    higher = higher_is_better(metric)
    trained = df[(df["method"] != UNTRAINED) & df[metric].notna()]
    scores = trained[["method", "seed", metric]].drop_duplicates(["method", "seed"])
    if scores.empty:
        return Board(metric, higher, seeds, ids, None, None, scores)
    tests = paired_seed_tests(scores, metric, higher)
    best = not_worse_than_best(tests, method_means(scores, metric, higher), ALPHA, higher)
    stability = None
    if scores["method"].nunique() >= 2 and int(seeds.max()) >= 2:
        stability = stability_summary(ranking_stability(scores, metric, higher))
    rates = hit_rates(records)
    queries = query_tests(rates) if rates is not None else None
    return Board(metric, higher, seeds, ids, best, stability, scores, queries)


def summary_markdown(
    title: str,
    table: pd.DataFrame,
    board: Board,
    overridden: bool,
    notes: Sequence[str] = (),
) -> str:
    """The Markdown of one board: heading, caption, table, legend and stability line, then
    ``notes`` (the caller's lines about the board, e.g. which methods it leaves out and why)."""
    lines = "\n".join(f"\n{n}" for n in [*board.notes, *notes])
    smoke = f"\n\n{OVERRIDE_MD}" if overridden else ""
    return (
        f"## {title}\n\nTest metrics in % (mld@K in label units, lower is better), "
        f"{board.caption}.\n\n{render_markdown(format_table(table, bold=board.bold))}\n"
        f"{lines}{smoke}\n"
    )


def write_reports(
    records: list[Record],
    out_dir: Path,
    notes: Mapping[str, Sequence[str]] | None = None,
) -> list[tuple[str, Path, str]]:
    """Write ``<protocol>-<hash12>.md`` and ``.csv`` per protocol hash (runs with overrides
    apart, ``…-overrides``); the CSV is :func:`~dmlbench.report.tables.numeric_summary`.

    The title names the board's budget (:func:`~dmlbench.report.titles.board_title`).
    ``notes`` maps a protocol name to lines printed under its table (not under its table of
    runs with overrides, which are smoke tests, not the board the notes describe).

    Returns (title, markdown path, markdown text) per table.
    """
    notes = notes or {}
    check_one_condition(records)  # `dmlbench run` and `sweep` print these tables
    df = records_frame(r for r in records if r.stage == "final")
    if df.empty:
        return []
    written = []
    out_dir.mkdir(parents=True, exist_ok=True)
    for (h, overridden), part in df.groupby(["protocol_hash", "overridden"], sort=True):
        name = str(part["protocol"].iloc[0])
        stem = f"{name}-{str(h)[:12]}" + ("-overrides" if overridden else "")
        atomic_write_text(out_dir / f"{stem}.csv", to_csv(numeric_summary(part)))
        group = [r for r in records if r.protocol.hash == h and bool(r.overrides) == overridden]
        title = board_title(group[0].protocol, group)
        board = analyse_board(part, [r for r in group if r.stage == "final"])
        lines = () if overridden else notes.get(name, ())
        md = summary_markdown(title, summary_table(part), board, bool(overridden), lines)
        atomic_write_text(out_dir / f"{stem}.md", md)
        written.append((title, out_dir / f"{stem}.md", md))
    return written
