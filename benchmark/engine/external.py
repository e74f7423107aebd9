"""Score a model trained elsewhere on a protocol's test split: an ``external`` record.

Any model can then be measured on the same test classes with the same metrics as the methods
trained under the protocol (MTEB's idea), through the one function behind every number
(:func:`dmlbench.engine.evaluation.evaluate`). Its budget is not the protocol's, so its record
has stage ``external`` and names who trained it on what (:class:`~dmlbench.records.ExternalModel`):
tables, rankings and the leaderboard read ``final`` records only and never rank it.

Two ways in: a callable from a batch of images to embeddings (:func:`evaluate_external`,
which feeds the test split in order), or an ``.npz`` file of embeddings
(:func:`score_file`, ``dmlbench evaluate``). Rows of a file carry no images, so a file says
which split it embeds and in which order: ``split`` (``test``), ``split_fingerprint`` (of the
data and the split's labels and query/gallery layout, :func:`split_fingerprint`) and ``index``
(row i holds image ``index[i]`` of the split). ``dmlbench embed --images test`` writes them;
a file of another split, another protocol's data, another length or with its rows permuted is
refused in one line instead of scored wrong. The check is of the file's bookkeeping: rows
permuted without their ``index`` cannot be told apart from another model's embeddings.
"""

from __future__ import annotations

import hashlib
import io
import re
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from pydantic import ValidationError
from torch import nn

from dmlbench.data import DataSplits, load_data
from dmlbench.data.base import Split, fingerprint_arrays
from dmlbench.engine.evaluation import evaluate
from dmlbench.errors import DataError
from dmlbench.protocol import MAX_SEED, NAME_PATTERN, Protocol
from dmlbench.records import ExternalModel, Record, Timings, new_record, record_path, save_record

SCORED_SPLIT = "test"
HINT = "`dmlbench embed --images test` writes a file dmlbench evaluate reads (docs/evaluate.md)"
PRECISION = "unknown"  # trained elsewhere: the record cannot say in which precision


def split_fingerprint(split: Split, data_fingerprint: str, which: str) -> str:
    """The identity of one split's rows: its data, its name, its labels in order and its
    query/gallery layout (two protocols with the same test split share it)."""
    layout = [split.queries, split.gallery] if split.queries is not None else []
    arrays = [np.asarray(a) for a in [split.labels, *layout]]
    return fingerprint_arrays(*arrays, extra=f"{data_fingerprint}:{which}:{len(layout)}")


def order_arrays(
    split: Split, data_fingerprint: str, which: str, protocol: str
) -> dict[str, np.ndarray]:
    """The arrays that say which split, of which protocol's data, a file's rows embed, in order."""
    return {
        "protocol": np.asarray(protocol),
        "split": np.asarray(which),
        "split_fingerprint": np.asarray(split_fingerprint(split, data_fingerprint, which)),
        "index": np.arange(len(split), dtype=np.int64),
    }


def model_arrays(method: str, protocol: str, protocol_hash: str, seed: int) -> dict[str, Any]:
    """What ``dmlbench evaluate`` records by default of a model a run of ``method`` trained:
    its name, ``trained_by`` dmlbench, ``trained_on`` the protocol's training split (nothing
    for the untrained row), and the run's seed, whose numbers the file then reproduces."""
    from dmlbench.records import PIXELS, PRETRAINED, UNTRAINED

    trained_on = {
        UNTRAINED: f"nothing: the initialisation of seed {seed} under {protocol}",
        PIXELS: "nothing: the test images' pixels",
        PRETRAINED: f"nothing after the trunk {protocol} starts from",
    }.get(method, f"the training split of {protocol} ({protocol_hash[:12]}), seed {seed}")
    fields = {"model_name": method, "trained_by": "dmlbench", "trained_on": trained_on}
    return {k: np.asarray(v) for k, v in fields.items()} | {"seed": np.asarray(seed)}


