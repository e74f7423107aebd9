"""The public API: what ``import dmlbench`` offers, and what it does not load."""

from __future__ import annotations

import subprocess
import sys

import pytest

import dmlbench


def test_the_public_functions_are_importable_from_the_package() -> None:
    from dmlbench.options import RunOptions
    from dmlbench.protocol import load_protocol
    from dmlbench.run import run_protocol

    assert dmlbench.load_protocol is load_protocol
    assert dmlbench.run_protocol is run_protocol and dmlbench.RunOptions is RunOptions
    from dmlbench.engine.inference import load_model
    from dmlbench.report.results import load_results

    assert dmlbench.load_model is load_model and dmlbench.load_results is load_results
    from dmlbench.engine.external import evaluate_external

    assert dmlbench.evaluate_external is evaluate_external
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        dmlbench.nope  # noqa: B018


def test_importing_the_package_loads_neither_torch_nor_the_pipeline() -> None:
    code = "import sys, dmlbench; print('torch' in sys.modules, 'dmlbench.run' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
