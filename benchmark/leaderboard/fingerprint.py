"""A seconds-long fingerprint of the numeric path: does this machine reproduce the boards?

``dmlbench check`` answers that question too, but in minutes. The fingerprint trains one
method for :data:`STEPS` steps on glyphs-mini at one torch thread, hashes the weights
(SHA-256 over every tensor's bytes, in name order) and the test split's metrics, and compares
both with the values committed in ``results/leaderboard/fingerprint.yaml``. Training touches
every kernel family a board run does (oneDNN convolutions, MKL matrix products in the head and
the loss, ATen's vectorised element-wise ops, Adam), and the metrics touch faiss and numpy, so
a machine whose kernels round differently fails here in seconds, before anyone waits for the
check. The file names the setting it was made under (:func:`dmlbench.simd.in_force`): on
x86-64 every machine under the portable setting must give the same hashes, whichever vendor.

``python -m dmlbench.leaderboard.fingerprint`` prints this machine's values;
``--write`` commits them (with a regenerated leaderboard, whose numbers they vouch for).
"""

from __future__ import annotations

import argparse
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from dmlbench.atomic import atomic_write
from dmlbench.errors import DmlbenchError

FILE = "fingerprint.yaml"
PROTOCOL, METHOD, SEED, STEPS = "glyphs-mini", "contrastive", 0, 20


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
    from dmlbench.protocol import load_protocol
    from dmlbench.simd import in_force

    protocol = load_protocol(PROTOCOL)
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
