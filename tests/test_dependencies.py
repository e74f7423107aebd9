"""The torch requirement never makes pip replace a researcher's newer torch.

A CUDA environment usually has its own, newer torch; an upper bound in ``pyproject.toml``
would make ``pip install -e .`` downgrade it (and download gigabytes). The requirement has a
lower bound only. Shown twice: by the specifier, and by pip's own resolver, offline, in a
throw-away environment whose "installed" torch 2.99.0 is a stub ``.dist-info`` folder: pip
asked for a package that depends on the project's torch requirement installs that package
and nothing else.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pip
import pytest
from packaging.requirements import Requirement

tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from 3.11")

PYPROJECT = Path(__file__).parents[1] / "pyproject.toml"
NEWER = {"torch": "2.99.0", "torchvision": "0.99.0"}  # releases newer than any tested one


def requirements() -> dict[str, str]:
    """The project's requirements of torch and torchvision, as written in pyproject.toml."""
    project = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
    found = {Requirement(r).name: r for r in project["dependencies"]}
    return {name: found[name] for name in NEWER}


def test_requirement_accepts_newer_releases_and_has_a_lower_bound() -> None:
    for name, requirement in requirements().items():
        specifier = Requirement(requirement).specifier
        assert specifier.contains(NEWER[name]), requirement
        assert not specifier.contains("0.1.0"), requirement  # a lower bound is kept


def stub_environment(root: Path) -> Path:
    """A virtual environment with torch 2.99.0 and torchvision 0.99.0 "installed" (metadata
    only) and this interpreter's pip importable; its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    python = root / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    for name, version in NEWER.items():
        info = Path(site) / f"{name}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    only_pip = root / "only-pip"  # pip alone, not the site-packages (and torch) beside it
    only_pip.mkdir()
    (only_pip / "pip").symlink_to(Path(pip.__file__).parent)
    (Path(site) / "only_pip.pth").write_text(f"{only_pip}\n")
    return python


def wheel_requiring(folder: Path, requires: list[str]) -> None:
    """A minimal wheel, ``needs-torch 0``, whose only content is its dependencies."""
    folder.mkdir()
    lines = "".join(f"Requires-Dist: {r}\n" for r in requires)
    with zipfile.ZipFile(folder / "needs_torch-0-py3-none-any.whl", "w") as whl:
        info = "needs_torch-0.dist-info"
        whl.writestr(
            f"{info}/METADATA", f"Metadata-Version: 2.1\nName: needs-torch\nVersion: 0\n{lines}"
        )
        whl.writestr(
            f"{info}/WHEEL",
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        whl.writestr(f"{info}/RECORD", "")


def pip_would_install(python: Path, wheels: Path, report: Path) -> list[str] | None:
    """What ``pip install --dry-run needs-torch`` would install, offline and without the
    machine's pip configuration; ``None`` when pip finds no solution."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHON"))}
    env["PIP_CONFIG_FILE"] = os.devnull
    proc = subprocess.run(
        [python, "-m", "pip", "install", "--dry-run", "--no-index", "--find-links", wheels,
         "--report", report, "--disable-pip-version-check", "--quiet", "needs-torch"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    if proc.returncode != 0:
        assert "ResolutionImpossible" in proc.stderr or "No matching" in proc.stderr, proc.stderr
        return None
    return [item["metadata"]["name"] for item in json.loads(report.read_text())["install"]]


def test_pip_keeps_a_newer_installed_torch(tmp_path: Path) -> None:
    python = stub_environment(tmp_path / "env")
    wheel_requiring(tmp_path / "ours", list(requirements().values()))
    assert pip_would_install(python, tmp_path / "ours", tmp_path / "ours.json") == ["needs-torch"]
    # The control: the former cap makes pip want another torch (none is offered here).
    wheel_requiring(tmp_path / "capped", ["torch>=2.1,<=2.14.1"])
    assert pip_would_install(python, tmp_path / "capped", tmp_path / "capped.json") is None
