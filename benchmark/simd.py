"""One numeric code path for every x86-64 machine of a CPU vendor, so that records replay.

The setting below makes every AMD EPYC take one path and every Intel Xeon another; the two
vendors still round apart, which :mod:`dmlbench.leaderboard.fingerprint` handles with one set
of replay values per path.

Why this exists: oneDNN (PyTorch's CPU convolutions), ATen's vectorised kernels, faiss and MKL
(torch's CPU BLAS: linear layers and every loss's matrix products) each pick their kernels from
the CPU they run on, and kernels of another instruction set or vendor accumulate in another
order. The same seed then rounds differently from the first step on, and a few hundred steps
later it is a different network: a replay moves a method's Recall@1 by up to 2 points.

What :func:`pin` sets, and what each one fixed (measured by replaying one board entry):

- ``ONEDNN_MAX_CPU_ISA=AVX2``, ``ATEN_CPU_CAPABILITY=avx2``, ``FAISS_SIMD_LEVEL=AVX2``: an
  AVX-512 machine's uncapped replay of a board made on AVX2 machines moved contrastive's
  Recall@1 by 1.7 points; capped, it was bit-identical. Every x86-64 CPU of the last decade has
  AVX2, so the cap is the level all of them share.
- ``MKL_CBWR=COMPATIBLE,STRICT``: MKL dispatches by vendor as well as by instruction set, and
  the cap above does not reach it. On an AMD EPYC, MKL ignores a request for its AVX2 branch
  (``mkl_cbwr_get`` reports AUTO, the vendor's own path), so the only Conditional Numerical
  Reproducibility branch both vendors take is COMPATIBLE; STRICT makes it independent of
  memory alignment too. Without it, boards made on an Intel Xeon replayed on an AMD EPYC 27 of
  529 metrics apart (up to 1.8 points), with the other three variables in force.
  Cost on an AMD EPYC (2 cores, one thread, glyphs-mini): ``reports/perf/simd.md``.
- ``NPY_DISABLE_CPU_FEATURES=X86_V4 AVX512_ICL AVX512_SPR``: on an AVX-512 Linux machine numpy
  sends float64 ``exp``, ``log``, ``sin`` and the like to Intel's SVML, whose results differ
  from the C library's in the last bit; Optuna's TPE sampler computes its proposals with them.
  A from-empty regeneration of glyphs-mini on an AMD EPYC offering AVX-512 reproduced every
  metric of a board made on one without it, but 66 of its 522 records held hyper-parameters
  a last bit apart (0.11577455052066454 instead of ...449): 18 search trials, and the final
  runs of the 4 methods that selected one of them. Evaluation uses them too: poses-mini's
  boards, made uncapped and again capped on that machine, had 7 of 500 nDCG values one ulp
  apart. Capped at numpy's ``X86_V3`` target (AVX2, the path a CPU without AVX-512 takes), the
  proposals are the same on both. A machine that lacks a disabled target is unaffected (numpy
  ignores it there).

Numbers do not depend on numpy's or faiss's OpenBLAS kernel choice (``OPENBLAS_CORETYPE``):
evaluation re-ranks every near-tie in float64 (:func:`dmlbench.metrics.retrieval.knn`), and a
replay under the Haswell, SandyBridge and Prescott kernels gave identical metrics.

:func:`pin` runs when the package is imported, before torch, faiss or numpy is, and only on x86-64
Linux machines with AVX2 (elsewhere the variables would name a level the CPU lacks: there
``dmlbench check`` tolerates seed noise instead: :func:`dmlbench.leaderboard.check.off_path`).
It sets each variable only when it is unset, so a user's own value wins, and
``DMLBENCH_NATIVE_SIMD=1`` leaves all of them alone. Records carry the levels in force
(``env.simd``).
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

#: variable -> value: oneDNN's ISA cap, ATen's dispatch level, faiss's dynamic dispatch, MKL's
#: reproducibility branch, and numpy's dispatch targets above AVX2 (numpy >= 2.4's names).
PORTABLE_LEVEL = {
    "ONEDNN_MAX_CPU_ISA": "AVX2",
    "ATEN_CPU_CAPABILITY": "avx2",
    "FAISS_SIMD_LEVEL": "AVX2",
    "MKL_CBWR": "COMPATIBLE,STRICT",
    "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR",
}
#: MKL's ``mkl_cbwr_get`` branch codes (mkl_cbwr.h) and its STRICT bit.
_MKL_BRANCHES = {
    1: "off",
    2: "AUTO",
    3: "COMPATIBLE",
    4: "SSE2",
    6: "SSSE3",
    7: "SSE4_1",
    8: "SSE4_2",
    9: "AVX",
    10: "AVX2",
    11: "AVX512_MIC",
    12: "AVX512",
    13: "AVX512_MIC_E1",
    14: "AVX512_E1",
}
_MKL_STRICT = 0x10000
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


def mkl_branch() -> str | None:
    """MKL's reproducibility branch in force, as MKL itself reports it (None without MKL).

    torch links MKL statically and exports its service functions; asking MKL rather than
    reading ``MKL_CBWR`` shows a request MKL did not honour (AVX2 on an AMD CPU reads AUTO).
    """
    import ctypes

    import torch

    if not torch.backends.mkl.is_available():
        return None
    try:
        lib = ctypes.CDLL(str(Path(torch.__file__).parent / "lib" / "libtorch_cpu.so"))
        code = int(lib.mkl_serv_cbwr_get(-1))  # MKL_CBWR_ALL: the branch and the STRICT bit
    except (OSError, AttributeError):  # another platform's library name, or no such symbol
        return None
    name = _MKL_BRANCHES.get(code & ~_MKL_STRICT, str(code & ~_MKL_STRICT))
    return f"{name},STRICT" if code & _MKL_STRICT else name


def numpy_level() -> str | None:
    """numpy's highest dispatch target in force (``X86_V3`` under the cap, on x86-64), as
    numpy reports it: the variable only counts if it was set before numpy was imported."""
    try:
        from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__
    except ImportError:  # another numpy layout
        return None
    enabled = [target for target in __cpu_dispatch__ if __cpu_features__.get(target)]
    return enabled[-1] if enabled else "baseline"


def in_force() -> dict[str, str | None]:
    """The level each library uses in this process, for the record (``env.simd``)."""
    import torch

    levels: dict[str, str | None] = {
        "torch": torch.backends.cpu.get_cpu_capability(),
        "onednn_max_isa": os.environ.get("ONEDNN_MAX_CPU_ISA"),
        "mkl": mkl_branch(),
        "numpy": numpy_level(),
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
        f"{levels['onednn_max_isa'] or 'nothing'}, MKL branch {levels['mkl']}, numpy at "
        f"{levels['numpy']}; the CPU offers {offers}"
    )
