"""What one board's table may claim: seeds, each method's verdict against the best, stability.

A board is the set of final records of one protocol hash (and one overrides flag, as the tables
split them). A table of means invites the reader to crown the top row; Musgrave et al. ("A
Metric Learning Reality Check", ECCV 2020) showed how often such gaps vanish over seeds. So each
trained method gets, on the board's headline metric, a verdict against the best of the *other*
methods (:mod:`dmlbench.report.verdicts`: Hsu's multiple comparison with the best, seeds and
test classes crossed, each variance component counted once): *worse*, *equivalent* (inside
the protocol's ± δ, a report setting shown in the title) or *undecided*, with P(rank 1) and
P(top 3) from the same law of the means. Bold marks "not worse than the best"; absence of
evidence is never printed as equivalence, and a board whose records carry no per-query values
never prints *equivalent* (its intervals miss the test-query component). With one seed nothing
is judged and the caption says so; the rows that need no learning are never candidates.
:func:`write_reports` writes the per-hash Markdown and CSV tables.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from dmlbench.metrics import catalogue
from dmlbench.protocol import DEFAULT_EQUIVALENCE_MARGIN
from dmlbench.records import Record, atomic_write_text, is_baseline
from dmlbench.report.external import by_hash, external_markdown, split_external
from dmlbench.report.gate import BELOW_START, no_better_than_start, verdict_text
from dmlbench.report.query_tests import query_sums, seed_studies
from dmlbench.report.ranking import primary_metric
from dmlbench.report.significance import tau_summary
from dmlbench.report.tables import (
    Shown,
    check_one_condition,
    format_table,
    metric_columns,
    numeric_summary,
    records_frame,
    render_markdown,
    summary_table,
    to_csv,
)
from dmlbench.report.titles import board_title, equivalence_margin, margin_words
from dmlbench.report.verdicts import (
    WORSE,
    MeanCovariance,
    compare_with_best,
    crossed_moments,
    seed_moments,
)

ALPHA = 0.05
CROSSED = "seeds and test classes"
SEEDS_ONLY = "seeds"
VERDICT_COLUMNS = ["vs best of others (95% CI)", "verdict", "P(rank 1)", "P(top 3)"]
OVERRIDE_MD = "*Runs with overrides (e.g. --max-steps): smoke tests, not leaderboard numbers.*"


@dataclass(frozen=True)
class BoardAnalysis:
    """The claims one table may make (see the module docstring)."""

    metric: str | None
    higher_is_better: bool
    seeds: pd.Series  # method -> number of seeds, every method including untrained
    seed_ids: tuple[int, ...]
    scores: pd.DataFrame  # method, seed, metric: trained methods only
    verdicts: pd.DataFrame | None = None  # compare_with_best: trained methods, best first
    margin: float = DEFAULT_EQUIVALENCE_MARGIN
    resampled: str = CROSSED  # what the bootstrap resampled: CROSSED or SEEDS_ONLY
    shared_seeds: tuple[int, ...] = ()  # the seeds every trained method has, used paired
    stability: str | None = None  # the Kendall τ line
    studies: int = 1  # search studies the seeds are nested in (moments.crossed_moments)
    below_start: tuple[str, ...] = ()  # trained methods not above the pretrained row's mean
    own_studies: tuple[str, ...] = ()  # methods whose searches left the study pool (F test)
    moments: MeanCovariance | None = None  # the fitted law the verdicts come from

    @property
    def bold(self) -> dict[str, list[str]]:
        """Metric → the methods not worse than the best (empty when nothing was judged)."""
        if self.metric is None or self.verdicts is None:
            return {}
        return {self.metric: [m for m, v in self.verdicts["verdict"].items() if v != WORSE]}

    @property
    def margin_words(self) -> str:
        """The margin for the title, where verdicts are printed (else empty)."""
        if self.metric is None or self.verdicts is None:
            return ""
        return margin_words(self.metric, self.margin)

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
        """What the bold cells and the verdict columns mean, or why nothing is judged."""
        if self.metric is None:
            return "no metric to compare"
        if self.verdicts is not None:
            return self._verdict_legend()
        if int(self.seeds.max()) < 2:
            return "Nothing in bold: one seed, so no method is claimed best."
        if self.scores["method"].nunique() < 2:
            return "Nothing in bold: fewer than two trained methods, nothing to compare."
        return (
            "Nothing in bold: the trained methods share fewer than two seeds, so no gap can "
            "be judged."
        )

    def _verdict_legend(self) -> str:
        m = self.metric
        assert m is not None
        unit = " points" if catalogue.is_percent(m) else ""
        delta = f"{catalogue.scale(m) * self.margin:g}"
        seeds = _seed_words(self.shared_seeds)
        if self.resampled == CROSSED:
            units = (
                "test queries, each its own unit (continuous labels have no classes)"
                if catalogue.label_kind_of([m]) == "continuous"
                else "test queries' classes"
            )
            how = (
                f"uncertainty over the {seeds} shared by every method and over the {units}, "
                "crossed: each variance component counted once (two-way "
                "moment estimates), the critical value from the means' fitted joint law with "
                "the seeds' degrees of freedom"
            )
        else:
            how = (
                f"uncertainty over the {seeds} shared by every method only: these records "
                "carry no per-query values, so the test-query component is not counted, the "
                "intervals are narrower than the truth, and no method is called equivalent"
            )
        if self.studies > 1:
            how += (
                f"; the seeds nested in each tuned method's {self.studies} independent "
                "search studies: the search's own luck, pooled over the methods whose "
                "studies agree with the others' (F test at 1%), and for a method whose "
                f"studies disagree beyond that from its own {self.studies - 1} degrees of "
                "freedom, with critical values balanced over the pairs"
            )
            if self.own_studies:
                how += (
                    f" (here {', '.join(self.own_studies)}: such a method might be far "
                    "better or worse than its mean says, so its interval, and the lower end "
                    "of every other method's, is wide)"
                )
        few = (
            f"; with {len(self.shared_seeds)} seeds the seed variance rests on "
            f"{len(self.shared_seeds) - 1} degrees of freedom, so read the verdicts as "
            "provisional"
            if len(self.shared_seeds) <= 3
            else ""
        )
        return (
            f"Bold ({m}): not worse than the best. Each method is compared with the best of "
            "the other methods: the difference of means, with its 95% simultaneous interval "
            "(Hsu's multiple comparison with the best: one interval per method, all of them "
            f"simultaneous, never a test of every pair; {how}{few}). Verdict worse: the "
            f"interval lies below 0; equivalent: it lies inside ±{delta}{unit} (δ, the "
            "protocol's report setting); undecided: neither. P(rank 1), P(top 3): the share "
            "of draws from the means' estimated law in which the method ranks first, in the "
            "top 3. The rows that need no learning are never candidates." + self._start_words
        )

    @property
    def _start_words(self) -> str:
        if not self.below_start:
            return ""
        return (
            f" {BELOW_START.capitalize()}: the method's mean is not above the pretrained "
            "row's, the network every method starts from, without fine-tuning."
        )

    @property
    def notes(self) -> list[str]:
        """The lines printed under a table: the legend, then the stability over seeds."""
        out = [self.legend]
        if self.stability is not None:
            out.append(f"Stability over seeds ({self.metric}): {self.stability}.")
        return out


def _seed_words(seeds: Sequence[int]) -> str:
    s = list(seeds)
    if len(s) > 2 and s == list(range(s[0], s[-1] + 1)):
        return f"{len(s)} seeds ({s[0]}–{s[-1]})"
    return f"{len(s)} seeds ({', '.join(map(str, s))})"


def higher_is_better(metric: str) -> bool:
    return catalogue.higher_is_better(metric)


def board_metric(df: pd.DataFrame) -> str | None:
    """The headline metric of a records frame: recall@1, else ndcg@10, else the first one."""
    return primary_metric([c for c in metric_columns(df) if df[c].notna().any()])


def shared_seeds(scores: pd.DataFrame) -> tuple[int, ...]:
    """The seeds on which every method of ``scores`` has a value: the verdicts pair methods
    by seed (a seed fixes the initial weights and batch order of every method alike)."""
    if scores.empty:
        return ()
    per = [set(map(int, g["seed"])) for _, g in scores.groupby("method")]
    return tuple(sorted(set.intersection(*per)))


def analyse_board(
    df: pd.DataFrame, records: Iterable[Record] = (), margin: float | None = None
) -> BoardAnalysis:
    """The :class:`BoardAnalysis` of a :func:`~dmlbench.report.tables.records_frame` of one board;
    ``records``, the same board's records, add the test-class component where every one
    carries its per-query hits (else the verdicts resample seeds only, and say so).
    ``margin``: δ, else the protocol's ``report.equivalence_margin`` (rebuilt from the records'
    protocol name and hash), else the default."""
    records = list(records)
    seeds = df.groupby("method")["seed"].nunique()
    ids = tuple(sorted({int(s) for s in df["seed"]}))
    metric = board_metric(df)
    if metric is None:
        return BoardAnalysis(None, True, seeds, ids, pd.DataFrame(columns=["method", "seed"]))
    if margin is None:
        margin = equivalence_margin(records[0].protocol) if records else DEFAULT_EQUIVALENCE_MARGIN
    higher = higher_is_better(metric)
    trained = df[~df["method"].map(is_baseline) & df[metric].notna()]
    scores = trained[["method", "seed", metric]].drop_duplicates(["method", "seed"])
    base = BoardAnalysis(metric, higher, seeds, ids, scores, margin=margin)
    methods = tuple(sorted(scores["method"].unique()))
    shared = shared_seeds(scores)
    if len(methods) < 2 or len(shared) < 2:
        return base
    drawn = board_moments(records, scores, metric, methods, shared)
    assert drawn is not None  # two shared seeds or more
    moments, resampled = drawn
    span = 1.0 if catalogue.is_percent(metric) else None  # a fraction's gaps lie in ±1
    verdicts = compare_with_best(
        moments, margin, ALPHA, higher, equivalence=resampled == CROSSED, span=span
    )
    means = {m: {metric: float(v)} for m, v in df.groupby("method")[metric].mean().items()}
    below = no_better_than_start(means, metric, higher)
    verdicts = verdicts.assign(below_start=[m in below for m in verdicts.index])
    stability = tau_summary(scores[scores["seed"].isin(shared)], metric, higher)
    return BoardAnalysis(
        metric, higher, seeds, ids, scores, verdicts, margin, resampled, shared, stability,
        moments.studies, below, _own_studies(moments), moments,
    )  # fmt: skip


def _own_studies(mc: MeanCovariance) -> tuple[str, ...]:
    """The methods whose search studies disagree beyond the pool's (moments.study_excess)."""
    if not mc.nested:
        return ()
    return tuple(m for m, own in zip(mc.methods, mc.study_excess().own, strict=True) if own)


