"""Where the k-NN index goes: the run's GPU when faiss has GPU support, else the CPU, logged.

There is no CUDA here: a stand-in faiss module (GPU support or not, two GPUs) and torch's CUDA
state are monkeypatched; the indexes themselves are real CPU ``IndexFlatL2``s.
"""

from __future__ import annotations

import logging
import sys
from types import SimpleNamespace
from typing import Any

import faiss
import numpy as np
import pytest
import torch

from dmlbench.metrics import knn as knn_module
from dmlbench.metrics.retrieval import faiss_flat_l2, knn

LOGGER = "dmlbench.metrics.knn"


@pytest.fixture(autouse=True)
def fresh_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing logged nor placed yet in this "process"."""
    monkeypatch.setattr(knn_module, "_GPU_RESOURCES", {})
    monkeypatch.setattr(knn_module, "_LOGGED", set())


def fake_faiss(monkeypatch: pytest.MonkeyPatch, gpu_support: bool) -> list[tuple[Any, int]]:
    """Install a faiss stand-in; returns the (resources, device) of each index moved to a GPU."""
    moved: list[tuple[Any, int]] = []

    def to_gpu(resources: Any, device: int, index: Any) -> Any:
        moved.append((resources, device))
        return index

    module = SimpleNamespace(IndexFlatL2=faiss.IndexFlatL2)
    if gpu_support:
        module.StandardGpuResources = object
        module.get_num_gpus = lambda: 2
        module.index_cpu_to_gpu = to_gpu
    monkeypatch.setitem(sys.modules, "faiss", module)
    return moved


def torch_cuda(monkeypatch: pytest.MonkeyPatch, initialised: bool, current: int = 0) -> None:
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: initialised)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: current)


def messages(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records if r.name == LOGGER]


def test_gpu_index_on_the_runs_device_logged_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    moved = fake_faiss(monkeypatch, gpu_support=True)
    torch_cuda(monkeypatch, initialised=True, current=0)
    caplog.set_level(logging.INFO, logger=LOGGER)
    faiss_flat_l2(4, "cuda:1")  # a search worker on the second GPU, not GPU 0
    faiss_flat_l2(4, torch.device("cuda", 1))
    faiss_flat_l2(4, "cuda")  # no index: torch's current device
    assert [device for _, device in moved] == [1, 1, 0]
    assert moved[0][0] is moved[1][0] is not moved[2][0]  # one StandardGpuResources per GPU
    assert messages(caplog) == [
        (logging.INFO, "k-NN search: faiss index on GPU 1"),
        (logging.INFO, "k-NN search: faiss index on GPU 0"),
    ]


def test_without_a_device_the_process_cuda_state_decides(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    moved = fake_faiss(monkeypatch, gpu_support=True)
    caplog.set_level(logging.INFO, logger=LOGGER)
    torch_cuda(monkeypatch, initialised=False)  # a run on the CPU, a GPU beside it
    faiss_flat_l2(4)
    assert moved == []
    torch_cuda(monkeypatch, initialised=True, current=1)  # a run that set its device to cuda:1
    faiss_flat_l2(4)
    assert [device for _, device in moved] == [1]
    assert messages(caplog) == [
        (logging.INFO, "k-NN search: faiss index on the CPU"),
        (logging.INFO, "k-NN search: faiss index on GPU 1"),
    ]


def test_cpu_run_keeps_the_cpu_index_with_gpu_faiss(monkeypatch: pytest.MonkeyPatch) -> None:
    moved = fake_faiss(monkeypatch, gpu_support=True)
    torch_cuda(monkeypatch, initialised=True, current=0)
    assert isinstance(faiss_flat_l2(4, "cpu"), faiss.IndexFlatL2)
    assert moved == []


def test_cuda_run_without_gpu_faiss_says_so_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    fake_faiss(monkeypatch, gpu_support=False)  # faiss-cpu: no StandardGpuResources
    torch_cuda(monkeypatch, initialised=True, current=0)
    caplog.set_level(logging.INFO, logger=LOGGER)
    for _ in range(3):
        assert isinstance(faiss_flat_l2(4, "cuda:0"), faiss.IndexFlatL2)
    [(level, text)] = messages(caplog)
    assert level == logging.WARNING
    assert "on the CPU although the run is on cuda:0" in text
    assert "pip uninstall faiss-cpu && pip install faiss-gpu-cu12" in text


def test_knn_on_the_cpu_index() -> None:
    """The real faiss of this machine (no GPU): the default path still searches exactly."""
    x = np.eye(4, dtype=np.float32)
    assert knn(x, x, 1)[:, 0].tolist() == [0, 1, 2, 3]


def test_a_run_on_cuda_k_makes_gpu_k_current_so_its_evaluation_index_goes_there(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A search worker on cuda:1 resolves its device once; the evaluation's index, built
    without being told the device, then lands on GPU 1, not GPU 0."""
    from dmlbench.engine.train import resolve_device

    moved = fake_faiss(monkeypatch, gpu_support=True)
    current = [0]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "set_device", lambda d: current.__setitem__(0, d.index))
    torch_cuda(monkeypatch, initialised=True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: current[0])
    assert resolve_device("cuda:1") == torch.device("cuda", 1)
    faiss_flat_l2(4)
    assert [device for _, device in moved] == [1]
