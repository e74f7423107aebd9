"""What a board can tell apart: the power of its verdicts, from its own fitted law.

A board is worth publishing only if it can find the differences a paper would act on: a
method 3 points behind the best (the equivalence margin δ) should be called *worse* on most
replications of the board, its seeds, test queries and searches drawn again. Whether it is
depends on the board's own sizes (seeds, studies, test classes) and variance components, so
the answer is computed per board, from the same fitted normal law and the same critical
values its verdicts use (:mod:`dmlbench.report.verdicts`):

- each draw of the law gives every pair contrast a deviation of its estimated difference and,
  independently, an estimated standard error (:func:`~dmlbench.report.verdicts.
  deviation_draws`: Wishart draws of every mean-square matrix, floored as the data's are);
- a method truly g behind another is called worse against it when the interval's upper end
  falls below 0, i.e. when dev + c·ŝe < g, c being the pair's critical value on this board;
- so the power at g is the share of draws with dev + c·ŝe < g, and the gap found with
  probability p (4 times in 5 for p = 0.8) is the p-quantile of dev + c·ŝe.

Reported: the median over the pairs of the board's ten leading methods (the methods a "3 points
behind the best" question is about; an unstable method's pairs are among them if it leads).
Being called worse against one other method is enough for Hsu's verdict, whose upper end is the
smallest over the others, so these powers are lower bounds: beside one leader they match the
share of boards simulated from a known truth that call the trailing method worse, beside
several tied leaders the boards find it more often (tests/report/test_power.py). The simulated
law is the critical value's, which errs the same way: it shrinks unequal seed variances
towards their mean and takes the search's luck at its upper confidence bound. ``dmlbench
report`` writes the table (``power.md``, ``power.csv``; docs/reports.md, "What a board can
tell apart").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from dmlbench.metrics import catalogue
from dmlbench.records import Record
from dmlbench.report.board import ALPHA, CROSSED, BoardAnalysis, analyse_board
from dmlbench.report.tables import (
    board_page,
    board_rows,
    records_frame,
    write_board_table,
)
from dmlbench.report.verdicts import (
    N_SIM,
    MeanCovariance,
    critical_value,
    deviation_draws,
    pair_contrasts,
    pairs_floor,
)

STEM = "power"
LEADING = 10  # the leading methods whose pairs the summary is over
TARGET = 0.8  # the power a board should have for a gap of δ


@dataclass(frozen=True)
class Power:
    """One board's power for gaps between its leading methods (medians over their pairs)."""

    pairs: int
    se: float  # the estimated standard error of a difference
    power: float  # P(a method δ behind is called worse)
    gap: float  # the gap called worse with probability TARGET
    delta: float

    @property
    def enough(self) -> bool:
        """Whether a gap of δ is found with at least :data:`TARGET` probability."""
        return self.power >= TARGET