def board_moments(
    records: Sequence[Record],
    scores: pd.DataFrame,
    metric: str,
    methods: tuple[str, ...],
    seeds: tuple[int, ...],
) -> tuple[MeanCovariance, str] | None:
    """The means the verdicts compare and their estimated covariance, and what it counts:
    seeds and test classes crossed where every record carries its per-query values of
    ``metric`` (Recall@1 hits, or nDCG / label distances per query) on the same queries, in
    two classes or more, else seeds only (None with fewer than 2 seeds); in both, seeds
    nested in search studies where the finals name several (`seed_studies`)."""
    if len(seeds) < 2:
        return None
    sums = query_sums(records, metric, methods, seeds)
    studies = seed_studies(records, seeds)  # seeds nested in search studies, if several
    if sums is not None and sums[1].size >= 2:
        return crossed_moments(methods, *sums, studies), CROSSED
    wide = scores.pivot(index="method", columns="seed", values=metric)
    values = wide.loc[list(methods), list(seeds)].to_numpy(dtype=np.float64)
    return seed_moments(methods, values, studies), SEEDS_ONLY


def verdict_cells(board: BoardAnalysis, index: Sequence[str]) -> pd.DataFrame:
    """Display strings of the verdict columns for the rows ``index`` (— where not judged):
    the difference to the best of the others with its interval, in % (label distances as they
    are), the verdict, P(rank 1) and P(top 3)."""
    out = pd.DataFrame("—", index=pd.Index(index), columns=VERDICT_COLUMNS)
    v = board.verdicts
    if v is None or board.metric is None:
        return out
    digits, scale = catalogue.digits(board.metric), catalogue.scale(board.metric)
    for method, row in v.iterrows():
        if method not in out.index:
            continue
        d, lo, hi = (scale * float(row[c]) for c in ("difference", "lower", "upper"))
        out.loc[method] = [  # each number kept beside its text, for the page to sort by
            Shown(f"{d:+.{digits}f} [{lo:+.{digits}f}, {hi:+.{digits}f}]", row["difference"]),
            verdict_text(str(row["verdict"]), bool(row.get("below_start", False))),
            Shown(f"{float(row['p_rank1']):.2f}", row["p_rank1"]),
            Shown(f"{float(row['p_top3']):.2f}", row["p_top3"]),
        ]
    return out


