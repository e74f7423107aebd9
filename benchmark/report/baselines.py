"""Every board against the rows that need no learning, in one table (``gate.md``, ``gate.csv``).

A board measures metric learning only if its methods clear nearest neighbours on raw pixels,
the untrained network and the pretrained network without fine-tuning by a wide margin
(:mod:`dmlbench.report.gate`). Each board's page shows those rows beside its methods; this
table puts the boards side by side: the best method, the best row that needs no learning, the
gain between them against the margin the gate asks for, and how many methods end no better
than the starting point. It is computed from the records alone, so it says the same of a
committed board as of one a user just ran.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from dmlbench.metrics import catalogue
from dmlbench.protocol import DEFAULT_GATE_MARGIN
from dmlbench.records import BASELINES, PRETRAINED, Record, baselines_for
from dmlbench.report.gate import BELOW_START, Gate, GateError, gate, no_better_than_start
from dmlbench.report.tables import board_page, board_rows, write_board_table
from dmlbench.report.titles import rebuilt_protocol

STEM = "gate"
COLUMNS = [
    "board", "metric", "best method", "mean", "best row without learning", "row mean",
    "gain (points)", "gate asks", "gate", BELOW_START,
]  # fmt: skip


def board_means(records: Iterable[Record]) -> dict[str, dict[str, float]]:
    """Each entry's mean over its seeds, per metric, from one board's final records."""
    values: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        if r.stage == "final" and not r.overrides:
            for metric, v in r.metrics.items():
                values[r.method][metric].append(float(v))
    return {m: {k: sum(v) / len(v) for k, v in ms.items()} for m, ms in values.items()}


def gate_terms(name: str, protocol_hash: str) -> tuple[float, list[str]]:
    """The protocol's ``report.gate_margin`` and its no-learning rows where it can be rebuilt;
    else the default margin and the rows every protocol has (pixels, untrained)."""
    protocol = rebuilt_protocol(name, protocol_hash)
    if protocol is None:
        return DEFAULT_GATE_MARGIN, [b for b in BASELINES if b != PRETRAINED]
    return protocol.report.gate_margin, baselines_for(protocol)


def board_gate(name: str, protocol_hash: str, records: Iterable[Record]) -> Gate | None:
    """The gate of one board from its final records (None when it has no trained method or no
    row without learning, so that there is nothing to compare)."""
    try:
        return gate(name, board_means(records), *gate_terms(name, protocol_hash))
    except GateError:
        return None


def gate_shortfall(name: str, protocol_hash: str, records: Iterable[Record]) -> str | None:
    """Why a board is not shown to measure metric learning, in words (None where it passes
    the gate, or has no row without learning to be judged against): below the margin over the
    rows it has, or above it but without a row its protocol has (made before that row
    existed)."""
    g = board_gate(name, protocol_hash, records)
    if g is None or g.passed:
        return None
    gain = (
        f"best method {100 * g.margin:+.1f} points over {g.baseline}, a board needs "
        f"{100 * g.required:+.0f}"
    )
    if not g.cleared:
        return f"below the gate ({gain}): its verdicts rank which loss harms the start least"
    missing = " or ".join(g.missing)
    return f"not judged by the gate ({gain}; no {missing} row: the board predates it)"


def gate_row(name: str, protocol_hash: str, records: list[Record]) -> dict[str, object] | None:
    """One board's row (None when it has no trained method or no row without learning)."""
    means = board_means(records)
    g = board_gate(name, protocol_hash, records)
    if g is None:
        return None
    trained = [m for m in means if m not in BASELINES]
    below = no_better_than_start(means, g.metric, catalogue.higher_is_better(g.metric))
    start = f"{len(below)} of {len(trained)}" if PRETRAINED in means else "no pretrained row"
    return {
        "board": f"{name} ({protocol_hash[:8]})",
        "metric": g.metric,
        "best method": g.method,
        "mean": round(100 * g.value, 1),
        "best row without learning": g.baseline,
        "row mean": round(100 * g.baseline_value, 1),
        "gain (points)": round(100 * g.margin, 1),
        "gate asks": round(100 * g.required, 1),
        "gate": g.status,
        BELOW_START: start,
    }


def gate_table(boards: dict[tuple[str, str], list[Record]]) -> pd.DataFrame:
    """The rows of the boards ``(name, hash) -> final records``, by board name."""
    return board_rows(boards, gate_row, COLUMNS)


def render_gate(table: pd.DataFrame) -> str:
    """The Markdown page: a sentence on what is compared, the table, the rule."""
    intro = (
        "Means over seeds of the headline metric (Recall@1, nDCG@10 for continuous labels), "
        "in %. Rows that need no learning: nearest neighbours on the raw test pixels, the "
        "untrained network and, where the protocol starts from pretrained weights, that "
        "network without fine-tuning."
    )
    rule = (
        "A board is published only when its best method's gain is at least what the gate "
        "asks (`report.gate_margin` of its protocol), over every row its protocol has: a "
        "board made before a row existed is not judged until it is regenerated. "
        f"{BELOW_START.capitalize()}: methods whose mean is not above the pretrained row's."
    )
    return board_page("Every board against the rows that need no learning", intro, table, rule)


def write_gate_report(boards: dict[tuple[str, str], list[Record]], out_dir: Path) -> list[Path]:
    """``gate.md`` and ``gate.csv`` in ``out_dir`` (nothing when no board has both kinds of
    rows)."""
    return write_board_table(gate_table(boards), render_gate, out_dir, STEM)
