"""Across data sets: each method's verdict and rank on every tuned board of one label kind,
side by side, and whether two boards agree on the order of the methods beyond chance
(Kendall τ with a permutation test).

Not the usual answer: the Friedman test and its Nemenyi critical-difference diagram (Demšar,
JMLR 2006) need many data sets; with 20 methods on 3 the critical difference is about 17 ranks
of at most 19 (:func:`nemenyi_cd`), so hardly a pair could be told apart. A bootstrap interval
of τ over each board's seeds and classes (what this module printed before) reflects only the
noise inside each board: two unrelated orders of 20 methods give τ with a standard deviation
of 0.16 whatever the boards' noise, so an interval of ±0.1 around +0.31 claimed far more than
two data sets show. The question two boards can answer is "do these orders agree more than
two unrelated orders would?", and its test is a permutation test: under the null the methods'
labels on one board are exchangeable, so τ of the observed orders is compared with τ over
every order of one board (exact up to :data:`EXACT_UP_TO` methods) or :data:`PERMUTATIONS`
random ones. Even a small p-value is about these boards, on these data sets: with three data
sets nothing says how orders vary over data sets in general. Tuned boards only, one per data
set, so that every data set enters once and at one budget. :data:`INTRO` is what the report
says each number means.
"""

from __future__ import annotations

import math
import zlib
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, fields, replace
from itertools import combinations, permutations
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from dmlbench.records import Record, atomic_write_text
from dmlbench.report.baselines import gate_shortfall
from dmlbench.report.board import analyse_board
from dmlbench.report.plots import is_sweep_point
from dmlbench.report.ranking import TRACKS, label_kind, one_board_per_data_set
from dmlbench.report.results import board_of
from dmlbench.report.significance import holm as holm_adjust
from dmlbench.report.tables import Shown, records_frame, render_markdown, to_csv
from dmlbench.report.titles import DEFAULTS_WORDS, margin_words, rebuilt_protocol

ALPHA = 0.05
PERMUTATIONS = 10_000  # random orders of one board for the permutation p-value
EXACT_UP_TO = 8  # methods: every order (8! = 40,320) instead of random ones
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
    "the methods both have (1 = the same order, 0 = unrelated, −1 = reversed), with a "
    "permutation p-value: the share of orders of one board's methods (every order up to "
    f"{EXACT_UP_TO} methods, else {PERMUTATIONS:,} random ones) whose τ with the other board is "
    "at least the observed one. A small p says these two boards order the methods alike more "
    "than two unrelated orders would (20 methods in unrelated orders give τ with sd 0.16); a "
    "large p is no evidence that they differ; Holm's adjustment is over the pairs of data sets "
    "of one label kind. What three data sets can show: whether their boards agree with each "
    "other, and each method's verdict on each. What they cannot show: that an order, a "
    "winner or a gap holds on data sets not run; the rank agreement of three boards is a "
    "sample of three, and no interval here is over the choice of data sets."
)
SMALL_DATA = (
    "This is evidence on small synthetic or locally installed data sets only, not on CUB-200, "
    "Cars196 or SOP: an order that holds here is a hypothesis for those benchmarks, not a result "
    "on them."
)


@dataclass(frozen=True)
class DataSet:
    """One tuned board as the comparison sees it: the methods' means of the headline metric
    over their seeds and their verdicts."""

    name: str
    protocol_hash: str
    metric: str
    higher_is_better: bool
    means: pd.Series
    verdicts: pd.Series
    margin: float

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
    return DataSet(
        ref.name, ref.hash, board.metric, board.higher_is_better, means, verdicts, board.margin
    )


def kendall_tau(a: np.ndarray, b: np.ndarray) -> float:
    """Kendall τ-b (ties counted as scipy does); NaN when either side is constant."""
    return float(stats.kendalltau(a, b).statistic)


@dataclass(frozen=True)
class Agreement:
    """Kendall τ between two boards' orders over the methods both have, its one-sided
    permutation p-value (agreement beyond chance) and that p adjusted by Holm over the pairs
    of one label kind."""

    first: str
    second: str
    methods: int
    tau: float = math.nan
    p_value: float = math.nan
    p_holm: float = math.nan
    permutations: int = 0  # 0 where no test was run; k! where exact


def _signs(x: np.ndarray) -> np.ndarray:
    """sign(x_i − x_j) over the pairs i < j, for each row of ``x`` (… × k)."""
    i, j = np.triu_indices(x.shape[-1], 1)
    return np.sign(x[..., i] - x[..., j])


def permutation_p(
    a: np.ndarray, b: np.ndarray, n: int = PERMUTATIONS, seed: int = 0
) -> tuple[float, int]:
    """One-sided p-value of Kendall τ-b of ``a`` and ``b`` against every order of ``b`` (k ≤
    :data:`EXACT_UP_TO`; p = the share of orders with τ ≥ the observed one) or ``n`` random
    ones (p = (1 + count) / (1 + n), Phipson & Smyth 2010), and the number of orders used.
    τ-b's denominator is the same for every order of ``b``, so the numerators are compared."""
    sa = _signs(a)
    observed = float(sa @ _signs(b))
    k = len(b)
    if k <= EXACT_UP_TO:
        orders = np.array(list(permutations(range(k))))
        scores = _signs(b[orders]) @ sa
        return float(np.mean(scores >= observed - 1e-9)), len(orders)
    rng = np.random.default_rng(seed)
    orders = rng.permuted(np.tile(np.arange(k), (n, 1)), axis=1)
    scores = _signs(b[orders]) @ sa
    return float((1 + np.sum(scores >= observed - 1e-9)) / (1 + n)), n


