"""Across data sets: each method's verdict and rank on every tuned board of one label kind,
side by side, and how far the boards agree on the order of the methods (Kendall τ).

Not the usual answer: the Friedman test and its Nemenyi critical-difference diagram (Demšar,
JMLR 2006) need many data sets; with 20 methods on 3 the critical difference is about 17 ranks
of at most 19 (:func:`nemenyi_cd`), so hardly a pair could be told apart. τ's interval comes
from the verdicts' bootstrap (:mod:`dmlbench.report.verdicts`: seeds and test classes crossed),
because a board's order is noisy in both and that model already judges each board; the data
sets share nothing, so each board draws its replicates from its own random stream. Tuned
boards only, one per data set, so that every data set enters once and at one budget.
:data:`INTRO` is what the report says each number means.
"""

from __future__ import annotations

import math
import zlib
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, fields
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from dmlbench.records import Record, atomic_write_text
from dmlbench.report.board import BoardAnalysis, analyse_board, board_replicates, shared_seeds
from dmlbench.report.plots import is_sweep_point
from dmlbench.report.ranking import TRACKS, label_kind, one_board_per_data_set
from dmlbench.report.results import board_of
from dmlbench.report.tables import Shown, records_frame, render_markdown, to_csv
from dmlbench.report.titles import DEFAULTS_WORDS, margin_words, rebuilt_protocol
from dmlbench.report.verdicts import N_BOOT, Replicates

ALPHA = 0.05
MIN_METHODS = 3  # τ over two methods is ±1 and says nothing
TARGET_CD = 3.0  # ranks: a gap a reader could act on, for "how many data sets would it take"
MISSING = "—"
STEM = "cross-dataset"
INTRO = (
    "Each method's verdict on each data set's tuned board (against the best of the other "
    "methods on that board, at that board's equivalence margin δ: worse, equivalent, undecided) "
    "and its rank there (1 = best mean of the headline metric; ties share the average rank), "
    "methods run on every board first; — where a board lacks the method. Mean rank: over the "
    "data sets where the method was run. Kendall τ: how far two boards agree on the order of "
    "the methods both have (1 = the same order, 0 = unrelated, −1 = reversed), with a 95% "
    "bootstrap interval that resamples each board's seeds and test classes, independently per "
    "data set; the resampling pulls τ towards 0, so an interval above 0 is evidence that the "
    "two boards order the methods alike, and one covering 0 is no evidence that they differ. "
    "The interval is over each board's noise, not over the choice of data sets."
)
SMALL_DATA = (
    "This is evidence on small synthetic or locally installed data sets only, not on CUB-200, "
    "Cars196 or SOP: an order that holds here is a hypothesis for those benchmarks, not a result "
    "on them."
)


@dataclass(frozen=True)
class DataSet:
    """One tuned board as the comparison sees it: the methods' means of the headline metric
    over their seeds, their verdicts, and replicates of the means for τ's interval (None where
    nothing can be resampled: one seed and no per-query hits)."""

    name: str
    protocol_hash: str
    metric: str
    higher_is_better: bool
    means: pd.Series
    verdicts: pd.Series
    margin: float
    replicates: Replicates | None

    @property
    def ranks(self) -> pd.Series:
        return self.means.rank(ascending=not self.higher_is_better, method="average")

    @property
    def label(self) -> str:
        words = margin_words(self.metric, self.margin)
        return f"{self.name} ({self.protocol_hash[:8]}, {self.metric}, {words})"


Boards = dict[str, tuple[list[DataSet], list[str]]]
"""Per label kind: its tuned boards, one per data set, and a line per board left out."""


def data_set(records: Sequence[Record]) -> DataSet | None:
    """The :class:`DataSet` of one board's final records (None without a metric to rank)."""
    board = analyse_board(records_frame(records), records)
    if board.metric is None or board.scores.empty:
        return None
    ref = records[0].protocol
    means = board.scores.groupby("method")[board.metric].mean()
    verdicts = board.verdicts["verdict"] if board.verdicts is not None else pd.Series(dtype=str)
    reps = _replicates(records, board, stream=zlib.crc32(ref.hash.encode()))
    return DataSet(
        ref.name, ref.hash, board.metric, board.higher_is_better, means, verdicts, board.margin,
        reps,
    )  # fmt: skip