def kept_file_arrays(
    protocol: Protocol, data: DataSplits, method: str, seed: int
) -> dict[str, np.ndarray]:
    """The arrays a final run adds to its kept test embeddings (``…-embeddings.npz``): those
    ``dmlbench embed --images test`` writes, so ``dmlbench evaluate`` reads either file."""
    order = order_arrays(data.test, data.fingerprint, SCORED_SPLIT, protocol.name)
    return order | model_arrays(method, protocol.name, protocol.hash, seed)


def external_model(
    name: str, trained_by: str, trained_on: str, size: int, sha256: str | None = None
) -> ExternalModel:
    """The record's description of the model (one line naming the bad value)."""
    if re.fullmatch(NAME_PATTERN, name) is None:
        raise DataError(
            f"model name {name!r}: must be a slug (letters, digits and . _ - @ = + :, starting "
            "with a letter or digit): it names the record's file"
        )
    try:
        return ExternalModel(
            name=name, trained_by=trained_by, trained_on=trained_on, embedding_size=size,
            embeddings_sha256=sha256,
        )  # fmt: skip
    except ValidationError as err:
        field = ".".join(str(p) for p in err.errors()[0]["loc"])
        raise DataError(f"external model {name}: {field}: {err.errors()[0]['msg']}") from None


def read_file(path: Path) -> tuple[dict[str, np.ndarray], str]:
    """Every array of an ``.npz`` file, without running code stored in it (no pickles), and
    the file's SHA-256 (the record names the exact embeddings it scored); read once."""
    if not path.is_file():
        raise DataError(f"{path}: no such embeddings file")
    try:
        raw = path.read_bytes()
        with np.load(io.BytesIO(raw), allow_pickle=False) as npz:
            return {k: npz[k] for k in npz.files}, hashlib.sha256(raw).hexdigest()
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
        raise DataError(f"{path}: not a readable .npz file ({type(err).__name__})") from None


def check_rows(
    arrays: dict[str, np.ndarray], path: Path, protocol: Protocol, data: DataSplits
) -> np.ndarray:
    """The file's embeddings, once its rows are shown to be the test split's, in order.

    Raises:
        DataError: one line: a missing array (named), another split or protocol's data, the
            wrong number of rows, rows out of order, other labels, non-finite values.
    """
    emb = _require(arrays, "embeddings", path)
    if emb.ndim != 2 or emb.shape[1] < 1 or emb.dtype.kind not in "fiu":
        raise DataError(
            f"{path}: embeddings must be real numbers (float or integer) of shape (N, d), "
            f"d >= 1, not {emb.dtype} of shape {emb.shape}"
        )
    which = str(_require(arrays, "split", path))
    theirs = str(_require(arrays, "split_fingerprint", path))
    index = _require(arrays, "index", path)
    split = data.test
    ours = split_fingerprint(split, data.fingerprint, SCORED_SPLIT)
    if which != SCORED_SPLIT or theirs != ours:
        raise DataError(_other_split(path, which, str(arrays.get("protocol", "?")), protocol))
    if index.dtype.kind not in "iu" or index.ndim != 1:
        raise DataError(
            f"{path}: index must be integers of shape (N,), one image number per row, not "
            f"{index.dtype} of shape {index.shape}; {HINT}"
        )
    if len(emb) != len(split) or len(index) != len(emb):
        raise DataError(
            f"{path}: {len(emb)} embeddings and {len(index)} index rows; the test split of "
            f"{protocol.name} has {len(split)} images"
        )
    moved = np.flatnonzero(index != np.arange(len(split)))
    if len(moved):
        i = int(moved[0])
        raise DataError(
            f"{path}: rows are not in the test split's order (row {i} holds image "
            f"{index[i]}); write row i for image i, as dmlbench embed does"
        )
    labels = arrays.get("labels")
    if labels is not None and not np.array_equal(labels, split.labels):
        raise DataError(f"{path}: its labels differ from the test split's of {protocol.name}")
    return finite_float32(emb, str(path))