def agreement(a: DataSet, b: DataSet, n: int = PERMUTATIONS) -> Agreement:
    """τ over the methods both boards have and its permutation p-value (one-sided: do the
    boards agree more than unrelated orders?); NaN where fewer than :data:`MIN_METHODS` are
    shared. τ of the means is τ of their ranks: only the order of each pair counts. The random
    orders are drawn from a stream named by the two boards, so a report is reproducible."""
    common = sorted(set(a.means.index) & set(b.means.index))
    if len(common) < MIN_METHODS:
        return Agreement(a.name, b.name, len(common))
    sa, sb = (1.0 if d.higher_is_better else -1.0 for d in (a, b))
    x, y = sa * a.means[common].to_numpy(), sb * b.means[common].to_numpy()
    tau = kendall_tau(x, y)
    if math.isnan(tau):
        return Agreement(a.name, b.name, len(common), tau)
    stream = zlib.crc32(f"{a.protocol_hash}{b.protocol_hash}".encode())
    p, used = permutation_p(x, y, n, stream)
    return Agreement(a.name, b.name, len(common), tau, p, p, used)


def holm(pairs: Sequence[Agreement]) -> list[Agreement]:
    """``pairs`` with ``p_holm``: Holm's step-down adjustment over the tested pairs
    (:func:`dmlbench.report.significance.holm`; untested pairs stay NaN)."""
    adjusted = holm_adjust([p.p_value for p in pairs])
    return [replace(p, p_holm=float(a)) for p, a in zip(pairs, adjusted, strict=True)]


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
        gates = {b[0].protocol.hash: _not_gated(b) for b in tuned}
        ungated = [line for line in gates.values() if line is not None]
        tuned = [b for b in tuned if gates[b[0].protocol.hash] is None]
        kept, lines = one_board_per_data_set(r for b in tuned for r in b)
        ranked = {r.protocol.hash for r in kept}
        sets = [data_set(b) for b in tuned if b[0].protocol.hash in ranked]
        lines = [_not_tuned(b) for b in kinds[kind] if _budget(b) != "tuned"] + ungated + lines
        out[kind] = ([d for d in sets if d is not None], lines)
    return out


def _budget(board: Sequence[Record]) -> str:
    """:func:`~dmlbench.report.results.board_of` of a board: tuned when any run says which
    search selected it (the untrained row never does, and may come first)."""
    budgets = {board_of(r) for r in board}
    return "tuned" if "tuned" in budgets else board_of(board[0])


def _not_gated(board: Sequence[Record]) -> str | None:
    """The line that leaves out a board that has not passed the gate (None where it has, or
    where it has no row without learning to be judged against): a board whose methods do not
    clear the rows that need no learning ranks which loss harms a starting point least, and
    its order says nothing about metric learning on another data set."""
    ref = board[0].protocol
    shortfall = gate_shortfall(ref.name, ref.hash, board)
    if shortfall is None:
        return None
    return f"Not compared: {ref.name} ({ref.hash[:8]}), {shortfall}."


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
        parts.append(
            "Rank agreement (Kendall τ over the methods both boards have; one-sided "
            "permutation p-value, and Holm-adjusted over these pairs):"
        )
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

    def pval(v: float, n: int) -> str:
        return MISSING if math.isnan(v) else f"{v:.3f}" if v >= 1e-3 else f"{v:.4f}"

    return pd.DataFrame(
        {
            "methods": [str(p.methods) for p in pairs],
            "Kendall τ": [num(p.tau) for p in pairs],
            "p (permutation)": [pval(p.p_value, p.permutations) for p in pairs],
            "p (Holm)": [pval(p.p_holm, p.permutations) for p in pairs],
            "orders": [
                f"{p.permutations:,}" + (" (all)" if p.methods <= EXACT_UP_TO else " (random)")
                if p.permutations
                else MISSING
                for p in pairs
            ],
        },
        index=[f"{p.first} vs {p.second}" for p in pairs],
    )


def write_cross_report(records: Iterable[Record], out_dir: Path) -> list[Path]:
    """``cross-dataset.md`` (one section per label kind), ``cross-dataset.csv`` (per method
    and kind: boards, mean rank, each board's mean, rank and verdict; empty where a board
    lacks the method) and ``cross-dataset-agreement.csv`` (τ, its permutation p-value, Holm's
    adjustment and the orders used, per pair of data sets); nothing when no final record
    without overrides names a label kind."""
    return write_boards(tuned_boards(records), out_dir)


def write_boards(boards: Boards, out_dir: Path) -> list[Path]:
    """:func:`write_cross_report` of the boards :func:`tuned_boards` collected: ``dmlbench
    report`` collects them once for these files, the pages and the index."""
    if not boards:
        return []
    out_dir.mkdir(parents=True, exist_ok=True)
    pairs = {
        k: holm([agreement(a, b) for a, b in combinations(s, 2)]) for k, (s, _) in boards.items()
    }
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
