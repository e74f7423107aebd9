"""A seconds-long fingerprint of the numeric path: does this machine reproduce the boards?

``dmlbench check`` answers that question too, but in minutes. The fingerprint trains one
method for :data:`STEPS` steps on glyphs-mini v4 (:data:`PROTOCOL`, frozen here: the
fingerprint must not move when the shipped protocol gets a new version, or every recorded
path's values would be void until a machine of each vendor re-recorded them) at one torch
thread, hashes the weights
(SHA-256 over every tensor's bytes, in name order) and the test split's metrics, and compares
both with the values committed in ``results/leaderboard/fingerprint.yaml``. Training touches
every kernel family a board run does (oneDNN convolutions, MKL matrix products in the head and
the loss, ATen's vectorised element-wise ops, Adam), and the metrics touch faiss and numpy, so
a machine whose kernels round differently fails here in seconds, before anyone waits for the
check. The file names the setting it was made under (:func:`dmlbench.simd.in_force`).

Not every x86-64 machine takes the board's path: under the portable setting AMD EPYCs (with
and without AVX-512) agree to the last bit, and so do Intel Xeons of different generations,
but the two vendors round apart, and none of the kernel settings tried made them agree
(docs/leaderboard.md). So a leaderboard holds one fingerprint per
**numeric path**: ``fingerprint.yaml`` for the path its records were made on, and
``paths/<name>.yaml`` for each other path, with that path's own re-run of every entry
(:class:`ReplayPath`, written by ``dmlbench check --record-path NAME`` on a machine of that
path). :func:`locate` tells which one this machine is on, so that ``dmlbench check`` compares
a re-run with values it can reproduce bit for bit, and a change of a few points fails on
either vendor.

``python -m dmlbench.leaderboard.fingerprint`` prints this machine's values;
``--write`` commits them (with a regenerated leaderboard, whose numbers they vouch for).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from dmlbench.atomic import atomic_write
from dmlbench.errors import DmlbenchError
from dmlbench.protocol import StrictModel

FILE = "fingerprint.yaml"
PATHS = "paths"  # the other numeric paths' files, beside FILE
METHOD, SEED, STEPS = "contrastive", 0, 20
#: glyphs-mini v4 as shipped until v5 (hash 13eb26e7aa5d) but its metrics: random weights, 4
#: epochs, letters as v4 drew them; a test checks the hash.
PROTOCOL: dict[str, Any] = yaml.safe_load(
    """
name: glyphs-mini
version: 4
description: embedded glyphs, 200/200 classes, 16 px, small CNN, 64-d
data:
  dataset: glyphs
  params: {image_size: 16, num_classes: 400, instances_per_font: 1, seed: 0}
model: {backbone: small-cnn, pretrained: null, embedding_size: 64, normalize: true}
batch: {size: 60, samples_per_class: null}
optim: {name: adam, lr: 1.0e-3, weight_decay: 0.0, epochs: 4, schedule: cosine}
search:
  trials: 8
  sampler: tpe
  pruner: median
  validation: {by: classes, folds: 1, fraction: 0.25}
seeds: [0, 1, 2]
methods: [contrastive, multi-similarity, proxy-softmax, triplet-semihard]
"""
)


def fingerprint_protocol() -> Any:
    """:data:`PROTOCOL` validated (a :class:`~dmlbench.protocol.Protocol`), with the shipped
    glyphs-mini's metrics, which v4 shares (metric names are spelled in the catalogue only)."""
    from dmlbench.protocol import load_protocol, validate_protocol

    metrics = load_protocol("glyphs-mini").metrics.model_dump(mode="json")
    raw = {**PROTOCOL, "metrics": metrics}
    return validate_protocol(raw, source="the fingerprint's protocol (glyphs-mini v4)")


def _tensor_sha256(model: Any) -> str:
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def compute() -> dict[str, Any]:
    """This machine's fingerprint: :data:`STEPS` steps of :data:`METHOD` at one thread."""

    from dmlbench.data import load_data
    from dmlbench.engine.evaluation import evaluate
    from dmlbench.engine.train import embed, train
    from dmlbench.methods import create_method
    from dmlbench.options import torch_threads
    from dmlbench.simd import in_force

    protocol = fingerprint_protocol()
    data = load_data(protocol)
    with torch_threads(1):  # the boards' thread count: the reduction order is part of it
        method = create_method(METHOD, None, data.train.num_classes, protocol.model.embedding_size)
        model = train(protocol, method, data.train, SEED, max_steps=STEPS, progress=False).model
        emb = embed(model, data.test)
        metrics, _ = evaluate(protocol.metrics, emb, data.test, SEED, query_hits=True)
    return {
        "protocol": f"{protocol.name} {protocol.short_hash}",
        "run": f"{METHOD}, seed {SEED}, {STEPS} steps, one torch thread",
        "setting": in_force(),
        "weights_sha256": _tensor_sha256(model),
        "metrics_sha256": hashlib.sha256(json.dumps(metrics, sort_keys=True).encode()).hexdigest(),
    }


