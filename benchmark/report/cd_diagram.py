"""Critical-difference diagram of one board, after Demšar (JMLR 2006).

Methods sit on an axis of average rank (rank 1 best): each seed is a block in which the methods
are ranked, and the ranks are averaged over the seeds on which every method ran. Thick bars join
groups of methods that the board cannot tell apart. Demšar draws them from the Nemenyi critical
difference; here two methods are "not different" when the Holm-corrected paired t-test over
seeds (:func:`dmlbench.report.significance.paired_seed_tests`) gives ``p_holm ≥ α``, which uses
the scores themselves and not only their ranks. A bar joins a maximal run of methods, consecutive
in rank order, in which *every* pair is not different (pairwise tests are not transitive, so a
clique is needed, not just its two ends), as in the standard drawing.

With one seed no difference can be tested: no bars are drawn and the title says so. The data
step (:func:`cd_data`, :func:`cd_groups`) is pure and tested; :func:`draw_cd_diagram` only
draws, with ``matplotlib.figure.Figure`` (the Agg canvas, no pyplot state) as in
:mod:`dmlbench.report.bars`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import matplotlib
import pandas as pd
from matplotlib.figure import Figure

from dmlbench.report.significance import paired_seed_tests, seed_ranks
from dmlbench.report.titles import wrap_title

TITLE_WIDTH = 90  # characters per title line: a board's title names its protocol and budget


@dataclass(frozen=True)
class CDData:
    """Average ranks (best first), the bars (tuples of methods) and the number of seeds used."""

    ranks: pd.Series
    groups: list[tuple[str, ...]]
    n_seeds: int
    alpha: float

    @property
    def claimable(self) -> bool:
        return self.n_seeds >= 2


def cd_groups(order: list[str], tests: pd.DataFrame, alpha: float = 0.05) -> list[tuple[str, ...]]:
    """Maximal runs of consecutive methods in ``order`` with no significant pair among them.

    ``order`` is the methods by average rank, ``tests`` a :func:`paired_seed_tests` table; a pair
    is significant when ``p_holm < alpha`` (NaN: not). Runs of one method and runs contained in
    another run are dropped, so each bar in the drawing is a maximal clique.
    """
    significant = {frozenset((r.a, r.b)) for r in tests.itertuples(index=False) if r.p_holm < alpha}
    runs: list[tuple[int, int]] = []
    for i in range(len(order)):
        j = i
        while j + 1 < len(order) and all(
            frozenset((order[k], order[j + 1])) not in significant for k in range(i, j + 1)
        ):
            j += 1
        if j > i and not (runs and runs[-1][1] >= j):
            runs.append((i, j))
    return [tuple(order[i : j + 1]) for i, j in runs]


def cd_data(
    scores: pd.DataFrame, metric: str, higher_is_better: bool = True, alpha: float = 0.05
) -> CDData:
    """Average ranks over the complete seeds and the bars of the diagram (none with one seed).

    ``scores`` has columns ``method``, ``seed`` and ``metric``; the tests are run on the same
    complete seeds as the ranks, so the bars and the axis describe the same runs.
    """
    ranks = seed_ranks(scores, metric, higher_is_better)
    complete = scores[scores["seed"].isin(ranks.index) & scores[metric].notna()]
    average = ranks.mean().sort_index().sort_values(kind="stable")
    if len(ranks) < 2:
        return CDData(average, [], len(ranks), alpha)
    tests = paired_seed_tests(complete, metric, higher_is_better)
    return CDData(average, cd_groups(list(average.index), tests, alpha), len(ranks), alpha)


def _caption(data: CDData) -> str:
    seeds = f"average rank over {data.n_seeds} seed{'s' if data.n_seeds != 1 else ''}"
    if not data.claimable:
        return f"{seeds}: no significance can be claimed"
    return f"{seeds}; bars: no significant difference (paired t over seeds, Holm, α={data.alpha:g})"


def tick_step(k: int) -> int:
    """Label every rank up to 12 methods, then every 2nd (5th beyond 30): the labels of a
    20-method axis ran together."""
    return 1 if k <= 12 else 2 if k <= 30 else 5


def draw_cd_diagram(data: CDData, title: str) -> Figure:
    """Rank axis on top (1 at the left), methods hanging from their rank, bars underneath."""
    k = len(data.ranks)
    lo, hi = 1.0, float(max(k, 2))
    half = (k + 1) // 2
    width = 7.0 + 0.15 * max(0, k - 12)  # more ranks, a longer axis
    fig = Figure(figsize=(width, 1.6 + 0.3 * (half + len(data.groups))), layout="constrained")
    ax = fig.add_subplot()
    ax.set_axis_off()
    ax.hlines(0, lo, hi, color="black", linewidth=1)
    step = tick_step(k)
    for t in range(1, int(hi) + 1):
        labelled = t == 1 or t % step == 0
        ax.vlines(t, 0, 0.1 if labelled else 0.05, color="black", linewidth=1)
        if labelled:
            ax.text(t, 0.18, str(t), ha="center", va="bottom", fontsize=9)
    rows = [-(0.25 + 0.2 * i) for i in range(len(data.groups))]
    for y, group in zip(rows, data.groups, strict=True):
        xs = [float(data.ranks[m]) for m in group]
        ax.hlines(y, min(xs) - 0.03, max(xs) + 0.03, color="black", linewidth=4)
    top = min(rows, default=-0.05) - 0.25
    for i, (method, rank) in enumerate(data.ranks.items()):
        left = i < half
        y = top - 0.3 * (i if left else k - 1 - i)
        edge = lo - 0.1 * (hi - lo) if left else hi + 0.1 * (hi - lo)
        ax.plot([rank, rank, edge], [0, y, y], color="0.3", linewidth=0.8)
        label = f"{method} ({rank:.2f})" if left else f"({rank:.2f}) {method}"
        ax.text(edge, y, f" {label} ", ha="right" if left else "left", va="center", fontsize=9)
    ax.set_xlim(lo - 0.1 * (hi - lo), hi + 0.1 * (hi - lo))
    ax.set_ylim(top - 0.3 * max(half, 1), 0.45)
    ax.set_title(f"{wrap_title(title, TITLE_WIDTH)}\n{_caption(data)}", fontsize=10)
    return fig


def write_cd_diagram(
    scores: pd.DataFrame,
    metric: str,
    out_stem: Path,
    title: str,
    higher_is_better: bool = True,
) -> list[Path]:
    """Write ``<out_stem>.png`` and ``<out_stem>.svg``; nothing when no method has a score."""
    data = cd_data(scores, metric, higher_is_better)
    if data.ranks.empty:
        return []
    fig = draw_cd_diagram(data, title)
    out_stem.parent.mkdir(parents=True, exist_ok=True)
    png, svg = (out_stem.parent / f"{out_stem.name}.{ext}" for ext in ("png", "svg"))
    with matplotlib.rc_context({"svg.hashsalt": "dmlbench", "svg.fonttype": "none"}):
        fig.savefig(png, dpi=120, bbox_inches="tight", metadata={"Software": None})
        fig.savefig(svg, bbox_inches="tight", metadata={"Date": None, "Creator": None})
    return [png, svg]
