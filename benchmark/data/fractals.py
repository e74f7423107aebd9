"""fractals: formula-driven images for pretraining, after FractalDB (Kataoka et al., ACCV 2020).

A class is an iterated function system (IFS): two to four random contractive affine maps of the
plane. Its images are the attractor drawn by the chaos game, each instance with one of its
map's six parameters scaled by a factor in [0.8, 1.2] (FractalDB's intra-category variation)
and a random colour on black. Classes whose maps are not contractive enough, or whose drawing
covers too little or too much of the image, are rejected, as FractalDB filters by the
"σ-factor" (the sum of the maps' singular values), so that every class is a shape.

The images owe nothing to any board: no letter, emoji, icon or pose; generated from numbers,
they carry no licence and need no package, and the same on every x86-64 machine (elementwise
float64 arithmetic and integer histograms). They are the source the embedded protocols' trunk
is pretrained on (``protocols/trunks/``); a board's test classes are disjoint from them by
construction.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
from pydantic import BaseModel, Field

from dmlbench.data.about import About
from dmlbench.data.base import (
    DATASETS,
    ArrayImages,
    DatasetSource,
    DataSplits,
    Split,
    fingerprint_arrays,
)
from dmlbench.data.npz_cache import load_or_rebuild
from dmlbench.protocol import MAX_SEED, FrozenModel, Int

GENERATOR_VERSION = 1
POINTS, ITERATIONS, BURN_IN = 2000, 40, 10  # chaos game: 60,000 points per image
SIGMA = (1.2, 3.5)  # accepted range of the sum of the maps' singular values
COVER = (0.05, 0.6)  # accepted fraction of pixels the drawing covers
TEST_FRACTION = 0.1  # classes held out to report how well a trunk retrieves unseen ones


class FractalsParams(FrozenModel):
    image_size: Int = Field(16, ge=8, le=128)
    num_classes: Int = Field(1000, ge=4, le=100_000)
    per_class: Int = Field(10, ge=2, le=1000)
    seed: Int = Field(0, ge=0, le=MAX_SEED)


def _maps(rng: np.random.Generator) -> np.ndarray | None:
    """Two to four affine maps (a, b, c, d, e, f) of one candidate class, or None when the
    system is rejected (a map not contractive, or a σ-factor outside :data:`SIGMA`)."""
    maps = rng.uniform(-1.0, 1.0, size=(int(rng.integers(2, 5)), 6))
    singular = [np.linalg.svd(m[:4].reshape(2, 2), compute_uv=False) for m in maps]
    if any(s[0] >= 0.95 for s in singular):
        return None
    sigma = sum(float(s.sum()) for s in singular)
    return maps if SIGMA[0] < sigma < SIGMA[1] else None


def draw(maps: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """The attractor of ``maps`` by the chaos game, as a (size, size) intensity in [0, 1]."""
    dets = np.abs(maps[:, 0] * maps[:, 3] - maps[:, 1] * maps[:, 2]) + 1e-3
    pts = rng.uniform(-1.0, 1.0, size=(POINTS, 2))
    drawn = []
    for it in range(ITERATIONS):
        m = maps[rng.choice(len(maps), size=POINTS, p=dets / dets.sum())]
        pts = np.stack(
            [
                m[:, 0] * pts[:, 0] + m[:, 1] * pts[:, 1] + m[:, 4],
                m[:, 2] * pts[:, 0] + m[:, 3] * pts[:, 1] + m[:, 5],
            ],
            axis=1,
        )
        if it >= BURN_IN:
            drawn.append(pts)
    xy = np.concatenate(drawn)
    lo, span = xy.min(axis=0), float((xy.max(axis=0) - xy.min(axis=0)).max()) + 1e-9
    cells = ((xy - lo) / span * (size - 1)).astype(np.int64)
    counts = np.bincount(cells[:, 1] * size + cells[:, 0], minlength=size * size)
    counts = counts.reshape(size, size).astype(np.float64)
    return np.clip(counts / max(float(np.median(counts[counts > 0])), 1e-9), 0.0, 1.0)


def generate(params: FractalsParams) -> tuple[np.ndarray, np.ndarray]:
    """All images (N, 3, S, S) uint8 and class ids (N,), ``per_class`` images a class."""
    size, n = params.image_size, params.per_class
    images: list[np.ndarray] = []
    labels: list[int] = []
    attempt = 0
    while len(labels) < params.num_classes * n:
        attempt += 1
        maps = _maps(np.random.default_rng([params.seed, attempt, GENERATOR_VERSION]))
        if maps is None:
            continue
        label = len(labels) // n
        drawn = []
        for k in range(n):
            rng = np.random.default_rng([params.seed, attempt, k, GENERATOR_VERSION])
            varied = maps.copy()
            varied[rng.integers(len(maps)), rng.integers(4)] *= rng.uniform(0.8, 1.2)
            intensity = draw(varied, size, rng)
            colour = rng.integers(64, 256, size=3).astype(np.float64)
            drawn.append((intensity[None] * colour[:, None, None]).round().astype(np.uint8))
        cover = float(np.mean([d.max(axis=0) > 0 for d in drawn]))
        if COVER[0] < cover < COVER[1]:
            images += drawn
            labels += [label] * n
    return np.stack(images), np.asarray(labels, dtype=np.int64)


def _cache_key(params: FractalsParams) -> str:
    text = f"{params.model_dump_json()}|v{GENERATOR_VERSION}|np{np.__version__}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def load_or_generate(params: FractalsParams, cache: Path) -> tuple[np.ndarray, np.ndarray]:
    path = cache / "fractals" / f"fractals-{_cache_key(params)}.npz"
    size, n = params.image_size, params.num_classes * params.per_class

    def plausible(arrays: tuple[np.ndarray, ...]) -> bool:
        images, labels = arrays
        return (
            images.dtype == np.uint8
            and images.shape == (n, 3, size, size)
            and labels.shape == (n,)
            and bool(((labels >= 0) & (labels < params.num_classes)).all())
        )

    images, labels = load_or_rebuild(
        path, ("images", "labels"), lambda: generate(params), plausible, "fractals cache"
    )
    return images, labels


@DATASETS.register("fractals")
class Fractals(DatasetSource):
    Params = FractalsParams
    reads_root = False
    description = "formula-driven fractals (FractalDB-style IFS attractors; generated)"
    about = About(
        source="generated from random iterated function systems (no images, no package)",
        licence="none needed: generated from numbers",
        citation="Kataoka et al., Pre-training without Natural Images, ACCV 2020",
        splits="by class: the last tenth of the classes are held out",
    )

    def load(self, params: BaseModel, root: Path | None, cache_dir: Path) -> DataSplits:
        assert isinstance(params, FractalsParams)
        images, labels = load_or_generate(params, cache_dir)
        n_test = max(2, round(TEST_FRACTION * params.num_classes))
        first_test = params.num_classes - n_test
        train = labels < first_test
        return DataSplits(
            train=Split(ArrayImages(images[train]), labels[train]),
            test=Split(ArrayImages(images[~train]), labels[~train] - first_test),
            fingerprint=fingerprint_arrays(images, labels, extra="fractals"),
            info={"train_classes": first_test, "test_classes": n_test},
        )