def display_table(table: pd.DataFrame, board: BoardAnalysis) -> pd.DataFrame:
    """The summary table's display strings (bold where not worse than the best) with the
    verdict columns after the metrics, where the board was judged."""
    shown = format_table(table, bold=board.bold)
    if board.verdicts is None:
        return shown
    return shown.join(verdict_cells(board, list(shown.index)))


def verdict_numbers(board: BoardAnalysis) -> pd.DataFrame:
    """The verdicts for the summary CSV: ``<metric>_vs_best``, ``_vs_best_lo``, ``_vs_best_hi``
    (records' units), ``verdict``, ``p_rank1``, ``p_top3`` and ``equivalence_margin``."""
    if board.verdicts is None or board.metric is None:
        return pd.DataFrame()
    m = board.metric
    out = board.verdicts.rename(
        columns={"difference": f"{m}_vs_best", "lower": f"{m}_vs_best_lo",
                 "upper": f"{m}_vs_best_hi"}
    ).drop(columns="mean")  # fmt: skip
    out["equivalence_margin"] = board.margin
    return out


def summary_markdown(
    title: str,
    table: pd.DataFrame,
    board: BoardAnalysis,
    overridden: bool,
    notes: Sequence[str] = (),
) -> str:
    """The Markdown of one board: heading, caption, table, legend and stability line, then
    ``notes`` (the caller's lines about the board, e.g. which methods it leaves out and why)."""
    lines = "\n".join(f"\n{n}" for n in [*board.notes, *notes])
    smoke = f"\n\n{OVERRIDE_MD}" if overridden else ""
    return (
        f"## {title}\n\nTest metrics in % ({catalogue.MLD.key}K in label units, lower is better), "
        f"{board.caption}.\n\n{render_markdown(display_table(table, board))}\n"
        f"{lines}{smoke}\n"
    )


