"""Where a record was made: the machine, the packages, the commit and the command.

Every record carries these (:func:`environment`, :func:`command_line`), and the leaderboard
tools read the same facts to say on which machine a board was made or checked
(:func:`cpu_name`) and how many jobs it may run (:func:`usable_cpus`).
"""

from __future__ import annotations

import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from dmlbench.simd import in_force as simd_in_force


def command_line() -> str:
    """The command that made a record, with the program by its name (``dmlbench run ...``),
    not by the path of the interpreter or virtual environment it ran from."""
    program = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python"
    if program == "__main__.py":
        program = "dmlbench"
    return shlex.join([program, *sys.argv[1:]])


def package_versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in (
        "dmlbench",
        "torch",
        "torchvision",
        "timm",
        "faiss-cpu",
        "optuna",
        "numpy",
        "pytorch-metric-learning",
        "scikit-learn",
        "pandas",
    ):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            continue
    return out


#: Output folders of a checkout (the committed leaderboard and its reports): a regeneration
#: writes them, and their changes say nothing about the code that made the numbers.
OUTPUT_FOLDERS = ("results", "reports")


def git_commit(folder: Path | None = None) -> str | None:
    """The commit of the dmlbench checkout, ``+dirty`` when its code has uncommitted changes.

    Changes under :data:`OUTPUT_FOLDERS` do not count: an update writes one board's records
    and reports before it runs the next board, which would otherwise be marked as made by
    uncommitted code. ``folder`` (default: this package's) is any folder of the checkout.
    """
    here = folder or Path(__file__).resolve().parent
    outputs = [f":(top,exclude){name}" for name in OUTPUT_FOLDERS]
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=here,
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", ":(top)", *outputs],
            cwd=here,
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return sha + ("+dirty" if dirty else "")


def cpu_name() -> str:
    """The CPU model (``/proc/cpuinfo`` on Linux, else what :mod:`platform` knows)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity on Linux, else all of them)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def environment(device: str, precision: str) -> dict[str, Any]:
    """The machine and settings a record was made with; ``precision`` is the run's training
    precision (``Accel.precision``: ``fp32``, ``bf16``, ``fp16``), the same for its untrained
    baseline so that both share a table."""
    import torch

    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "device": device,
        "precision": precision,
        "cuda": torch.cuda.get_device_name(0) if device.startswith("cuda") else None,
        "torch_threads": torch.get_num_threads(),
        "simd": simd_in_force(),
        "packages": package_versions(),
        "git_commit": git_commit(),
    }
