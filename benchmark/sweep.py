"""Sweeps: run a protocol over several values of one key (``dmlbench sweep``).

Each value makes a derived protocol, ``Protocol.with_overrides({key: value})`` named
``<protocol>@<key>=<value>``; it validates like any protocol and has its own hash, written
into every record, so a derived protocol's numbers are never mixed with the base protocol's.
Records go where ``dmlbench run`` puts them; the command then writes one table per derived
protocol and a plot of every metric against the swept value, one line per method
(``reports/sweep-<protocol>-<key>.png`` and ``.svg``). Kim et al.'s Fig. 5 (performance versus
embedding dimension, Kim et al. 2019) is::

    dmlbench sweep --protocol poses --over model.embedding_size=16,32,64,128 \\
        --method log-ratio,triplet-dense
"""

from __future__ import annotations

import sys
from typing import Any

from dmlbench.errors import DmlbenchError


def parse_over(text: str) -> tuple[str, list[tuple[str, Any]]]:
    """``"model.embedding_size=16,32"`` → (key, [("16", 16), ("32", 32)]): text and value."""
    from dmlbench.report.plots import parse_value

    key, eq, rest = text.partition("=")
    tokens = [t.strip() for t in rest.split(",") if t.strip()]
    if not eq or not key.strip() or not tokens:
        raise DmlbenchError(f"--over {text!r}: expected KEY=VALUE1,VALUE2,...")
    if len(set(tokens)) != len(tokens):
        raise DmlbenchError(f"--over {text!r}: a value is repeated")
    return key.strip(), [(t, parse_value(t)) for t in tokens]


def sweep_protocols(protocol: Any, key: str, values: list[tuple[str, Any]]) -> list[Any]:
    """The derived protocols, validated (an unknown key or a bad value fails before any run)."""
    from dmlbench.report.plots import sweep_name

    return [
        protocol.with_overrides({key: value}, name=sweep_name(protocol.name, key, token))
        for token, value in values
    ]


def run_sweep(
    protocol: Any,
    key: str,
    values: list[tuple[str, Any]],
    methods: list[str],
    seeds: list[int],
    options: Any,
) -> list[Any]:
    """Run every derived protocol (``runner.run_protocol`` resumes) and return the records."""
    from dmlbench.run import run_protocol

    records = []
    for derived in sweep_protocols(protocol, key, values):
        print(f"sweep: {derived.name} ({derived.short_hash})", file=sys.stderr)
        records += run_protocol(derived, methods, seeds, options)
    return records
