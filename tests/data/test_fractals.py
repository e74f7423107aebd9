"""fractals: formula-driven pretraining images, the same on every run."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dmlbench.data.fractals import COVER, Fractals, FractalsParams, draw, generate

SMALL = FractalsParams(image_size=16, num_classes=12, per_class=3, seed=0)


def test_generation_is_a_function_of_its_parameters() -> None:
    images, labels = generate(SMALL)
    again, labels_again = generate(SMALL)
    assert np.array_equal(images, again) and np.array_equal(labels, labels_again)
    assert images.shape == (36, 3, 16, 16) and images.dtype == np.uint8
    assert np.array_equal(np.bincount(labels), [3] * 12)
    other, _ = generate(SMALL.model_copy(update={"seed": 1}))
    assert not np.array_equal(images, other)


def test_every_class_is_a_shape_and_classes_differ() -> None:
    images, labels = generate(SMALL)
    drawn = images.max(axis=1) > 0
    per_class = [drawn[labels == c].mean() for c in range(12)]
    assert all(COVER[0] < c < COVER[1] for c in per_class)
    means = np.stack([images[labels == c].mean(axis=0).ravel() for c in range(12)])
    assert len({m.tobytes() for m in means}) == 12


def test_the_chaos_game_draws_a_known_attractor() -> None:
    """Three maps halving towards the corners of a triangle: Sierpinski's, whose drawing at
    16 px leaves the triangle's centre empty and covers its corners."""
    half = [0.5, 0.0, 0.0, 0.5]
    maps = np.array([[*half, 0.0, 0.0], [*half, 0.5, 0.0], [*half, 0.25, 0.5]])
    img = draw(maps, 16, np.random.default_rng(0))
    assert (img[0, :15] > 0).all()  # the base (y first), end to end
    assert (img[4:7, 6:9] == 0).all()  # the hole in the middle
    assert img[15, 0] == 0 and img[15, 15] == 0  # beside the apex, outside the triangle
    assert img[13, 6:9].max() > 0  # the apex


def test_splits_hold_out_the_last_tenth_of_the_classes(tmp_path: Path) -> None:
    params = FractalsParams(image_size=16, num_classes=20, per_class=2, seed=0)
    splits = Fractals().load(params, None, tmp_path)
    assert splits.train.num_classes == 18 and splits.test.num_classes == 2
    assert len(splits.train) == 36 and len(splits.test) == 4
    again = Fractals().load(params, None, tmp_path)  # from the cache
    assert again.fingerprint == splits.fingerprint