@dataclass(frozen=True)
class WrittenBoard:
    """One board's Markdown and CSV as written, with what they were made from.

    ``dmlbench report`` builds the rest of the board's files (LaTeX, plots, page) from the same
    ``table`` and ``analysis``: the analysis is a bootstrap, so it is computed once per render.
    """

    title: str
    path: Path  # the Markdown file
    markdown: str
    frame: pd.DataFrame  # records_frame of the board's final records
    table: pd.DataFrame  # summary_table(frame)
    analysis: BoardAnalysis


def write_reports(
    records: list[Record],
    out_dir: Path,
    notes: Mapping[str, Sequence[str]] | None = None,
) -> list[tuple[str, Path, str]]:
    """Write ``<protocol>-<hash12>.md`` and ``.csv`` per protocol hash (runs with overrides
    apart, ``…-overrides``); the CSV is :func:`~dmlbench.report.tables.numeric_summary` with
    the verdict numbers (:func:`verdict_numbers`). External records among ``records`` end the
    Markdown in a section of their own (:mod:`dmlbench.report.external`), outside the CSV.

    The title names the board's budget (:func:`~dmlbench.report.titles.board_title`) and,
    where verdicts are printed, their equivalence margin. ``notes`` maps a protocol name to
    lines printed under its table (not under its table of runs with overrides, which are
    smoke tests, not the board the notes describe).

    Returns (title, markdown path, markdown text) per table (:func:`write_boards` returns
    what each was made from as well).
    """
    return [(w.title, w.path, w.markdown) for w in write_boards(records, out_dir, notes)]


def write_boards(
    records: list[Record],
    out_dir: Path,
    notes: Mapping[str, Sequence[str]] | None = None,
) -> list[WrittenBoard]:
    """:func:`write_reports`, returning each board's :class:`WrittenBoard`."""
    notes = notes or {}
    records, external = split_external(records)  # shown apart, never ranked
    check_one_condition(records)  # `dmlbench run` and `sweep` print these tables
    df = records_frame(r for r in records if r.stage == "final")
    if df.empty:
        return []
    external_of = by_hash(external)
    written: list[WrittenBoard] = []
    out_dir.mkdir(parents=True, exist_ok=True)
    for (h, overridden), part in df.groupby(["protocol_hash", "overridden"], sort=True):
        name = str(part["protocol"].iloc[0])
        stem = f"{name}-{str(h)[:12]}" + ("-overrides" if overridden else "")
        group = [r for r in records if r.protocol.hash == h and bool(r.overrides) == overridden]
        board = analyse_board(part, [r for r in group if r.stage == "final"])
        summary = numeric_summary(part)
        verdicts = verdict_numbers(board)
        if len(verdicts):
            summary = summary.join(verdicts)
        atomic_write_text(out_dir / f"{stem}.csv", to_csv(summary))
        title = board_title(group[0].protocol, group, board.margin_words)
        lines = () if overridden else notes.get(name, ())
        table = summary_table(part)
        md = summary_markdown(title, table, board, bool(overridden), lines)
        md += "" if overridden else external_markdown(external_of.get(str(h), []))
        atomic_write_text(out_dir / f"{stem}.md", md)
        written.append(WrittenBoard(title, out_dir / f"{stem}.md", md, part, table, board))
    return written
