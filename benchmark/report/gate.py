"""The gate a board passes before it is written: its best method beats the rows that need no
learning by a wide margin.

A board whose best method sits a few points above nearest neighbours on raw pixels, the
untrained network or the pretrained network without fine-tuning measures which loss harms a
starting point least, not which one learns a metric; the differences between methods that the
verdicts then judge are a few points too. The margin (the protocol's ``report.gate_margin``,
10 points of the headline metric, Recall@1 or nDCG@10, by default) asks for a gain over the
best such row several times the equivalence margin of the verdicts (3 points).
``dmlbench check --update`` refuses to write a board that fails it, naming the margin.

A method whose mean is not above the pretrained row's (the starting point every method
fine-tunes) has learned nothing the starting point did not already know: every table and plot
marks it ``BELOW_START`` beside its verdict, so a reader never takes "undecided" or
"equivalent" among such methods for learning. The comparison is of means, like the gate's:
the pretrained row is the same network on every seed, so its value has no seed spread, and a
method's own spread is in its verdict.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from dmlbench.errors import DmlbenchError
from dmlbench.metrics.catalogue import HEADLINE
from dmlbench.protocol import DEFAULT_GATE_MARGIN
from dmlbench.records import BASELINES, PRETRAINED

BELOW_START = "no better than the starting point"


class GateError(DmlbenchError):
    """A board's best method does not clear the rows that need no learning."""


@dataclass(frozen=True)
class Gate:
    """The headline metric's best method and best no-learning row of one board (means over
    seeds)."""

    board: str
    metric: str
    method: str
    value: float
    baseline: str
    baseline_value: float
    required: float = DEFAULT_GATE_MARGIN
    missing: tuple[str, ...] = ()  # rows the protocol has that the board lacks

    @property
    def margin(self) -> float:
        return self.value - self.baseline_value

    @property
    def cleared(self) -> bool:
        """The margin is met over the rows the board has (whatever rows it lacks)."""
        return self.margin >= self.required - 1e-12

    @property
    def passed(self) -> bool:
        """Cleared by the margin, against every row the protocol has: a board without its
        pixels row has not been shown to beat the simplest of them."""
        return not self.missing and self.cleared

    @property
    def status(self) -> str:
        """``passes``, ``fails`` or, where rows are missing, ``not judged: no <row> row``."""
        if self.missing:
            return f"not judged: no {' or '.join(self.missing)} row"
        return "passes" if self.passed else "fails"

    def sentence(self) -> str:
        verdict = "passes" if self.passed else "FAILS"
        lacking = f" (it lacks the {', '.join(self.missing)} row)" if self.missing else ""
        return (
            f"{self.board} {verdict} the gate: best method {self.method} {self.metric} "
            f"{100 * self.value:.1f}, {100 * self.margin:+.1f} points over the best row that "
            f"needs no learning ({self.baseline}, {100 * self.baseline_value:.1f}){lacking}; "
            f"a board needs {100 * self.required:+.0f}"
        )


def headline_of(means: Mapping[str, Mapping[str, float]]) -> str:
    """The headline metric every entry of a board has (Recall@1, else nDCG@10)."""
    for metric in HEADLINE:
        if all(metric in m for m in means.values()):
            return metric
    raise GateError("the board's entries share no headline metric (Recall@1 or nDCG@10)")


def gate(
    board: str,
    means: Mapping[str, Mapping[str, float]],
    required: float = DEFAULT_GATE_MARGIN,
    rows: Iterable[str] = (),
) -> Gate:
    """The gate of a board from each entry's mean metrics (method → metric → mean); ``rows``:
    the no-learning rows its protocol has (:func:`dmlbench.records.baselines_for`), each of
    which the board must hold to pass.

    Raises:
        GateError: the board has no trained method or no row that needs no learning.
    """
    metric = headline_of(means)
    trained = {m: v[metric] for m, v in means.items() if m not in BASELINES}
    floors = {m: v[metric] for m, v in means.items() if m in BASELINES}
    if not trained or not floors:
        absent = "trained method" if not trained else "row that needs no learning"
        raise GateError(f"{board}: no {absent}: the gate compares both")
    method = max(trained, key=lambda m: (trained[m], m))
    baseline = max(floors, key=lambda m: (floors[m], m))
    lacking = tuple(r for r in rows if r not in floors)
    return Gate(
        board, metric, method, trained[method], baseline, floors[baseline], required, lacking
    )


def require(gates: list[Gate]) -> None:
    """Refuse boards that fail the gate, naming each and its margin.

    Raises:
        GateError: one line per failing board.
    """
    failed = [g.sentence() for g in gates if not g.passed]
    if failed:
        raise GateError("not written: " + "; ".join(failed) + " (docs/leaderboard.md, 'The gate')")


def no_better_than_start(
    means: Mapping[str, Mapping[str, float]], metric: str, higher: bool = True
) -> tuple[str, ...]:
    """The trained methods whose mean ``metric`` is not better than the pretrained row's, in
    name order (none when the board has no pretrained row or it lacks ``metric``)."""
    start = means.get(PRETRAINED, {}).get(metric)
    if start is None:
        return ()
    sign = 1.0 if higher else -1.0
    return tuple(
        sorted(
            m
            for m, v in means.items()
            if m not in BASELINES and metric in v and sign * (v[metric] - start) <= 1e-12
        )
    )


def verdict_text(verdict: str, below_start: bool) -> str:
    """A verdict as printed in tables and plots: ``BELOW_START`` beside it where the method's
    mean is not above the pretrained row's (every table and plot says it in the same words)."""
    return f"{verdict}, {BELOW_START}" if below_start else verdict
