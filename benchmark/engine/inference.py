"""Reuse a kept model: rebuild a final run's network, load its verified weights, embed images.

The network is rebuilt from the run's model card (:mod:`dmlbench.engine.artifacts`), whose
protocol must hash to the record's: the record names the protocol by hash only, and a derived
protocol cannot be found again by name. The method builds the network as it did for training
(``Method.build_model``, e.g. DREML's ensemble), without fetching pretrained backbone weights
(they are overwritten by the kept ones).

New images go through the protocol's *test* pipeline (``images.test``), decoded as the
decoded-image cache does; images of the embedded data sets, which have no pipeline, are
brought to the size and channels the network was trained on.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from dmlbench.data.base import Split
from dmlbench.engine.artifacts import ModelCard, read_card, read_weights
from dmlbench.engine.train import baseline_model, init_model
from dmlbench.errors import DmlbenchError
from dmlbench.protocol import Protocol, TransformSpec
from dmlbench.records import Record, is_baseline, load_record, record_path


@dataclass(frozen=True)
class Kept:
    """A final record with kept files, its file, and the protocol and card it was made with."""

    record: Record
    path: Path
    protocol: Protocol
    card: ModelCard


def open_kept(record_or_path: Record | str | Path, results_dir: Path = Path("results")) -> Kept:
    """The record (a file, or a loaded record found under ``results_dir``) and its card.

    Raises:
        DmlbenchError: the record is missing or damaged, keeps no files, or its protocol
            cannot be rebuilt exactly (one line naming the file).
    """
    if isinstance(record_or_path, Record):
        record = record_or_path
        path = record_path(
            results_dir, record.protocol.name, record.protocol.hash, record.method,
            record.seed, record.stage, record.overrides, record.trial,
        )  # fmt: skip
    else:
        path = Path(record_or_path)
        record = _load(path)
    card = read_card(record, path)
    return Kept(record, path, _card_protocol(card, record, path), card)


def _load(path: Path) -> Record:
    if not path.is_file():
        raise DmlbenchError(f"{path}: record not found")
    try:
        return load_record(path)
    except (OSError, ValueError) as err:  # JSON, UTF-8, pydantic's ValidationError
        raise DmlbenchError(f"{path}: not a readable record ({type(err).__name__})") from None


def _card_protocol(card: ModelCard, record: Record, path: Path) -> Protocol:
    from dmlbench.protocol import validate_protocol

    protocol = validate_protocol(dict(card.protocol), source=f"{path.name} model card")
    if protocol.hash != record.protocol.hash:
        raise DmlbenchError(
            f"{path}: the kept protocol hashes to {protocol.short_hash}, the record says "
            f"{record.protocol.hash[:12]}; the protocol cannot be rebuilt exactly"
        )
    return protocol


def load_model(
    record_or_path: Record | str | Path,
    results_dir: str | Path = "results",
    device: str | torch.device = "cpu",
) -> nn.Module:
    """The embedding network of a final run, in eval mode, ready for inference.

    Args:
        record_or_path: a record file, or a loaded :class:`~dmlbench.records.Record` (then
            looked up under ``results_dir``, where ``dmlbench run`` wrote it).
        device: where the network goes.

    The weights are checked against the SHA-256 in the record first. The untrained row keeps
    no weights: its network is rebuilt as the run initialised it (same seed).

    Raises:
        DmlbenchError: one line naming the file (missing, changed, keeps no files...).
    """
    return build_network(open_kept(record_or_path, Path(results_dir))).to(device).eval()


def build_network(kept: Kept) -> nn.Module:
    """The network of ``kept``, on the CPU, with its weights loaded."""
    from dmlbench.methods import method_for

    card, protocol = kept.card, kept.protocol
    channels = int(card.input_shape[0])
    if is_baseline(card.method):
        with _rng_kept():
            return baseline_model(protocol, card.method, channels, card.seed)
    method = method_for(protocol, card.method, card.hparams, card.num_classes)
    weights = read_weights(kept.record, kept.path)
    random_init = protocol.model_copy(  # the kept weights replace any pretrained ones
        update={"model": protocol.model.model_copy(update={"pretrained": None})}
    )
    with _rng_kept():
        model = init_model(random_init, method, channels, card.seed)
    try:
        model.load_state_dict(weights, strict=True)
    except RuntimeError as err:
        first = str(err).splitlines()[0]
        raise DmlbenchError(
            f"{kept.path}: its weights do not fit the network of {card.method} under "
            f"{protocol.name} ({first})"
        ) from None
    return model


@contextmanager
def _rng_kept() -> Iterator[None]:
    """Building a network seeds every generator; the caller's random state is left as it was."""
    py_state, np_state = random.getstate(), np.random.get_state()
    try:
        with torch.random.fork_rng(devices=[]):
            yield
    finally:
        random.setstate(py_state)
        np.random.set_state(np_state)


