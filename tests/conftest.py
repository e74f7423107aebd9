"""Shared test set-up: a private cache for generated data sets, small protocols."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

import dmlbench  # noqa: F401  (first: pins the SIMD level before any test imports torch)


def pytest_configure(config: pytest.Config) -> None:
    # Generated data sets go to a cache of the test session unless the user points elsewhere,
    # so tests never write into ~/.cache.
    if "DMLBENCH_CACHE" not in os.environ:
        os.environ["DMLBENCH_CACHE"] = tempfile.mkdtemp(prefix="dmlbench-test-cache-")


@pytest.fixture
def tiny_glyphs_protocol():
    """glyphs-mini shrunk to 40 classes and one epoch, from random weights: seconds per method
    on a CPU (the trunk's path has tests of its own: tests/models/test_trunks.py,
    tests/test_run.py)."""
    from dmlbench.protocol import load_protocol

    return load_protocol("glyphs-mini").with_overrides(
        {
            "data.params.num_classes": 40,
            "optim.epochs": 1,
            "model.pretrained": None,
            "batch.size": 40,  # every listed method divides it (exact batches)
            "search.trials": 0,  # paper defaults: tests of the training path, not tuning
        },
        name="glyphs-tiny",
    )


@pytest.fixture
def write_yaml(tmp_path: Path):
    def write(name: str, text: str) -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return write
