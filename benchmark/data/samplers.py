"""Batch samplers. The class-balanced P×K sampler most DML losses need.

A sampler's epoch is set by the trainer (``set_epoch``) and its order depends only on
``(seed, epoch)``: the same seed gives the same batches, and a run resumed at epoch e sees the
batches an uninterrupted run would have seen.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from dmlbench.errors import DataError


class ClassBalancedBatchSampler:
    """Batches of P classes × m samples per class (P = batch_size // m).

    Each class's images are visited in a shuffled cycle, so an epoch covers the data about
    once; a class with fewer than m images (SOP has many with 2) repeats images within the
    batch rather than failing. A class with a single image is an error when m ≥ 2: its
    "positive pairs" would be an image with itself, which every pair loss silently misreads.

    Args:
        labels: class id per training image.
        batch_size: images per batch; must be a multiple of m (every method trains on the
            protocol's exact batch size: batch size moves results, so it is never rounded).
        samples_per_class: m.
        seed: base seed; the order of epoch e depends on (seed, e) only.
    """

    def __init__(self, labels: np.ndarray, batch_size: int, samples_per_class: int, seed: int):
        if samples_per_class < 1:
            raise DataError(f"samples_per_class must be >= 1, got {samples_per_class}")
        self.m = samples_per_class
        self.classes_per_batch = batch_size // samples_per_class
        if batch_size % samples_per_class:
            raise DataError(
                f"batch.size {batch_size} is not a multiple of samples_per_class "
                f"{samples_per_class}: choose a batch size every method divides"
            )
        classes, inverse = np.unique(labels, return_inverse=True)
        if len(classes) < self.classes_per_batch:
            raise DataError(
                f"a batch needs {self.classes_per_batch} classes but the split has {len(classes)}"
            )
        self.by_class = [np.flatnonzero(inverse == c) for c in range(len(classes))]
        lone = [classes[c] for c, ix in enumerate(self.by_class) if len(ix) < 2]
        if lone and samples_per_class >= 2:
            shown = ", ".join(str(c) for c in lone[:5]) + (", …" if len(lone) > 5 else "")
            raise DataError(
                f"{len(lone)} training class(es) have a single image (class {shown}); "
                f"batches of {samples_per_class} images per class need at least 2 per class: "
                "remove these images from the training index or fix their labels"
            )
        self.batch_size = self.classes_per_batch * self.m
        self.num_batches = max(1, len(labels) // self.batch_size)
        self.seed = seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self.num_batches

    def __iter__(self) -> Iterator[list[int]]:
        rng = np.random.default_rng([self.seed, self.epoch])
        queues = [rng.permutation(ix) for ix in self.by_class]
        pos = [0] * len(queues)
        for _ in range(self.num_batches):
            batch: list[int] = []
            for c in rng.choice(len(queues), self.classes_per_batch, replace=False):
                for _ in range(self.m):
                    if pos[c] == len(queues[c]):
                        queues[c] = rng.permutation(self.by_class[c])
                        pos[c] = 0
                    batch.append(int(queues[c][pos[c]]))
                    pos[c] += 1
            yield batch