def finite_float32(emb: np.ndarray, where: str) -> np.ndarray:
    """``emb`` as the float32 every metric computes in, once every value is finite there.

    Checked after the cast: a float64 value beyond float32's range (±3.4e38) is finite in the
    file and infinite once cast, and faiss then failed with a traceback; a float64 row whose
    every value is below float32's smallest normal number (1.2e-38) would lose its digits or
    become all zeros, and be scored wrong without a word.

    Raises:
        DataError: the first row that is not finite, as read or once cast.
    """
    bad = np.flatnonzero(~np.isfinite(emb).all(axis=1))
    if len(bad):
        raise DataError(f"{where}: row {int(bad[0])} of embeddings is not finite")
    with np.errstate(over="ignore"):
        cast = np.asarray(emb, dtype=np.float32)
    bad = np.flatnonzero(~np.isfinite(cast).all(axis=1))
    if len(bad):
        raise DataError(
            f"{where}: row {int(bad[0])} of embeddings is beyond float32's range "
            f"(±{float(np.finfo(np.float32).max):.3g}), in which every metric is computed; "
            "scale the embeddings down (under normalize: true a scale changes no score)"
        )
    if emb.dtype.kind == "f" and emb.dtype.itemsize > 4:  # float64: values can vanish
        peak = np.abs(emb).max(axis=1, initial=0)
        low = np.flatnonzero((peak > 0) & (peak < np.finfo(np.float32).tiny))
        if len(low):
            raise DataError(
                f"{where}: row {int(low[0])} of embeddings is below float32's range (its "
                f"largest value {float(peak[low[0]]):.3g} < {float(np.finfo(np.float32).tiny):.3g}"
                "), where it would lose its digits or become zero; scale the embeddings up "
                "(under normalize: true a scale changes no score)"
            )
    return cast


def file_seed(arrays: dict[str, np.ndarray], path: Path) -> int:
    """The file's ``seed`` array (a kept run's seed, whose numbers it then reproduces), else 0.

    Range-checked like ``--seed``: a negative, fractional, non-numeric or too large value
    once made numpy or faiss fail with a traceback, and 1.7 was silently read as 1.

    Raises:
        DataError: one line naming the file, the array and the range.
    """
    if "seed" not in arrays:
        return 0
    value = arrays["seed"]
    bad = f"{path}: array 'seed' holds {_shown(value)}; it must be one integer in [0, {MAX_SEED}]"
    if value.ndim != 0 or value.dtype.kind not in "iuf" or not np.isfinite(value):
        raise DataError(bad + " (or pass --seed)")
    number = float(value) if value.dtype.kind == "f" else int(value)
    if number != int(number) or not 0 <= int(number) <= MAX_SEED:
        raise DataError(bad + " (or pass --seed)")
    return int(number)


def _shown(value: np.ndarray) -> str:
    text = np.array2string(value, threshold=4, max_line_width=60).replace("\n", " ")
    return f"{text} ({value.dtype}, shape {value.shape})"


def _require(arrays: dict[str, np.ndarray], key: str, path: Path) -> np.ndarray:
    if key not in arrays:
        have = ", ".join(sorted(arrays)) or "none"
        raise DataError(f"{path}: no array {key!r} (it has: {have}); {HINT}")
    return arrays[key]


def _other_split(path: Path, which: str, made_for: str, protocol: Protocol) -> str:
    if which != SCORED_SPLIT:
        return f"{path}: embeds the {which} split of {made_for}, not a test split; {HINT}"
    if made_for != protocol.name:
        return (
            f"{path}: embeds the test split of protocol {made_for}, not {protocol.name}'s "
            f"(another split fingerprint); embed {protocol.name}'s test split"
        )
    return f"{path}: embeds the test split of {made_for} made from other data (fingerprint)"


