"""Files a final run keeps next to its record: trained weights, test embeddings, model card.

A record's numbers can then be re-checked without retraining (the metrics follow from the kept
embeddings alone), and its network reused (``dmlbench.load_model``, ``dmlbench embed``). Each
file is written atomically *before* the record, and named in the record's ``artifacts`` with
its SHA-256, so a record never names a file that was not completely written, and a reader can
refuse one that changed since. The training checkpoint (``checkpoints/``, for resume) is a
different file, deleted after the run; keeping files never changes a metric.

For the record ``<folder>/<stem>.json``::

    <folder>/artifacts/<stem>.pt              the model's state_dict (torch.save, CPU tensors;
                                              loads with torch.load(weights_only=True))
    <folder>/artifacts/<stem>-embeddings.npz  embeddings (N, d) float32, labels, and the query
                                              and gallery index arrays when the split has them;
                                              with the split's order and the model's name, so
                                              ``dmlbench evaluate`` reads it as it is
    <folder>/artifacts/<stem>-model.yaml      what rebuilds the network: the full protocol
                                              (derived ones included), method, hyper-parameters,
                                              seed, number of training classes, input shape

The model card is YAML, not JSON, so that readers of ``*.json`` under a results folder see
only records. The untrained row keeps its embeddings and card but no weights: its network is
the seeded initialisation, which :func:`dmlbench.engine.inference.load_model` rebuilds.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from dmlbench.atomic import atomic_savez, atomic_write
from dmlbench.data.base import Split
from dmlbench.engine.checkpoint import save_tensors
from dmlbench.errors import DmlbenchError
from dmlbench.records import Artifact, Record

FOLDER = "artifacts"
WEIGHTS, EMBEDDINGS, CARD = "weights", "embeddings", "model"
SUFFIXES = {WEIGHTS: ".pt", EMBEDDINGS: "-embeddings.npz", CARD: "-model.yaml"}


@dataclass(frozen=True)
class ModelCard:
    """What rebuilds a run's network without its data: the record alone names the protocol
    by hash, and a derived protocol (``glyphs-mini@defaults``, a backbone override, a file of
    one's own) cannot be found again from its name."""

    protocol: dict[str, Any]
    method: str
    hparams: dict[str, Any]
    seed: int
    num_classes: int
    input_shape: list[int]  # (C, H, W) of one test image as the network received it

    def to_yaml(self) -> str:
        import yaml

        head = "# dmlbench model card: rebuilds this run's network (dmlbench.load_model)\n"
        plain = json.loads(json.dumps(asdict(self)))  # tuples as lists, as in the record
        return head + yaml.safe_dump(plain, sort_keys=False, allow_unicode=True)

    @classmethod
    def from_yaml(cls, text: str, path: Path) -> ModelCard:
        import yaml

        try:
            raw = yaml.safe_load(text)
            return cls(**{k: raw[k] for k in cls.__dataclass_fields__})
        except (yaml.YAMLError, KeyError, TypeError) as err:
            raise DmlbenchError(f"{path}: not a model card ({type(err).__name__})") from None


def artifact_paths(record_path: Path, with_weights: bool = True) -> dict[str, Path]:
    """Where the kept files of the record at ``record_path`` go, by role."""
    roles = [WEIGHTS, EMBEDDINGS, CARD] if with_weights else [EMBEDDINGS, CARD]
    folder = record_path.parent / FOLDER
    return {role: folder / f"{record_path.stem}{SUFFIXES[role]}" for role in roles}


def keep_artifacts(
    record_path: Path,
    card: ModelCard,
    embeddings: np.ndarray,
    split: Split,
    model: nn.Module | None,
    extra: dict[str, np.ndarray] | None = None,
) -> dict[str, Artifact]:
    """Write the kept files of the record that will be saved at ``record_path``.

    Args:
        model: the trained network, or ``None`` to keep no weights (the untrained row).
        extra: more arrays for the embeddings file: the split's order and the model's
            description (:func:`dmlbench.engine.external.kept_file_arrays`), so that
            ``dmlbench evaluate`` scores the file as it is (it refused it for want of them).

    Returns:
        The record's ``artifacts``: each file's path (relative to the record's folder),
        SHA-256 and size.

    Raises:
        WriteError: a file cannot be written (disk full, read-only): one line naming it; the
            file before, if any, is untouched.
    """
    paths = artifact_paths(record_path, with_weights=model is not None)
    if model is not None:
        state = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
        save_tensors(paths[WEIGHTS], state)
    atomic_savez(paths[EMBEDDINGS], **split_arrays(embeddings, split), **(extra or {}))
    atomic_write(paths[CARD], lambda fh: fh.write(card.to_yaml().encode("utf-8")))
    return {role: describe(record_path.parent, path) for role, path in paths.items()}


def split_arrays(embeddings: np.ndarray, split: Split) -> dict[str, np.ndarray]:
    """The arrays of an embeddings file: what the metrics are computed from, nothing else."""
    arrays = {"embeddings": np.asarray(embeddings), "labels": np.asarray(split.labels)}
    if split.queries is not None and split.gallery is not None:
        arrays["queries"] = np.asarray(split.queries)
        arrays["gallery"] = np.asarray(split.gallery)
    return arrays


def describe(folder: Path, path: Path) -> Artifact:
    return Artifact(
        path=path.relative_to(folder).as_posix(),
        sha256=file_sha256(path),
        bytes=path.stat().st_size,
    )


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verified(record: Record, record_path: Path, role: str) -> Path:
    """The kept file of ``role``, after checking it is the one the record names.

    Raises:
        DmlbenchError: one line naming the file: the record keeps none (``--no-keep``, or a
            search trial's, which never keeps any), the path leaves the record's folder, the
            file is missing, or its SHA-256 differs.
    """
    artifact = record.artifacts.get(role)
    if artifact is None and record.stage != "final":  # --force would not change that
        raise DmlbenchError(
            f"{record_path}: a {record.stage} record; search trials never keep weights or "
            f"embeddings, only final runs do: pass a final record "
            f"({record.method}-seed<N>-final.json)"
        )
    if artifact is None:
        what = f"no {role} file" if record.artifacts else "no weights or embeddings"
        raise DmlbenchError(
            f"{record_path}: keeps {what} (run with --no-keep, or older than kept files); "
            "`dmlbench run --force` with the same arguments keeps them"
        )
    folder = record_path.parent.resolve()
    path = folder / artifact.path
    if not path.resolve().is_relative_to(folder):
        raise DmlbenchError(f"{record_path}: {role} path {artifact.path!r} leaves its folder")
    if not path.is_file():
        raise DmlbenchError(f"{path}: kept {role} file is missing (named in {record_path.name})")
    if file_sha256(path) != artifact.sha256:
        raise DmlbenchError(
            f"{path}: SHA-256 differs from the one in {record_path.name} (the file changed "
            "since the run); refused"
        )
    return path


def read_card(record: Record, record_path: Path) -> ModelCard:
    path = verified(record, record_path, CARD)
    return ModelCard.from_yaml(path.read_text(encoding="utf-8"), path)


def read_embeddings(record: Record, record_path: Path) -> dict[str, np.ndarray]:
    """The kept embeddings file's arrays (``embeddings``, ``labels``[, ``queries``,
    ``gallery``]), verified against the record."""
    path = verified(record, record_path, EMBEDDINGS)
    with np.load(path, allow_pickle=False) as npz:
        return {k: npz[k] for k in npz.files}


def read_weights(record: Record, record_path: Path) -> dict[str, torch.Tensor]:
    """The kept state_dict, verified against the record, loaded without running any code."""
    path = verified(record, record_path, WEIGHTS)
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # a verified file that torch cannot read: written by another torch
        raise DmlbenchError(f"{path}: cannot load weights ({type(err).__name__})") from None
    if not isinstance(state, dict):
        raise DmlbenchError(f"{path}: not a state_dict")
    return state