def pair_power(
    mc: MeanCovariance,
    gap: float,
    alpha: float = ALPHA,
    target: float = TARGET,
    n: int = N_SIM,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per pair i < j (:func:`~dmlbench.report.verdicts.pair_contrasts`' order): the power
    to call a method ``gap`` behind the other *worse*, the gap found with probability
    ``target``, and the estimated standard error (module docstring). Pairs whose contrast
    never varies get power 1 at any positive gap and gap 0."""
    w = pair_contrasts(len(mc.means))[2]
    c = critical_value(mc, w, alpha, n, seed, pairs_floor(mc, alpha))
    dev, se = deviation_draws(mc, w, n, seed + 2)  # draws apart from the critical value's
    reach = dev + c * se  # called worse when the true gap exceeds this
    return (
        (reach < gap).mean(axis=0),
        np.quantile(reach, target, axis=0),
        np.sqrt(np.maximum(mc.contrasts(w), 0.0)),
    )


def board_power(
    mc: MeanCovariance, delta: float, higher: bool = True, leading: int = LEADING
) -> Power:
    """The medians of :func:`pair_power` over the pairs of the ``leading`` best methods."""
    order = np.argsort(-mc.means if higher else mc.means, kind="stable")[:leading]
    keep = set(int(i) for i in order)
    i, j, _ = pair_contrasts(len(mc.means))
    rows = np.array([a in keep and b in keep for a, b in zip(i, j, strict=True)])
    power, gap, se = (x[rows] for x in pair_power(mc, delta))
    return Power(int(rows.sum()), float(np.median(se)), float(np.median(power)),
                 float(np.median(gap)), delta)  # fmt: skip


COLUMNS = [
    "board", "metric", "seeds", "studies", "counted", "se of a difference",
    "power at δ", "gap found 4 times in 5", "enough (power ≥ 0.8)",
]  # fmt: skip


def power_row(
    name: str, protocol_hash: str, records: list[Record], board: BoardAnalysis | None = None
) -> dict[str, object] | None:
    """One board's row (None where nothing is judged: one seed or one trained method);
    ``board``, its analysis where the caller has made it (fitting a board's law and
    simulating its critical values is the costly part of a report)."""
    if board is None:
        finals = [r for r in records if r.stage == "final" and not r.overrides]
        board = analyse_board(records_frame(finals), finals)
    if board.moments is None or board.metric is None:
        return None
    p = board_power(board.moments, board.margin, board.higher_is_better)
    scale = catalogue.scale(board.metric)
    return {
        "board": f"{name} ({protocol_hash[:8]})",
        "metric": board.metric,
        "seeds": len(board.shared_seeds),
        "studies": board.studies,
        "counted": _counted(board),
        "se of a difference": round(scale * p.se, 2),
        "power at δ": f"{p.power:.2f} (δ = {scale * p.delta:g})",
        "gap found 4 times in 5": round(scale * p.gap, 1),
        "enough (power ≥ 0.8)": "yes" if p.enough else "no",
    }


def _counted(board: BoardAnalysis) -> str:
    """What the board's uncertainty counts besides the seeds (and the searches' studies)."""
    if board.resampled != CROSSED:
        return "seeds only"
    continuous = catalogue.label_kind_of([board.metric or ""]) == "continuous"
    return "seeds, test queries" if continuous else "seeds, test classes"


def power_table(
    boards: Mapping[tuple[str, str], list[Record]],
    analyses: Mapping[str, BoardAnalysis] | None = None,
) -> pd.DataFrame:
    """The rows of the boards ``(name, hash) -> records``, by board name; ``analyses``, the
    boards already analysed, by protocol hash."""
    made = analyses or {}
    return board_rows(boards, lambda n, h, recs: power_row(n, h, recs, made.get(h)), COLUMNS)


def render_power(table: pd.DataFrame) -> str:
    """The Markdown page: what is computed, the table, how to read it."""
    intro = (
        "The power of each board's verdicts, from its own fitted law and critical values "
        f"(medians over the pairs of its {LEADING} leading methods): *power at δ*, the "
        "share of replications of the board (seeds, test queries and, where the tuned "
        "methods were searched several times, the searches drawn again) in which a method "
        "δ behind another is called *worse*; *gap found 4 times in 5*, the gap called "
        "*worse* with probability 0.8; the standard error of a difference, in the "
        "metric's units (points for a percentage). Lower bounds: one pair suffices for "
        "Hsu's verdict, and the search's luck is simulated at its upper confidence bound."
    )
    rule = (
        "A board should find a gap of δ with probability 0.8 or more; one that does not "
        "needs more seeds, more search studies or more test classes before a verdict of "
        "*undecided* on it says much (docs/reports.md, 'What a board can tell apart')."
    )
    return board_page("What each board can tell apart", intro, table, rule)


def write_power_report(
    boards: Mapping[tuple[str, str], list[Record]],
    out_dir: Path,
    analyses: Mapping[str, BoardAnalysis] | None = None,
) -> list[Path]:
    """``power.md`` and ``power.csv`` in ``out_dir`` (nothing when no board is judged);
    ``analyses`` as :func:`power_table`'s."""
    return write_board_table(power_table(boards, analyses), render_power, out_dir, STEM)
