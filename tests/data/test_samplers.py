"""The class-balanced P×K sampler."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from dmlbench.data.samplers import ClassBalancedBatchSampler
from dmlbench.errors import DataError

LABELS = np.repeat(np.arange(10), 8)


def test_batches_are_p_classes_times_k() -> None:
    s = ClassBalancedBatchSampler(LABELS, batch_size=16, samples_per_class=4, seed=0)
    assert len(s) == len(LABELS) // 16
    for batch in s:
        counts = Counter(LABELS[batch])
        assert len(batch) == 16 and len(counts) == 4 and set(counts.values()) == {4}


def test_order_depends_on_seed_and_epoch_only() -> None:
    a = ClassBalancedBatchSampler(LABELS, 16, 4, seed=3)
    b = ClassBalancedBatchSampler(LABELS, 16, 4, seed=3)
    assert list(a) == list(b)
    b.set_epoch(1)
    assert list(a) != list(b)
    a.set_epoch(1)
    assert list(a) == list(b)


def test_an_epoch_covers_most_images() -> None:
    s = ClassBalancedBatchSampler(LABELS, 16, 4, seed=0)
    seen = {i for batch in s for i in batch}
    assert len(seen) > 0.6 * len(LABELS)


def test_small_class_repeats_rather_than_fails() -> None:
    labels = np.array([0, 0, 0, 0, 1, 1, 1, 1, 2, 2])  # SOP-like: a class of 2, m = 4
    for batch in ClassBalancedBatchSampler(labels, 8, 4, seed=0):
        assert len(batch) == 8


def test_a_single_image_class_is_a_clear_error() -> None:
    labels = np.array([0, 0, 0, 0, 1, 1, 1, 1, 7])
    with pytest.raises(DataError, match=r"1 training class\(es\) have a single image \(class 7\)"):
        ClassBalancedBatchSampler(labels, 4, 2, seed=0)
    assert len(ClassBalancedBatchSampler(labels, 3, 1, seed=0)) == 3  # m = 1 needs no pairs


def test_impossible_batches_are_clear_errors() -> None:
    with pytest.raises(DataError, match="needs 8 classes"):
        ClassBalancedBatchSampler(LABELS[:16], 16, 2, seed=0)
    with pytest.raises(DataError, match=r"batch\.size 2 is not a multiple of samples_per_class 4"):
        ClassBalancedBatchSampler(LABELS, 2, 4, seed=0)


@pytest.mark.parametrize(("batch_size", "m"), [(60, 5), (60, 3), (60, 10), (64, 4)])
def test_every_batch_has_exactly_the_protocol_size(batch_size: int, m: int) -> None:
    labels = np.repeat(np.arange(40), 16)
    sampler = ClassBalancedBatchSampler(labels, batch_size, m, seed=0)
    assert all(len(batch) == batch_size for batch in sampler)


@pytest.mark.parametrize(("batch_size", "m"), [(64, 5), (64, 3), (60, 8)])
def test_a_batch_size_the_method_cannot_fill_is_refused_not_rounded(
    batch_size: int, m: int
) -> None:
    """Before v2 of glyphs-mini, 64 became 60 for m = 5 and 63 for m = 3, silently."""
    labels = np.repeat(np.arange(40), 16)
    with pytest.raises(DataError, match=rf"batch\.size {batch_size} is not a multiple"):
        ClassBalancedBatchSampler(labels, batch_size, m, seed=0)