def _replicates(records: Sequence[Record], board: BoardAnalysis, stream: int) -> Replicates | None:
    """The board's bootstrap means as its verdicts resample them (seeds and test classes
    crossed, else seeds only), drawn from ``stream``: a data set's own random stream."""
    assert board.metric is not None
    methods = tuple(sorted(board.scores["method"].unique()))
    seeds = shared_seeds(board.scores)
    drawn = board_replicates(
        records, board.scores, board.metric, methods, seeds, seed=stream, n_boot=N_BOOT
    )
    return drawn[0] if drawn is not None else None


def kendall_tau(a: np.ndarray, b: np.ndarray) -> float:
    """Kendall τ-b (ties counted as scipy does); NaN when either side is constant."""
    return float(stats.kendalltau(a, b).statistic)


@dataclass(frozen=True)
class Agreement:
    """Kendall τ between two boards' orders over the methods both have, and its interval."""

    first: str
    second: str
    methods: int
    tau: float = math.nan
    tau_lo: float = math.nan
    tau_hi: float = math.nan


def agreement(a: DataSet, b: DataSet, alpha: float = ALPHA) -> Agreement:
    """τ over the methods both boards have, with its percentile interval over paired
    replicates (the i-th of each board: independent draws, one stream per data set); NaN
    where fewer than :data:`MIN_METHODS` are shared, no interval where a board has no
    replicates. τ of the means is τ of their ranks: only the order of each pair counts."""
    common = sorted(set(a.means.index) & set(b.means.index))
    if len(common) < MIN_METHODS:
        return Agreement(a.name, b.name, len(common))
    sa, sb = (1.0 if d.higher_is_better else -1.0 for d in (a, b))
    tau = kendall_tau(sa * a.means[common].to_numpy(), sb * b.means[common].to_numpy())
    if a.replicates is None or b.replicates is None:
        return Agreement(a.name, b.name, len(common), tau)
    boot_a, boot_b = (_columns(d.replicates, common) for d in (a, b))
    n = min(len(boot_a), len(boot_b))
    taus = [kendall_tau(x, y) for x, y in zip(sa * boot_a[:n], sb * boot_b[:n], strict=True)]
    lo, hi = np.nanquantile(np.array(taus), [alpha / 2, 1 - alpha / 2])
    return Agreement(a.name, b.name, len(common), tau, float(lo), float(hi))


def _columns(reps: Replicates, methods: Sequence[str]) -> np.ndarray:
    return reps.boot[:, [reps.methods.index(m) for m in methods]]


def nemenyi_cd(k: int, n: int, alpha: float = ALPHA) -> float:
    """The Nemenyi critical difference of average ranks, k methods on n data sets (Demšar
    2006): q_α / √2 · √(k(k+1) / 6n), q_α the studentized range quantile with infinite df."""
    return _q(k, alpha) * math.sqrt(k * (k + 1) / (6 * n))


def data_sets_needed(k: int, cd: float = TARGET_CD, alpha: float = ALPHA) -> int:
    """The fewest data sets at which the Nemenyi critical difference of k methods is ≤ cd."""
    return math.ceil(_q(k, alpha) ** 2 * k * (k + 1) / (6 * cd**2))


def _q(k: int, alpha: float) -> float:
    return float(stats.studentized_range.ppf(1 - alpha, k, np.inf)) / math.sqrt(2)


def side_by_side(sets: Sequence[DataSet]) -> pd.DataFrame:
    """Numbers per method: ``data_sets`` (boards that ran it), ``mean_rank``, and per board
    ``<name>_mean``, ``_rank``, ``_verdict``; methods on every board first, then by mean rank."""
    ranks = pd.DataFrame({d.name: d.ranks for d in sets})
    out = pd.DataFrame(
        {"data_sets": ranks.notna().sum(axis=1).astype(int), "mean_rank": ranks.mean(axis=1)}
    )
    for d in sets:
        out[f"{d.name}_mean"] = d.means
        out[f"{d.name}_rank"] = d.ranks
        out[f"{d.name}_verdict"] = d.verdicts.reindex(out.index)
    out = out.assign(_name=out.index).sort_values(
        ["data_sets", "mean_rank", "_name"], ascending=[False, True, True]
    )
    return out.drop(columns="_name").rename_axis("method")