def kept_split(kept: Kept, which: str, data_root: str | None = None) -> Split:
    """The ``test`` or ``train`` split of the record's protocol, as the run saw it.

    The training images go through the *test* pipeline (no augmentation), so embedding them
    is deterministic.

    Raises:
        DmlbenchError: the data differ from the run's (another data fingerprint).
    """
    from dmlbench.data import load_data

    protocol = kept.protocol
    if which == "train":
        images = protocol.images.model_copy(update={"train": protocol.images.test})
        protocol = protocol.model_copy(update={"images": images})
    data = load_data(protocol, data_root)
    if data.fingerprint != kept.record.data_fingerprint:
        raise DmlbenchError(
            f"{kept.path}: the data of protocol {protocol.name} differ from the run's "
            f"(fingerprint {data.fingerprint[:12]}, the record says "
            f"{kept.record.data_fingerprint[:12]})"
        )
    return data.test if which == "test" else data.train


def folder_split(kept: Kept, directory: Path) -> tuple[Split, list[str]]:
    """Every .jpg/.jpeg/.png file under ``directory`` (sorted), as a split without labels,
    and the files' paths relative to ``directory``."""
    from dmlbench.data.files import walk_files

    if not directory.is_dir():
        raise DmlbenchError(f"--images {directory}: neither test, train nor a folder")
    files = walk_files(directory)
    if not files:
        raise DmlbenchError(f"{directory}: no .jpg, .jpeg or .png images in this folder")
    images = FolderImages(files, kept.protocol.images.test, kept.card.input_shape)
    names = [p.relative_to(directory).as_posix() for p in files]
    return Split(images, np.zeros(len(files), dtype=np.int64)), names


class FolderImages(torch.utils.data.Dataset):
    """Image files through a protocol's test pipeline, decoded one at a time (any number).

    Decoding is the cache's (RGB, shorter side resized to ``spec.resize`` with PIL), then the
    pipeline. A pipeline without a crop (the embedded data sets) is followed by a resize to
    the network's input size, and one-channel networks get PIL's luma conversion.
    """

    def __init__(self, files: list[Path], spec: TransformSpec, input_shape: list[int]) -> None:
        from dmlbench.data.transforms import build_pipeline, output_size

        self.files = files
        self.spec = spec
        self.channels, *size = (int(n) for n in input_shape)
        self.size = size if output_size(spec) is None else None
        self.pipeline = build_pipeline(spec, resized=True)
        if self.channels not in (1, 3):
            raise DmlbenchError(f"a network on {self.channels}-channel images cannot embed files")

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, i: int) -> torch.Tensor:
        from torchvision.transforms.v2 import functional as F

        from dmlbench.data.cache import decode

        pixels = decode(self.files[i], self.spec.resize)  # (3, h, w) uint8; errors name it
        if self.channels == 1:
            pixels = _luma(pixels)
        x = torch.from_numpy(pixels)
        if self.size is not None and list(x.shape[-2:]) != self.size:
            x = F.resize(x, self.size, antialias=True)
        return self.pipeline(x)


def _luma(rgb: np.ndarray) -> np.ndarray:
    """(1, h, w) grey levels of a (3, h, w) RGB image, as PIL's ``convert("L")``."""
    from PIL import Image

    grey = Image.fromarray(np.ascontiguousarray(rgb.transpose(1, 2, 0))).convert("L")
    return np.array(grey, dtype=np.uint8)[None]  # a writable copy, as torch wants
