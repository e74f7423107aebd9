"""The public API and the one-release aliases of moved modules (CHANGELOG, 0.2)."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import dmlbench

MOVED = {
    "dmlbench.evaluate": ("dmlbench.metrics.retrieval", "evaluate"),
    "dmlbench.evaluate_continuous": ("dmlbench.metrics.continuous", "evaluate_continuous"),
    "dmlbench.runner": ("dmlbench.run", "run_protocol"),
    "dmlbench.train": ("dmlbench.engine.train", "train"),
    "dmlbench.stats": ("dmlbench.metrics.stats", "bootstrap_mean"),
}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_module_path_still_works_and_says_where_it_moved(old: str) -> None:
    new, name = MOVED[old]
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=f"{old} moved to {new}"):
        alias = importlib.import_module(old)
    assert getattr(alias, name) is getattr(importlib.import_module(new), name)


def test_the_public_functions_are_importable_from_the_package() -> None:
    from dmlbench.protocol import load_protocol
    from dmlbench.run import RunOptions, run_protocol

    assert dmlbench.load_protocol is load_protocol
    assert dmlbench.run_protocol is run_protocol and dmlbench.RunOptions is RunOptions
    from dmlbench.engine.inference import load_model
    from dmlbench.results import load_results

    assert dmlbench.load_model is load_model and dmlbench.load_results is load_results
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        dmlbench.nope  # noqa: B018


def test_importing_the_package_loads_neither_torch_nor_the_pipeline() -> None:
    code = "import sys, dmlbench; print('torch' in sys.modules, 'dmlbench.run' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