def score(
    protocol: Protocol,
    embeddings: np.ndarray,
    data: DataSplits,
    model: ExternalModel,
    seed: int,
    device: str = "cpu",
    started: float | None = None,
) -> Record:
    """The external record of ``embeddings`` of the test split: the metrics a final run of
    the same seed gets from the same embeddings, to the last bit."""
    start = time.perf_counter()
    metrics, hits = evaluate(protocol.metrics, embeddings, data.test, seed, query_hits=True)
    now = time.perf_counter()
    return new_record(
        protocol,
        device=device,
        precision=PRECISION,
        data_fingerprint=data.fingerprint,
        method=model.name,
        seed=seed,
        stage="external",
        metrics=metrics,
        timings=Timings(wall_seconds=now - (started or start), eval_seconds=now - start),
        per_query=hits,
        external=model,
    )


def score_file(
    protocol: Protocol,
    path: Path,
    describe: Callable[[dict[str, np.ndarray], int, str], ExternalModel],
    seed: int | None = None,
    data_root: str | None = None,
) -> Record:
    """The external record of the embeddings in ``path`` (``dmlbench evaluate``).

    ``describe(arrays, embedding size, SHA-256 of the file)`` names the model, from the
    caller's flags or the file's own ``model_name``/``trained_by``/``trained_on``. ``seed``
    ``None``: the file's ``seed`` (a kept run's, whose numbers it then reproduces), else 0.
    """
    started = time.perf_counter()
    arrays, sha = read_file(path)
    if seed is None:
        seed = file_seed(arrays, path)
    data = load_data(protocol, data_root)
    embeddings = check_rows(arrays, path, protocol, data)
    model = describe(arrays, int(embeddings.shape[1]), sha)
    return score(protocol, embeddings, data, model, seed, started=started)


class _Embedder(nn.Module):
    """A callable as the network :func:`dmlbench.engine.train.embed` runs (numpy out too)."""

    def __init__(self, fn: Callable[[torch.Tensor], Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.fn(x)
        return out if torch.is_tensor(out) else torch.as_tensor(np.asarray(out))


def evaluate_external(
    protocol: Protocol,
    embed_fn: Callable[[torch.Tensor], Any],
    *,
    name: str,
    trained_by: str,
    trained_on: str,
    seed: int = 0,
    data_root: str | None = None,
    device: str = "cpu",
    batch_size: int = 256,
    results_dir: str | Path | None = "results",
) -> Record:
    """Score ``embed_fn`` on ``protocol``'s test split; write the record under ``results_dir``.

    Args:
        embed_fn: images → embeddings: a float tensor (B, C, H, W) on ``device``, the test
            pipeline's output (``images.test``: the same input the protocol's networks get),
            to a (B, d) tensor or array, called without gradients on the split in order.
        name, trained_by, trained_on: what the record says of the model (``name`` is a slug:
            the record is ``<name>-seed<seed>-external.json``).
        seed: seed of NMI's k-means and Recall@1's bootstrap interval.
        results_dir: where records go (``None``: return the record, write nothing).

    Raises:
        DataError: a bad name, or embeddings that are not (N, d) finite numbers.
    """
    from dmlbench.engine.train import embed

    started = time.perf_counter()
    data = load_data(protocol, data_root)
    emb = embed(_Embedder(embed_fn), data.test, device, batch_size)
    if emb.ndim != 2 or emb.dtype.kind not in "fiu":
        raise DataError(f"{name}: embeddings must be finite numbers of shape (N, d)")
    emb = finite_float32(emb, name)
    model = external_model(name, trained_by, trained_on, int(emb.shape[1]))
    record = score(protocol, emb, data, model, seed, str(device), started)
    if results_dir is not None:
        save_external(record, Path(results_dir))
    return record


def save_external(record: Record, results_dir: Path) -> Path:
    """Write ``record`` where ``dmlbench report`` finds it, beside the protocol's runs."""
    p = record.protocol
    path = record_path(results_dir, p.name, p.hash, record.method, record.seed, "external")
    return save_record(record, path)