@functools.cache
def this_machine() -> dict[str, Any]:
    """:func:`compute`, once per process (the check and the tests ask more than once)."""
    return compute()


class ReplayPath(StrictModel):
    """``paths/<name>.yaml``: a numeric path other than the board's, and its re-run of every
    entry of the boards in ``boards`` (seed 0, as ``dmlbench check --all`` runs it)."""

    name: str
    #: the CPU models this path was seen on (more may take it: the fingerprint decides)
    cpus: list[str]
    setting: dict[str, str | None]
    weights_sha256: str
    metrics_sha256: str
    #: board name -> SHA-256 of that board's record checksums (:func:`board_digests`): the
    #: version of each board these values replay
    boards: dict[str, str]
    git_commit: str | None
    created: str
    #: board name -> entry -> metric -> value, to the last bit
    metrics: dict[str, dict[str, dict[str, float]]]


@dataclass(frozen=True)
class Location:
    """Which numeric path this machine is on: the board's own (``replay`` None and ``why_not``
    None), a recorded other one (``replay``, with the boards it holds no values for in
    ``unrecorded``), or none of them (``why_not`` says why)."""

    replay: ReplayPath | None = None
    why_not: str | None = None
    unrecorded: tuple[str, ...] = ()


def board_digest(checksums: dict[str, str]) -> str:
    """One hash of record checksums (``tolerances.yaml``'s, of one board)."""
    return hashlib.sha256(json.dumps(checksums, sort_keys=True).encode()).hexdigest()


def board_digests(checksums: dict[str, str]) -> dict[str, str]:
    """Per board (the first folder of each record's path), :func:`board_digest` of its
    records: a path's values belong to exactly that version of each board, so a board added
    or regenerated since leaves the others' values valid."""
    per: dict[str, dict[str, str]] = {}
    for key, value in checksums.items():
        per.setdefault(key.split("/", 1)[0], {})[key] = value
    return {name: board_digest(per[name]) for name in sorted(per)}


def load_paths(folder: Path) -> list[ReplayPath]:
    """The other numeric paths recorded for the leaderboard in ``folder``, by name."""
    out = []
    for path in sorted((folder / PATHS).glob("*.yaml")):
        try:
            replay = ReplayPath.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError, yaml.YAMLError, ValidationError) as err:
            raise DmlbenchError(
                f"{path}: not a numeric path's file ({err.__class__.__name__}); restore it "
                f"from git or record it again (dmlbench check --record-path {path.stem})"
            ) from None
        if replay.name != path.stem:
            raise DmlbenchError(f"{path}: names the path '{replay.name}', not '{path.stem}'")
        out.append(replay)
    return out


def locate(folder: Path, checksums: dict[str, str], here: dict[str, Any] | None = None) -> Location:
    """The numeric path this machine (or ``here``, a :func:`compute` result) is on, among the
    leaderboard's in ``folder`` whose records have ``checksums``."""
    committed = load(folder)
    if committed is None:
        return Location(why_not=f"{folder / FILE} is missing")
    here = here or this_machine()
    key = (here["weights_sha256"], here["metrics_sha256"])
    if key == (committed["weights_sha256"], committed["metrics_sha256"]):
        return Location()
    known = [f"the board's own ({committed['weights_sha256'][:12]})"]
    for replay in load_paths(folder):
        if key == (replay.weights_sha256, replay.metrics_sha256):
            now = board_digests(checksums)
            stale = tuple(b for b in now if replay.boards.get(b) != now[b])
            return Location(replay=replay, unrecorded=stale)
        known.append(f"'{replay.name}' ({replay.weights_sha256[:12]}, {', '.join(replay.cpus)})")
    return Location(
        why_not=f"this machine's numeric path (fingerprint {key[0][:12]}) is none of the "
        f"leaderboard's: {'; '.join(known)}; record it (dmlbench check --record-path NAME, "
        "docs/leaderboard.md)"
    )


def load(folder: Path) -> dict[str, Any] | None:
    """The committed fingerprint of the leaderboard in ``folder`` (None when absent)."""
    path = folder / FILE
    if not path.is_file():
        return None
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        raise DmlbenchError(f"{path}: not a fingerprint file ({err.__class__.__name__})") from None
    if not isinstance(data, dict):
        raise DmlbenchError(f"{path}: not a fingerprint file (expected a mapping)")
    return data


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dmlbench.leaderboard.fingerprint")
    parser.add_argument("--leaderboard-dir", type=Path, default=Path("results/leaderboard"))
    parser.add_argument("--write", action="store_true", help=f"write {FILE} there")
    args = parser.parse_args(argv)
    text = yaml.safe_dump(compute(), sort_keys=False)
    if args.write:
        header = "# Written by `python -m dmlbench.leaderboard.fingerprint --write`.\n"
        atomic_write(args.leaderboard_dir / FILE, lambda fh: fh.write((header + text).encode()))
    print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