def display_side_by_side(numbers: pd.DataFrame, sets: Sequence[DataSet]) -> pd.DataFrame:
    """Display strings of :func:`side_by_side`: — where a board lacks the method or did not
    judge it; the mean rank only when there is more than one data set. Numbers keep their
    value (:class:`~dmlbench.report.tables.Shown`) for the page to sort by."""
    out = pd.DataFrame(index=numbers.index)
    for d in sets:
        ran = numbers[f"{d.name}_rank"].notna()
        verdict = numbers[f"{d.name}_verdict"]
        out[f"{d.name} verdict"] = [str(v) if r and pd.notna(v) else MISSING
                                    for v, r in zip(verdict, ran, strict=True)]  # fmt: skip
        out[f"{d.name} rank"] = [Shown(f"{v:g}", v) if pd.notna(v) else MISSING
                                 for v in numbers[f"{d.name}_rank"]]  # fmt: skip
    if len(sets) > 1:
        out["data sets"] = [Shown(str(n), n) for n in numbers["data_sets"]]
        out["mean rank"] = [Shown(f"{v:.2f}", v) for v in numbers["mean_rank"]]
    return out


def tuned_boards(records: Iterable[Record]) -> Boards:
    """Per label kind present: one tuned board per data set, and a line per board left out.

    Boards are the final records without overrides of one protocol hash, sweep points left
    out; a board's kind is that of its trained rows (its untrained row stays with it)."""
    boards: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        if r.stage == "final" and not r.overrides and not is_sweep_point(r.protocol.name):
            boards[r.protocol.hash].append(r)
    kinds: dict[str, list[list[Record]]] = defaultdict(list)
    for board in sorted(boards.values(), key=lambda b: b[0].protocol.name):
        found = {label_kind(r.method, r.metrics) for r in board} - {None}
        kind = next((k for k in TRACKS if k in found), None)
        if kind is not None:
            kinds[kind].append(board)
    out = {}
    for kind in (k for k in TRACKS if k in kinds):
        tuned = [b for b in kinds[kind] if _budget(b) == "tuned"]
        kept, lines = one_board_per_data_set(r for b in tuned for r in b)
        ranked = {r.protocol.hash for r in kept}
        sets = [data_set(b) for b in tuned if b[0].protocol.hash in ranked]
        lines = [_not_tuned(b) for b in kinds[kind] if _budget(b) != "tuned"] + lines
        out[kind] = ([d for d in sets if d is not None], lines)
    return out


def _budget(board: Sequence[Record]) -> str:
    """:func:`~dmlbench.report.results.board_of` of a board: tuned when any run says which
    search selected it (the untrained row never does, and may come first)."""
    budgets = {board_of(r) for r in board}
    return "tuned" if "tuned" in budgets else board_of(board[0])


def _not_tuned(board: Sequence[Record]) -> str:
    ref = board[0].protocol
    how = DEFAULTS_WORDS if _budget(board) == "defaults" else "hyper-parameters given"
    return (
        f"Not compared: {ref.name} ({ref.hash[:8]}), {how}: only tuned boards are compared "
        "across data sets, so that every data set enters at one budget."
    )


def paper_data() -> tuple[str, ...]:
    """The data sets papers report on (``About.paper_benchmark``), read from the registry."""
    from dmlbench.data import DATASETS

    return tuple(n for n in DATASETS.list() if DATASETS.get(n).about.paper_benchmark)


def _is_paper_data(d: DataSet) -> bool:
    protocol = rebuilt_protocol(d.name, d.protocol_hash)
    name = protocol.data.dataset if protocol is not None else d.name
    return name.startswith(paper_data())


def kind_markdown(
    kind: str, sets: Sequence[DataSet], lines: Sequence[str], pairs: Sequence[Agreement]
) -> str:
    """The section of one label kind: which boards, the table, τ per pair, why no CD diagram."""
    parts = [f"## {TRACKS[kind].capitalize()}"]
    if not sets:
        return "\n\n".join([*parts, "No tuned board: nothing to compare.", *lines]) + "\n"
    names = "; ".join(d.label for d in sets)
    if len(sets) == 1:
        parts.append(
            f"One data set: {names}. Nothing is compared across data sets yet; its verdicts and "
            "ranks are shown alone."
        )
    else:
        parts.append(f"{len(sets)} data sets: {names}.")
    if not any(_is_paper_data(d) for d in sets):
        parts.append(SMALL_DATA)
    numbers = side_by_side(sets)
    parts += [render_markdown(display_side_by_side(numbers, sets)), *lines]
    if pairs:
        parts.append("Rank agreement (Kendall τ over the methods both boards have):")
        parts.append(render_markdown(_display_pairs(pairs), index_name="data sets"))
    k = int((numbers["data_sets"] == len(sets)).sum())
    parts.append(cd_words(k, len(sets)))
    return "\n\n".join(parts) + "\n"


