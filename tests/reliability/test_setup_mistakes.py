"""Setup mistakes are one line before any work, and never spend the equal tuning budget.

Each case runs the CLI (in this process, as a new one would: :mod:`tests.cli.runner`; the
memory-limit case in a child) and asserts one ``error:`` line naming the problem,
exit status 2, no traceback, and that nothing was written (no record, no study): a mistake
that could be found before the study started must not count as a failed trial.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.cli.runner import run_cli

BASE = ["--protocol", "glyphs-mini", "--seed", "0", "--no-progress"]


def run(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    out: list[str | Path] = [
        "--results-dir",
        tmp_path / "results",
        "--reports-dir",
        tmp_path / "reports",
    ]
    return run_cli("run", *argv, *out)


def assert_one_line(done: subprocess.CompletedProcess[str], *words: str) -> None:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, done.stderr
    for word in words:
        assert word in errors[0], errors[0]


@pytest.mark.parametrize(
    ("hparam", "words"),
    [
        ("multi-similarity.alpha=abc", ("expected float", "'abc'")),
        ("multi-similarity.alpha=-5", ("must be > 0",)),
        ("multi-similarity.samples_per_class=2.5", ("expected int",)),
        ("margin.beta_per_class=1", ("expected bool",)),
    ],
)
def test_hparam_types_and_ranges_are_checked_before_data(
    tmp_path: Path, hparam: str, words: tuple[str, ...]
) -> None:
    method = hparam.split(".")[0]
    done = run(tmp_path, *BASE, "--method", method, "--hparam", hparam)
    assert_one_line(done, hparam, *words)
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").rglob("*.json"))


def test_images_per_class_the_protocol_fixes_cannot_be_overridden(tmp_path: Path) -> None:
    """emoji-mini samples 2 per class for every method: a run at 4 would name what never ran."""
    hparam = "contrastive.samples_per_class=4"
    done = run(tmp_path, "--protocol", "emoji-mini", "--method", "contrastive", "--hparam", hparam)
    assert_one_line(done, "samples_per_class 4", "batch.samples_per_class at 2")
    assert not list(tmp_path.rglob("*.json"))


@pytest.mark.parametrize("seed", ["92233720368547758", "4294967296", "2147483648"])
def test_a_seed_faiss_cannot_take_is_refused_before_any_record(tmp_path: Path, seed: str) -> None:
    done = run(tmp_path, "--protocol", "glyphs-mini", "--method", "contrastive", "--seed", seed)
    assert_one_line(done, f"--seed {seed}", "[0, 2147483647]")
    assert not list(tmp_path.rglob("*.json"))


@pytest.mark.parametrize("device", ["bogus", "cuda", "cuda:7"])
def test_a_device_that_is_not_here_is_one_line_before_the_study(
    tmp_path: Path, device: str
) -> None:
    if device.startswith("cuda") and torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    done = run(tmp_path, *BASE, "--method", "contrastive", "--trials", "2", "--device", device)
    assert_one_line(done, f"--device {device}")
    assert not list(tmp_path.rglob("optuna.db")) and not list(tmp_path.rglob("*.json"))


def test_a_class_method_on_a_continuous_protocol_is_one_line_before_the_study(
    tmp_path: Path,
) -> None:
    """It used to run all 20 trials, each failing with a misleading single-image message."""
    done = run(tmp_path, "--protocol", "poses-mini", "--method", "contrastive", "--trials", "2")
    assert_one_line(done, "contrastive needs class labels", "continuous labels", "log-ratio")
    assert not list(tmp_path.rglob("optuna.db"))


def test_a_real_protocol_runs_its_papers_methods_without_method(tmp_path: Path) -> None:
    """`dmlbench run --protocol cub200` used to stop at 'lists no methods'; now it gets as far
    as the data (here a missing root, named in one line)."""
    done = run(tmp_path, "--protocol", "cub200", "--data-root", str(tmp_path / "nowhere"))
    assert "lists no methods" not in done.stderr
    assert "triplet-semihard, lifted, npairs" in done.stderr  # the banner
    assert_one_line(done, "nowhere")


def test_backbone_override_keeps_the_pretraining_unless_asked(tmp_path: Path) -> None:
    common = ["--protocol", "cub200", "--data-root", str(tmp_path / "nowhere"), "--no-search"]
    kept = run(tmp_path, *common, "--backbone-override", "resnet50")
    assert "protocol cub200@defaults@backbone=resnet50 v2" in kept.stderr
    assert "@pretrained" not in kept.stderr and "warning" not in kept.stderr
    random = run(tmp_path, *common, "--backbone-override", "resnet50", "--pretrained", "none")
    assert "cub200@defaults@backbone=resnet50@pretrained=none" in random.stderr
    small = run(tmp_path, *common, "--backbone-override", "small-cnn")
    warning = [line for line in small.stderr.splitlines() if line.startswith("warning:")]
    assert len(warning) == 1 and "no pretrained weights" in warning[0], small.stderr
    assert "@backbone=small-cnn@pretrained=none" in small.stderr


BIG_BATCH = """\
name: glyphs-big-batch
version: 1
data: {dataset: glyphs, params: {image_size: 128, num_classes: 64, instances_per_font: 1}}
model: {backbone: small-cnn, pretrained: null, embedding_size: 32}
batch: {size: 256, samples_per_class: 8}
optim: {lr: 1.0e-3, epochs: 1}
metrics: {recall_at: [1], nmi: false}
search: {trials: 3, validation: {folds: 1, fraction: 0.5}}
seeds: [0]
methods: [contrastive]
"""


def _limit_memory() -> None:  # runs in the child before exec: the interpreter plus 1.5 GB
    import resource

    limit = _virtual_after_import() + 1_500_000_000
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _virtual_after_import() -> int:
    """Virtual memory of an interpreter that imported torch and dmlbench (the libraries map
    several GB they never touch), measured once in a child."""
    code = "import torch, dmlbench.cli.main, dmlbench.run; print(open('/proc/self/status').read())"
    status = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout
    kb = next(line.split()[1] for line in status.splitlines() if line.startswith("VmPeak:"))
    return int(kb) * 1024


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc")
def test_a_batch_that_cannot_fit_in_memory_is_one_line_before_the_study(tmp_path: Path) -> None:
    """A real allocation failure (the child's address space is capped): the small CNN needs
    about 3.5 GB for 256 images of 128 px; the study is never created, so no trial is spent."""
    protocol = tmp_path / "big.yaml"
    protocol.write_text(BIG_BATCH)
    results = tmp_path / "results"
    cmd = [
        sys.executable, "-m", "dmlbench", "run", "--protocol", str(protocol), "--no-progress",
        "--results-dir", str(results), "--reports-dir", str(tmp_path / "reports"),
    ]  # fmt: skip
    done = subprocess.run(
        cmd, capture_output=True, text=True, timeout=300, preexec_fn=_limit_memory
    )
    assert_one_line(done, "batch of 256 images", "128 px", "batch.size", "glyphs-big-batch")
    assert not list(results.rglob("optuna.db")) and not list(results.rglob("*.json"))


def test_out_of_memory_is_recognised_on_cpu_and_cuda() -> None:
    from dmlbench.engine.preflight import is_out_of_memory

    assert is_out_of_memory(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2 GiB"))
    assert is_out_of_memory(RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried"))
    assert is_out_of_memory(MemoryError())
    assert is_out_of_memory(RuntimeError("could not create a primitive"))  # oneDNN's word
    assert not is_out_of_memory(RuntimeError("shape mismatch"))
