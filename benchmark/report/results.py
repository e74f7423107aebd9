"""Results as data: every record's metrics as one tidy pandas frame.

The report's tables answer the questions this project asks; a reader with another question
(a different metric, a plot over epochs, a test of their own) should not parse Markdown or
re-implement the record schema. :func:`load_results` gives one row per (record × metric) with
the provenance a number needs to be trusted: protocol name, version and hash, the board, the
data fingerprint, the hyper-parameters and overrides, the git commit and the wall time.

Every record is a row source, search trials included (``stage`` says which: ``final`` or
``search-trial``); filter on ``stage == "final"`` for the numbers the report tables use. Rows
are never averaged or deduplicated here: two copies of one run (a results folder holding the
committed leaderboard beside a re-run) stay two rows, so pass ``skip=("leaderboard",)`` or
filter when averaging, as ``dmlbench report`` does.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from dmlbench.records import Record, load_record, load_records

COLUMNS = [
    "protocol", "protocol_version", "protocol_hash", "board", "method", "seed", "stage",
    "metric", "value", "hparams", "overrides", "data_fingerprint", "git_commit", "wall_seconds",
]  # fmt: skip
DEFAULTS_SUFFIX = "@defaults"


def board_of(record: Record) -> str:
    """``defaults`` (a zero-budget ``X@defaults`` protocol), ``tuned`` (the record says which
    search selected it) or ``fixed`` (neither: hyper-parameters given, not searched)."""
    if record.protocol.name.endswith(DEFAULTS_SUFFIX):
        return "defaults"
    return "tuned" if record.search else "fixed"


def results_frame(records: Iterable[Record]) -> pd.DataFrame:
    """The tidy frame of ``records``: one row per (record × metric), columns :data:`COLUMNS`.

    ``hparams`` and ``overrides`` are JSON strings (sorted keys), so the frame stays flat and
    two runs with the same settings compare equal; ``git_commit`` is None when unknown.
    """
    rows = []
    for r in records:
        common = {
            "protocol": r.protocol.name,
            "protocol_version": r.protocol.version,
            "protocol_hash": r.protocol.hash,
            "board": board_of(r),
            "method": r.method,
            "seed": r.seed,
            "stage": r.stage,
            "hparams": json.dumps(r.hparams, sort_keys=True, default=str),
            "overrides": json.dumps(r.overrides, sort_keys=True, default=str),
            "data_fingerprint": r.data_fingerprint,
            "git_commit": r.env.get("git_commit"),
            "wall_seconds": r.timings.wall_seconds,
        }
        rows += [common | {"metric": k, "value": v} for k, v in sorted(r.metrics.items())]
    return pd.DataFrame(rows, columns=COLUMNS)


def load_results(path: str | Path, skip: tuple[str, ...] = ()) -> pd.DataFrame:
    """The tidy frame (:func:`results_frame`) of every record under ``path``.

    Args:
        path: a results folder (read recursively, ``published/`` left out) or one record file.
        skip: sub-folders of ``path`` to leave out, e.g. ``("leaderboard",)``.

    A damaged record file is skipped with a warning naming it, as ``dmlbench report`` does.
    """
    path = Path(path)
    if path.is_file():
        return results_frame([load_record(path)])
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: no results folder or record file")
    records, problems = load_records(path, skip=skip)
    for problem in problems:
        warnings.warn(problem, stacklevel=2)
    return results_frame(records)


def results_json(frame: pd.DataFrame) -> str:
    """``frame`` as a JSON list of row objects; floats exact (Python's shortest repr), missing
    values as ``null``."""
    rows = frame.astype(object).where(frame.notna(), None).to_dict(orient="records")
    return json.dumps(rows, indent=1, allow_nan=False) + "\n"
