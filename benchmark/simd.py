"""One SIMD level for the numeric kernels, so that records replay across more x86-64 machines.

Why this exists: oneDNN (PyTorch's CPU convolutions), ATen's vectorised kernels and faiss each
pick their kernels from the CPU they run on, and AVX-512 kernels accumulate in a different
order from AVX2 ones. The same seed then rounds differently from the first convolution on, and
a few hundred steps later it is a different network: a seed-0 replay of the committed
glyphs-mini board, made on AVX2 machines, moved contrastive's Recall@1 by 1.7 points on an
AVX-512 machine (beyond ``dmlbench check``'s 1.5-point tolerance) and the untrained row's NMI
by 0.1 (faiss's k-means). Capping oneDNN at AVX2 made the training on that machine
bit-identical, and capping faiss made the NMI so. Every x86-64 CPU of the last decade has
AVX2, so the cap is the level all of them share; the cost is the speed AVX-512 would have added.

The cap is not enough on every CPU model: on an Intel Xeon (AVX-512, capped) a replay of the
board made on an AMD EPYC still differs (the tuned contrastive entry by 1.8 Recall@1 points,
the defaults entries by under 0.1); the cause was not isolated. ``dmlbench check`` therefore
compares the CPU model with the leaderboard's (:func:`dmlbench.leaderboard.check.other_cpu`).

:func:`pin` runs when the package is imported, before torch or faiss is, and only on x86-64
Linux machines with AVX2 (elsewhere the variables would name a level the CPU lacks). It sets
each variable only when it is unset, so a user's own value wins, and ``DMLBENCH_NATIVE_SIMD=1``
leaves all of them alone. Records carry the level that was in force (``env.simd``).
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

#: variable -> AVX2 value: oneDNN's ISA cap, ATen's dispatch level, faiss's dynamic dispatch.
PORTABLE_LEVEL = {
    "ONEDNN_MAX_CPU_ISA": "AVX2",
    "ATEN_CPU_CAPABILITY": "avx2",
    "FAISS_SIMD_LEVEL": "AVX2",
}
OPT_OUT = "DMLBENCH_NATIVE_SIMD"


def _has_flag(flag: str, cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    try:
        text = cpuinfo.read_text()
    except OSError:
        return False
    return any(
        line.startswith("flags") and flag in line.split(":", 1)[-1].split()
        for line in text.splitlines()
    )


def applies(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """Whether the cap is set here: x86-64 Linux with AVX2, and no opt-out."""
    if os.environ.get(OPT_OUT, "") not in ("", "0"):
        return False
    return (
        platform.system() == "Linux"
        and platform.machine() in ("x86_64", "AMD64")
        and (_has_flag("avx2", cpuinfo))
    )


def pin(cpuinfo: Path = Path("/proc/cpuinfo")) -> dict[str, str]:
    """Set each :data:`PORTABLE_LEVEL` variable that is unset; returns the ones set now."""
    if not applies(cpuinfo):
        return {}
    set_now = {k: v for k, v in PORTABLE_LEVEL.items() if k not in os.environ}
    os.environ.update(set_now)
    return set_now


def in_force() -> dict[str, str | None]:
    """The level each library uses in this process, for the record (``env.simd``)."""
    import torch

    levels: dict[str, str | None] = {
        "torch": torch.backends.cpu.get_cpu_capability(),
        "onednn_max_isa": os.environ.get("ONEDNN_MAX_CPU_ISA"),
    }
    try:
        import faiss

        levels["faiss"] = str(faiss.SIMDConfig.get_level_name())
    except (ImportError, AttributeError):  # faiss builds without dynamic dispatch
        levels["faiss"] = None
    return levels


def describe() -> str:
    """One line for a benchmark report: the levels in force and the best the CPU offers."""
    levels = in_force()
    offers = "AVX-512" if _has_flag("avx512f") else "AVX2" if _has_flag("avx2") else "no AVX2"
    return (
        f"kernels at {levels['torch']} (torch), {levels['faiss']} (faiss), oneDNN capped at "
        f"{levels['onednn_max_isa'] or 'nothing'}; the CPU offers {offers}"
    )
