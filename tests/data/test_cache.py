"""The decoded-image cache: exact resize, reuse, atomic build, damage and corrupt images."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from torchvision import transforms as T

from dmlbench.data import cache as cache_mod
from dmlbench.data.cache import ImageCache, open_or_build, resized_shape
from dmlbench.errors import DataError
from tests.data.fixtures import write_jpeg

HOLD = (
    "import sys, time; from filelock import FileLock; l = FileLock(sys.argv[1]); l.acquire(); "
    "print('locked', flush=True); time.sleep(60)"
)


@pytest.fixture
def files(tmp_path: Path) -> list[Path]:
    out = []
    for i, size in enumerate([(40, 52), (52, 40), (33, 33), (61, 20)]):
        out.append(tmp_path / "img" / f"{i}.jpg")
        write_jpeg(out[-1], i, 0, size=size)
    return out


def test_cached_pixels_equal_torchvision_resize_on_pil(files: list[Path], tmp_path: Path) -> None:
    cache = open_or_build(tmp_path / "c", "hash", files, 30)
    for i, path in enumerate(files):
        expected = T.PILToTensor()(T.Resize(30)(Image.open(path).convert("RGB")))
        assert torch.equal(cache.get(i), expected)
        w, h = Image.open(path).size
        assert resized_shape(w, h, 30) == tuple(expected.shape[1:])


def test_original_size_without_resize(files: list[Path], tmp_path: Path) -> None:
    cache = open_or_build(tmp_path / "c", "hash", files, None)
    assert cache.get(1).shape == (3, 40, 52)


def test_reused_not_rebuilt(
    files: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = open_or_build(tmp_path / "c", "hash", files, 30)

    def no_decode(*args: object) -> None:
        raise AssertionError("the cache was rebuilt")

    monkeypatch.setattr(cache_mod, "decode", no_decode)
    again = open_or_build(tmp_path / "c", "hash", files, 30)
    assert again.path == first.path and torch.equal(again.get(3), first.get(3))
    other_size = cache_mod.cache_path(tmp_path / "c", "hash", 20)
    assert other_size != first.path  # a different resize is a different cache


def test_damaged_cache_is_rebuilt(files: list[Path], tmp_path: Path) -> None:
    cache = open_or_build(tmp_path / "c", "hash", files, 30)
    expected = cache.get(2).clone()
    pixels = cache.path / "pixels.npy"
    pixels.write_bytes(pixels.read_bytes()[:-100])  # truncated
    rebuilt = open_or_build(tmp_path / "c", "hash", files, 30)
    assert torch.equal(rebuilt.get(2), expected)


def test_corrupt_image_names_it_and_leaves_no_cache(files: list[Path], tmp_path: Path) -> None:
    data = files[2].read_bytes()
    files[2].write_bytes(data[: len(data) // 2])  # header intact, pixels cut
    with pytest.raises(DataError, match=f"{files[2]}: corrupt image"):
        open_or_build(tmp_path / "c", "hash", files, 30)
    assert list((tmp_path / "c" / "images").iterdir()) == []
    files[2].unlink()
    with pytest.raises(DataError, match=f"{files[2]}: image file is missing"):
        open_or_build(tmp_path / "c", "hash", files, 30)


def test_pickled_cache_does_not_carry_pixels(files: list[Path], tmp_path: Path) -> None:
    cache = open_or_build(tmp_path / "c", "hash", files, 30)
    _ = cache.get(0)  # opens the memory map
    clone = pickle.loads(pickle.dumps(cache))
    assert isinstance(clone, ImageCache) and clone._pixels is None
    assert len(pickle.dumps(cache)) < 4096
    assert torch.equal(clone.get(0), cache.get(0))
    assert np.array_equal(clone.index, cache.index)


def _old_build_folder(parent: Path, name: str) -> Path:
    tmp = parent / f".{name}.tmp-x"
    tmp.mkdir(parents=True)
    (tmp / cache_mod.BUILDING).touch()
    os.utime(tmp, (1e9, 1e9))  # older than STALE_AFTER: only its lock says it is alive
    return tmp


def test_a_build_whose_lock_is_held_elsewhere_is_kept(tmp_path: Path) -> None:
    """The lock is a filelock (no fcntl: the module imports on every platform); a folder whose
    lock another process holds is a live build, one whose lock can be taken is abandoned."""
    live, dead = _old_build_folder(tmp_path, "live"), _old_build_folder(tmp_path, "dead")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(live / cache_mod.BUILDING)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        assert cache_mod.clean_stale_builds(tmp_path) == [dead]
        assert live.is_dir() and not dead.exists()
    finally:
        holder.kill()
        holder.wait()
    assert cache_mod.clean_stale_builds(tmp_path) == [live]


def test_a_finished_build_leaves_no_lock_or_temp_folder(files: list[Path], tmp_path: Path) -> None:
    root = tmp_path / "cache"
    open_or_build(root, "abc", files, resize=20)
    assert [p for p in root.rglob("*") if ".tmp-" in p.name or p.name == cache_mod.BUILDING] == []
