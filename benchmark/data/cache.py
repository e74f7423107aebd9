"""Decoded, resized images cached on disk, so an epoch never decodes a JPEG.

One cache holds every image of a data set's manifest, decoded to RGB and resized so the
shorter side is ``resize`` pixels (PIL bilinear, exactly what ``torchvision.transforms.Resize``
does to a PIL image), stored as uint8 (3, h, w) blocks one after another in a single flat
``pixels.npy`` that is memory-mapped when read; ``index.npy`` holds (offset, h, w) per image.
Images keep their own aspect ratio, so random crops see the whole picture.

The cache directory is named by the manifest hash (relative paths, sizes, labels) and the
resize, so a changed file list or size can never reuse a stale cache. It is written in a
temporary directory and renamed into place: readers see a complete cache or none. The first
decode of a data set runs on a thread pool (PIL releases the GIL while decoding and
resizing); a missing or corrupt image stops it with a :class:`DataError` naming the file.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import os
import shutil
import tempfile
import time
import zlib
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import torch
from filelock import FileLock, Timeout

from dmlbench.atomic import atomic_write
from dmlbench.data.npz_cache import DAMAGED
from dmlbench.errors import DataError

log = logging.getLogger(__name__)
# 2: 16-bit grey PNGs are scaled to 8 bits instead of clipped to white (:func:`to_rgb`); every
# other image decodes to the same pixels, but a cache of version 1 may hold clipped ones, so
# each cache is rebuilt once.
CACHE_VERSION = 2
CHUNK = 1 << 24  # pixels.npy is checksummed per 16 MB
BUILDING = ".building"  # lock file of a build in progress
STALE_AFTER = 60.0  # seconds: an unlocked temp folder older than this is abandoned


def resized_shape(width: int, height: int, resize: int | None) -> tuple[int, int]:
    """(h, w) after resizing the shorter side to ``resize`` (torchvision's rounding)."""
    if resize is None:
        return height, width
    short, long = (width, height) if width <= height else (height, width)
    new_short, new_long = resize, int(resize * long / short)
    return (new_long, new_short) if width <= height else (new_short, new_long)


def _open(path: Path):
    from PIL import Image, UnidentifiedImageError

    try:
        return Image.open(path)
    except FileNotFoundError:
        raise DataError(f"{path}: image file is missing") from None
    except Image.DecompressionBombError as err:  # a header claiming billions of pixels
        raise DataError(f"{path}: refused, {err}") from None
    except (UnidentifiedImageError, OSError, ValueError) as err:
        raise DataError(f"{path}: not a readable image ({err})") from None


def image_size(path: Path) -> tuple[int, int]:
    """(width, height) from the file header, without decoding the pixels."""
    with _open(path) as img:
        return img.size


WIDE_GREY = ("I;16", "I;16L", "I;16B", "I;16N", "I")  # 16-bit grey PNG, as Pillow opens it


def to_rgb(img: Any) -> Any:
    """``img`` as 8-bit RGB.

    Pillow's ``convert("RGB")`` clips a 16-bit grey image (mode ``I;16``, or ``I``) at 255
    instead of scaling it, so every pixel above 255 of 65535 became white: such images are
    scaled to 8 bits first (the top 8 bits, as 16-bit RGB PNGs are read). Other modes
    (grey, palette, RGBA, CMYK…) convert as before: their pixels do not change.
    """
    from PIL import Image

    if img.mode not in WIDE_GREY:
        return img.convert("RGB")
    wide = np.asarray(img, dtype=np.int64)
    grey = np.clip(wide, 0, 65535) >> 8
    return Image.fromarray(grey.astype(np.uint8)).convert("RGB")  # uint8 2-D: mode L


def decode(path: Path, resize: int | None) -> np.ndarray:
    """The image as uint8 (3, h, w) RGB, shorter side resized to ``resize``."""
    from PIL import Image

    with _open(path) as img:
        try:
            img.load()
            rgb = to_rgb(img)
        except (OSError, ValueError, SyntaxError) as err:  # truncated or corrupt data
            raise DataError(f"{path}: corrupt image ({err})") from None
        except Image.DecompressionBombError as err:
            raise DataError(f"{path}: refused, {err}") from None
    if resize is not None:
        h, w = resized_shape(rgb.width, rgb.height, resize)
        if (h, w) != (rgb.height, rgb.width):
            rgb = rgb.resize((w, h), Image.Resampling.BILINEAR)
    return np.ascontiguousarray(np.asarray(rgb, dtype=np.uint8).transpose(2, 0, 1))


class ImageCache:
    """A finished cache directory: memory-mapped pixels and the (offset, h, w) index.

    The memory map is opened lazily in each process (DataLoader workers included) and is not
    pickled, so a dataset holding a cache is cheap to send to workers.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.index = np.load(path / "index.npy")
        self._pixels: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.index.shape[0])

    @property
    def pixels(self) -> np.ndarray:
        if self._pixels is None:
            self._pixels = np.load(self.path / "pixels.npy", mmap_mode="r")
        return self._pixels

    def get(self, i: int) -> torch.Tensor:
        """Image ``i`` as a uint8 (3, h, w) tensor (a copy, safe to modify)."""
        offset, h, w = self.index[i].tolist()
        block = np.array(self.pixels[offset : offset + 3 * h * w])
        return torch.from_numpy(block).view(3, h, w)

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "index": self.index, "_pixels": None}


def cache_path(cache_root: Path, manifest_hash: str, resize: int | None) -> Path:
    size = "orig" if resize is None else f"r{resize}"
    return cache_root / "images" / f"{manifest_hash[:20]}-{size}-v{CACHE_VERSION}"


def open_or_build(
    cache_root: Path,
    manifest_hash: str,
    files: Sequence[Path],
    resize: int | None,
    workers: int | None = None,
) -> ImageCache:
    """The cache of ``files`` at ``resize``, built on first use; a damaged one is rebuilt."""
    path = cache_path(cache_root, manifest_hash, resize)
    clean_stale_builds(path.parent)
    problem = _problem(path, len(files))
    if problem is None:
        with contextlib.suppress(OSError):  # last use, for `dmlbench cache clean --older-than`
            os.utime(path)
        return ImageCache(path)
    if path.exists():
        log.warning("image cache %s is damaged (%s); rebuilding it", path, problem)
        shutil.rmtree(path, ignore_errors=True)
    _build(path, files, resize, workers)
    return ImageCache(path)


def _stamp(path: Path) -> list[int]:
    st = path.stat()
    return [st.st_size, st.st_mtime_ns]


def _chunk_crcs(pixels: np.ndarray) -> list[int]:
    """CRC-32 of each :data:`CHUNK` bytes of the flat pixel array."""
    return [zlib.crc32(pixels[i : i + CHUNK].data) for i in range(0, max(len(pixels), 1), CHUNK)]


def _problem(path: Path, count: int) -> str | None:
    """Why the cache at ``path`` cannot be used (``None``: it can).

    ``index.npy`` is small and checked against its SHA-256 every time. ``pixels.npy`` can be
    tens of GB, so its per-chunk CRC-32s are recomputed only when its size or modification
    time differ from those recorded when it was last verified (overwriting bytes changes the
    mtime); a cache that passes gets the new stamp.
    """
    if not path.exists():
        return "absent"
    try:
        meta = json.loads((path / "meta.json").read_text(encoding="utf-8"))
        if not isinstance(meta, dict) or meta.get("version") != CACHE_VERSION:
            return "no or an older meta.json"
        if meta.get("count") != count or count == 0:
            return f"{meta.get('count')} images cached, {count} listed"
        index_bytes = (path / "index.npy").read_bytes()
        if hashlib.sha256(index_bytes).hexdigest() != meta.get("index_sha256"):
            return "index.npy differs from its checksum"
        index = np.load(io.BytesIO(index_bytes), allow_pickle=False)
        pixels = np.load(path / "pixels.npy", mmap_mode="r", allow_pickle=False)
    except (*DAMAGED, UnicodeDecodeError) as err:
        return f"{type(err).__name__}: {err}".splitlines()[0][:200]
    if index.shape != (count, 3) or pixels.dtype != np.uint8 or pixels.ndim != 1:
        return "index.npy or pixels.npy has the wrong shape"
    offset, h, w = (int(v) for v in index[-1])
    if pixels.shape != (offset + 3 * h * w,):
        return "pixels.npy is truncated"
    if meta.get("pixels_stamp") == _stamp(path / "pixels.npy"):
        return None
    crcs = meta.get("pixels_crc32")
    actual = _chunk_crcs(pixels)
    if crcs != actual:
        pairs = zip(actual, crcs or [], strict=False)
        bad = next((i for i, (a, b) in enumerate(pairs) if a != b), 0)
        return f"pixels.npy differs from its checksum from byte {bad * CHUNK}"
    meta["pixels_stamp"] = _stamp(path / "pixels.npy")
    with contextlib.suppress(OSError):  # a read-only cache: verified again next time
        atomic_write(path / "meta.json", lambda fh: fh.write(json.dumps(meta).encode()))
    return None


def clean_stale_builds(folder: Path) -> list[Path]:
    """Remove temp folders of cache builds whose process is gone (SIGKILL, power loss).

    A build holds an exclusive lock on ``.building`` in its temp folder for its whole life, and
    the lock dies with the process: a temp folder whose lock can be taken is abandoned. Returns
    the folders removed.
    """
    removed = []
    for tmp in sorted(folder.glob(".*.tmp-*")) if folder.is_dir() else []:
        try:
            # A build takes its lock right after creating the folder: a young folder may
            # be one that has not taken it yet.
            if not tmp.is_dir() or time.time() - tmp.stat().st_mtime < STALE_AFTER:
                continue
            with FileLock(tmp / BUILDING, timeout=0):
                shutil.rmtree(tmp, ignore_errors=True)
        except Timeout:  # a live build, in this or another process
            continue
        except OSError:  # read-only cache folder: nothing we can do, nothing we need
            continue
        log.warning("removed %s, left by an interrupted image cache build", tmp)
        removed.append(tmp)
    return removed


def _build(path: Path, files: Sequence[Path], resize: int | None, workers: int | None) -> None:
    from tqdm.auto import tqdm

    if not files:
        raise DataError("no images to cache")
    workers = workers or min(8, os.cpu_count() or 1)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.tmp-"))
    building = FileLock(tmp / BUILDING)  # held until the build ends: see clean_stale_builds
    building.acquire()
    try:
        with ThreadPoolExecutor(workers) as pool:
            sizes = list(pool.map(image_size, files))
        shapes = np.array([resized_shape(w, h, resize) for w, h in sizes], dtype=np.int64)
        lengths = 3 * shapes[:, 0] * shapes[:, 1]
        offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        index = np.column_stack([offsets, shapes]).astype(np.int64)
        pixels = np.lib.format.open_memmap(
            tmp / "pixels.npy", mode="w+", dtype=np.uint8, shape=(int(lengths.sum()),)
        )

        def fill(i: int) -> None:
            arr = decode(files[i], resize)
            if arr.shape[1:] != tuple(shapes[i]):  # header and pixels disagree
                raise DataError(f"{files[i]}: decoded size {arr.shape[1:]} differs from header")
            pixels[offsets[i] : offsets[i] + lengths[i]] = arr.reshape(-1)

        log.info("decoding %d images into %s", len(files), path)
        with (
            ThreadPoolExecutor(workers) as pool,
            tqdm(
                total=len(files), desc="caching images", unit="img", disable=None, leave=False
            ) as bar,
        ):
            for _ in pool.map(fill, range(len(files))):
                bar.update(1)
        pixels.flush()
        np.save(tmp / "index.npy", index)
        meta = {
            "version": CACHE_VERSION,
            "count": len(files),
            "resize": resize,
            "index_sha256": hashlib.sha256((tmp / "index.npy").read_bytes()).hexdigest(),
            "pixels_crc32": _chunk_crcs(pixels),
            "pixels_stamp": _stamp(tmp / "pixels.npy"),
        }
        (tmp / BUILDING).unlink()
        (tmp / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
        try:
            os.rename(tmp, path)
        except OSError:  # another process finished the same cache first
            if _problem(path, len(files)) is not None:
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        building.release()


def _seeds(seed: int, epoch: int, keys: Sequence[int], n: int) -> list[int]:
    """``n`` 63-bit seeds that depend only on (seed, epoch, keys)."""
    state = np.random.SeedSequence([seed, epoch, *keys]).generate_state(n, np.uint64)
    return [int(s >> np.uint64(1)) for s in state]


class CachedImages(torch.utils.data.Dataset):
    """Items ``indices`` of a cache, passed through a pipeline (float (3, S, S) tensors).

    Once :meth:`set_epoch` has been called, random augmentations draw from a generator seeded
    by (seed, epoch, the batch's indices, position in the batch): a crop then depends neither on
    the number of DataLoader workers nor on which worker fetched it, and an image repeated
    within a batch (a class with fewer than K images) still gets a different crop each time.
    Before that, they use torch's global generator (seeded per worker by PyTorch, so still
    deterministic for a seeded main process).
    """

    def __init__(self, cache: ImageCache, indices: np.ndarray, pipeline: Any, random: bool) -> None:
        self.cache = cache
        self.indices = np.asarray(indices, dtype=np.int64)
        self.pipeline = pipeline
        self.random = random
        self.seed: int | None = None
        self.epoch = 0

    def set_epoch(self, epoch: int, seed: int = 0) -> None:
        self.epoch, self.seed = epoch, seed

    def __len__(self) -> int:
        return int(self.indices.shape[0])

    def __getitem__(self, i: int) -> torch.Tensor:
        return self.__getitems__([i])[0]

    def __getitems__(self, indices: list[int]) -> torch.Tensor:
        return self._items(indices, self.pipeline)

    def can_give_uint8(self) -> bool:
        """Whether :meth:`uint8_items` can run (the pipeline ends in its float conversion)."""
        return self._uint8 is not None

    def uint8_items(self, indices: list[int]) -> torch.Tensor:
        """The batch before its conversion to float (uint8); :meth:`to_float` converts it to
        exactly ``self[indices]`` (:func:`~dmlbench.data.transforms.split_to_float`)."""
        assert self._uint8 is not None, "the pipeline does not end in a float conversion"
        return self._items(indices, self._uint8[0])

    def to_float(self, x: torch.Tensor) -> torch.Tensor:
        """A uint8 batch of :meth:`uint8_items` as the pipeline ends it (float32 in [0, 1])."""
        assert self._uint8 is not None, "the pipeline does not end in a float conversion"
        return self._uint8[1](x)

    @property
    def _uint8(self) -> tuple[Any, Any] | None:
        from dmlbench.data.transforms import split_to_float

        return split_to_float(self.pipeline)

    def _items(self, indices: list[int], pipeline: Any) -> torch.Tensor:
        images = [self.cache.get(int(self.indices[i])) for i in indices]
        if not self.random and len({im.shape for im in images}) == 1:
            # One call on the stacked batch: the deterministic steps (resize, centre crop,
            # scaling to float) work plane by plane, so the values are those of one call per
            # image, at a fraction of torchvision's per-call cost on small images.
            return pipeline(torch.stack(images))
        if not self.random or self.seed is None:
            return torch.stack([pipeline(im) for im in images])
        seeds = _seeds(self.seed, self.epoch, [int(i) for i in indices], len(indices))
        out = []
        state = torch.get_rng_state()  # the CPU generator only: torch.manual_seed would also
        try:  # queue seeds for every accelerator, about 2 ms per call
            for im, s in zip(images, seeds, strict=True):
                torch.default_generator.manual_seed(s)
                out.append(pipeline(im))
        finally:
            torch.set_rng_state(state)
        return torch.stack(out)


def seed_worker(worker_id: int) -> None:
    """DataLoader ``worker_init_fn``: seed numpy and ``random`` in a worker from torch's seed
    for it (PyTorch seeds torch itself per worker from the loader's generator)."""
    import random

    seed = torch.initial_seed() % 2**32
    np.random.seed(seed)
    random.seed(seed)
