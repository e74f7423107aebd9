"""The SIMD cap: set before torch and faiss load, only where the CPU has AVX2, user values win."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from dmlbench import simd

AVX2_CPU = "processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma\n"
OLD_CPU = "processor\t: 0\nflags\t\t: fpu sse2 avx\n"


@pytest.fixture
def x86_linux(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(platform, "system", lambda: "Linux")
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    for name in [*simd.PORTABLE_LEVEL, simd.OPT_OUT]:
        monkeypatch.delenv(name, raising=False)


def cpuinfo(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cpuinfo"
    path.write_text(text)
    return path


@pytest.mark.usefixtures("x86_linux")
def test_pin_sets_every_unset_variable_and_keeps_the_users(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE")
    set_now = simd.pin(cpuinfo(tmp_path, AVX2_CPU))
    assert set_now == {
        "ATEN_CPU_CAPABILITY": "avx2",
        "FAISS_SIMD_LEVEL": "AVX2",
        "MKL_CBWR": "COMPATIBLE,STRICT",
        "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR",
    }
    assert os.environ["ONEDNN_MAX_CPU_ISA"] == "AVX512_CORE"
    assert os.environ["FAISS_SIMD_LEVEL"] == "AVX2"


@pytest.mark.usefixtures("x86_linux")
@pytest.mark.parametrize("case", ["no avx2", "opt-out", "arm", "no cpuinfo"])
def test_pin_leaves_the_environment_alone(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    info = cpuinfo(tmp_path, OLD_CPU if case == "no avx2" else AVX2_CPU)
    if case == "opt-out":
        monkeypatch.setenv(simd.OPT_OUT, "1")
    if case == "arm":
        monkeypatch.setattr(platform, "machine", lambda: "aarch64")
    if case == "no cpuinfo":
        info = tmp_path / "missing"
    assert simd.pin(info) == {}
    assert not set(simd.PORTABLE_LEVEL) & set(os.environ)


def test_the_cap_is_in_force_in_a_fresh_process() -> None:
    """What a user's `dmlbench` gets: the level reported by torch, faiss and numpy themselves,
    which fails if `import dmlbench` came too late for any of them to see the variables."""
    env = {k: v for k, v in os.environ.items() if k not in simd.PORTABLE_LEVEL}
    env.pop(simd.OPT_OUT, None)
    code = (
        "import dmlbench, json; from dmlbench.simd import in_force; print(json.dumps(in_force()))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout
    if not simd.applies():
        pytest.skip("no AVX2 on x86-64 Linux here: the cap does not apply")
    assert '"torch": "AVX2"' in out and '"faiss": "AVX2"' in out, out
    assert '"onednn_max_isa": "AVX2"' in out, out
    assert '"mkl": "COMPATIBLE,STRICT"' in out, out  # as MKL itself reports it
    assert '"numpy": "X86_V3"' in out, out  # every AVX2 CPU with FMA has numpy's X86_V3


def test_mkl_reports_the_branch_it_took_not_the_one_asked_for() -> None:
    """MKL's own answer is recorded: an unset variable reads "off" (no reproducibility mode),
    and the portable setting reads back as set."""
    code = "import dmlbench; from dmlbench.simd import mkl_branch; print(mkl_branch())"
    env = {k: v for k, v in os.environ.items() if k not in simd.PORTABLE_LEVEL}
    answers = {}
    for value in ("", "COMPATIBLE,STRICT"):
        run_env = {**env, simd.OPT_OUT: "1"} if not value else {**env, "MKL_CBWR": value}
        answers[value] = subprocess.run(
            [sys.executable, "-c", code], env=run_env, capture_output=True, text=True, check=True
        ).stdout.strip()
    if answers[""] == "None":
        pytest.skip("this torch has no MKL")
    assert answers == {"": "off", "COMPATIBLE,STRICT": "COMPATIBLE,STRICT"}


def test_records_carry_the_level_in_force() -> None:
    from dmlbench.provenance import environment

    env = environment("cpu", "fp32")
    assert set(env["simd"]) == {"torch", "onednn_max_isa", "mkl", "faiss", "numpy"}
    assert env["simd"]["torch"]


def test_numpy_float64_math_follows_the_cap() -> None:
    """numpy's float64 exp and log on an AVX-512 machine (SVML) differ from the capped path
    in the last bit for some inputs; under the cap a fresh process computes what a CPU
    without AVX-512 does. Where numpy has no target above X86_V3 the two must agree."""
    code = (
        "import dmlbench, hashlib, numpy as np; from dmlbench.simd import numpy_level; "
        "x = np.random.default_rng(0).uniform(0.5, 2.0, 100_000); "
        "print(numpy_level(), hashlib.sha256(np.exp(x).tobytes() + np.log(x).tobytes())"
        ".hexdigest())"
    )
    env = {k: v for k, v in os.environ.items() if k not in simd.PORTABLE_LEVEL}
    capped, native = (
        subprocess.run(
            [sys.executable, "-c", code],
            env={**env, simd.OPT_OUT: opt_out} if opt_out else env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        for opt_out in ("", "1")
    )
    if not simd.applies():
        pytest.skip("no AVX2 on x86-64 Linux here: the cap does not apply")
    assert capped[0] == "X86_V3"
    if native[0] == "X86_V3":  # no AVX-512 here: the cap changes nothing
        assert capped[1] == native[1]