def cd_words(k: int, n: int) -> str:
    """Why no critical-difference diagram is drawn for k methods on every one of n boards
    (with one board: what even three would give)."""
    if k < 2:
        return "No critical-difference diagram: fewer than two methods are on every board."
    cd = nemenyi_cd(k, n if n > 1 else 3)
    where = (
        f"with {k} methods on every board and {n} data sets"
        if n > 1
        else f"there is one data set, and even with 3 data sets and these {k} methods"
    )
    verdict = (
        "so no two methods' mean ranks could be told apart"
        if cd > k - 1
        else "so only mean ranks further apart than that would differ"
    )
    more = (
        f"; {data_sets_needed(k)} data sets would bring it to {TARGET_CD:g} ranks"
        if cd > TARGET_CD
        else ""
    )
    return (
        f"No critical-difference diagram: {where} the Nemenyi critical difference (α = "
        f"{ALPHA:g}) is {cd:.1f} ranks (of at most {k - 1}), {verdict}{more}. The Friedman "
        "test behind it needs many more data sets."
    )


def _display_pairs(pairs: Sequence[Agreement]) -> pd.DataFrame:
    def num(v: float) -> str:
        return MISSING if math.isnan(v) else f"{v:+.2f}"

    return pd.DataFrame(
        {
            "methods": [str(p.methods) for p in pairs],
            "Kendall τ": [num(p.tau) for p in pairs],
            "95% interval": [
                MISSING if math.isnan(p.tau_lo) else f"[{num(p.tau_lo)}, {num(p.tau_hi)}]"
                for p in pairs
            ],
        },
        index=[f"{p.first} vs {p.second}" for p in pairs],
    )


def write_cross_report(records: Iterable[Record], out_dir: Path) -> list[Path]:
    """``cross-dataset.md`` (one section per label kind), ``cross-dataset.csv`` (per method
    and kind: boards, mean rank, each board's mean, rank and verdict; empty where a board
    lacks the method) and ``cross-dataset-agreement.csv`` (τ and its interval per pair of
    data sets); nothing when no final record without overrides names a label kind."""
    return write_boards(tuned_boards(records), out_dir)


def write_boards(boards: Boards, out_dir: Path) -> list[Path]:
    """:func:`write_cross_report` of the boards :func:`tuned_boards` collected: ``dmlbench
    report`` collects them once (each board's bootstrap takes seconds) for these files, the
    pages and the index."""
    if not boards:
        return []
    out_dir.mkdir(parents=True, exist_ok=True)
    pairs = {k: [agreement(a, b) for a, b in combinations(s, 2)] for k, (s, _) in boards.items()}
    sections = [kind_markdown(k, s, lines, pairs[k]) for k, (s, lines) in boards.items()]
    md = "\n".join([f"# Across data sets\n\n{INTRO}\n", *sections])
    tables = [side_by_side(s).assign(label_kind=k) for k, (s, _) in boards.items() if s]
    csv = pd.concat(tables) if tables else pd.DataFrame(columns=["label_kind"])
    csv = csv[["label_kind", *(c for c in csv.columns if c != "label_kind")]]
    columns = ["label_kind", *(f.name for f in fields(Agreement))]
    rows = [{"label_kind": k, **asdict(p)} for k, ps in pairs.items() for p in ps]
    agree = pd.DataFrame(rows, columns=columns)
    paths = [out_dir / f"{STEM}.md", out_dir / f"{STEM}.csv", out_dir / f"{STEM}-agreement.csv"]
    atomic_write_text(paths[0], md)
    atomic_write_text(paths[1], to_csv(csv.rename_axis("method")))
    atomic_write_text(paths[2], agree.to_csv(index=False, na_rep=""))
    return paths
