"""Test embeddings kept for the report's pictures (retrieval grids, embedding maps).

A board's records hold numbers, not vectors, and a picture of what a method retrieves needs the
vectors. Two sources are read, per (protocol hash, method), seed 0 only:

- a picture file ``<results>/<protocol>/<hash12>/pictures/<method>-seed0-test.npz``, written
  by ``dmlbench check --keep-embeddings`` for the committed leaderboard (:func:`save_picture_file`):
  the re-run's test embeddings stored as float16 (half the bytes in the repository; the
  neighbours of a float16 vector can differ from float32's only where two distances tie to
  about 1e-3), its labels, the full protocol (to load the test images again), the data
  fingerprint and the re-run's metrics (so a reader can compare them with the record's);
- the embeddings a run kept itself (``dmlbench run``, kept by default:
  ``artifacts/<method>-seed0-final-embeddings.npz``, float32) with its model card, which holds
  the protocol.

Nothing here trains: a board whose entries kept nothing gets no grid and no map.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dmlbench.atomic import atomic_write
from dmlbench.errors import DmlbenchError
from dmlbench.records import UNTRAINED, Record, is_baseline

FOLDER = "pictures"
SEED = 0  # the seed whose embeddings are pictured (the one ``dmlbench check`` re-runs)


@dataclass(frozen=True)
class KeptEmbeddings:
    """One run's test embeddings and what is needed to show its images."""

    method: str
    embeddings: np.ndarray  # (N, d) float32
    labels: np.ndarray
    protocol: dict[str, Any]  # the full protocol, as a model card stores it
    data_fingerprint: str
    metrics: dict[str, float]  # the re-run's (picture files); empty for a run's own file
    source: Path


def picture_path(results_dir: Path, protocol: str, protocol_hash: str, method: str) -> Path:
    return results_dir / protocol / protocol_hash[:12] / FOLDER / f"{method}-seed{SEED}-test.npz"


def save_picture_file(
    path: Path,
    embeddings: np.ndarray,
    labels: np.ndarray,
    protocol: Mapping[str, Any],
    data_fingerprint: str,
    method: str,
    metrics: Mapping[str, float],
) -> Path:
    """Write a picture file (float16 embeddings; the rest as it is), compressed (the labels
    and the protocol shrink; the embeddings hardly)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    arrays = dict(
        embeddings=np.asarray(embeddings, dtype=np.float16),
        labels=np.asarray(labels),
        protocol=np.asarray(json.dumps(dict(protocol), sort_keys=True)),
        data_fingerprint=np.asarray(data_fingerprint),
        method=np.asarray(method),
        metrics=np.asarray(json.dumps(dict(metrics), sort_keys=True)),
    )
    atomic_write(path, lambda fh: np.savez_compressed(fh, **arrays))  # type: ignore[arg-type]
    return path


def find_kept(results_dir: Path) -> dict[tuple[str, str], Path]:
    """Every seed-0 embeddings file under ``results_dir``, by (protocol hash12, method): the
    picture files first, then the runs' own kept files (which replace them: float32)."""
    out: dict[tuple[str, str], Path] = {}
    suffix = f"-seed{SEED}-test.npz"
    for path in sorted(results_dir.glob(f"**/{FOLDER}/*{suffix}")):
        out[path.parent.parent.name, path.name.removesuffix(suffix)] = path
    own = f"-seed{SEED}-final-embeddings.npz"
    for path in sorted(results_dir.glob(f"**/artifacts/*{own}")):
        card = path.with_name(path.name.replace("-embeddings.npz", "-model.yaml"))
        if card.is_file():
            out[path.parent.parent.name, path.name.removesuffix(own)] = path
    return out


def load_kept(path: Path) -> KeptEmbeddings:
    """A picture file, or a run's kept embeddings with the protocol of its model card.

    Raises:
        DmlbenchError: one line naming the file when it cannot be read.
    """
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    except (OSError, ValueError) as err:
        raise DmlbenchError(f"{path}: not an embeddings file ({type(err).__name__})") from None
    embeddings = np.asarray(arrays["embeddings"], dtype=np.float32)
    if "protocol" in arrays and "data_fingerprint" in arrays:  # a picture file
        return KeptEmbeddings(
            method=str(arrays["method"]),
            embeddings=embeddings,
            labels=arrays["labels"],
            protocol=json.loads(str(arrays["protocol"])),
            data_fingerprint=str(arrays["data_fingerprint"]),
            metrics=json.loads(str(arrays["metrics"])),
            source=path,
        )
    import yaml

    card_path = path.with_name(path.name.replace("-embeddings.npz", "-model.yaml"))
    card = yaml.safe_load(card_path.read_text(encoding="utf-8"))
    record = path.parent.parent / path.name.replace("-embeddings.npz", ".json")
    fingerprint = json.loads(record.read_text(encoding="utf-8"))["data_fingerprint"]
    return KeptEmbeddings(
        method=str(card["method"]),
        embeddings=embeddings,
        labels=arrays["labels"],
        protocol=dict(card["protocol"]),
        data_fingerprint=fingerprint,
        metrics={},
        source=path,
    )


def pictured_methods(finals: list[Record], baseline: str = UNTRAINED) -> list[str]:
    """The entries a board's pictures need kept: its best method (the board's first trained
    row, :func:`dmlbench.report.tables.summary_table`'s order) and ``baseline``."""
    from dmlbench.report.tables import records_frame, summary_table

    table = summary_table(records_frame(finals))
    best = [str(m) for m in table.index if not is_baseline(str(m))][:1]
    return best + ([baseline] if baseline not in best else [])
