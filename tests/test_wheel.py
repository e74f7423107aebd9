"""``python -m build`` makes a wheel and an sdist that hold every file dmlbench reads at run time,
and the wheel, installed with a plain ``pip install`` (not ``-e``) into a fresh virtual
environment, trains and reports from a folder outside the source tree.

The build runs on a copy of the packaged sources (no ``build/`` or ``*.egg-info`` left in the
checkout) without build isolation (setuptools from this environment: no download). The
install test (heavy: about a minute of training) gives the fresh environment this one's
dependencies by a ``.pth`` line and the wheel with ``--no-deps``, so nothing is downloaded and
no editable finder of this checkout can answer ``import dmlbench``: it checks where dmlbench
was imported from.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = (
    "pyproject.toml",
    "README.md",
    "LICENSE",
    "NOTICE.md",
    "benchmark",
    "methods",
    "protocols",
)


def runtime_files() -> dict[str, Path]:
    """Every file the installed package reads: its modules, the shipped protocols and their
    lock, the page assets (wheel path -> source path)."""
    out: dict[str, Path] = {}
    for prefix, folder in (("dmlbench", "benchmark"), ("dmlbench/methods", "methods")):
        for path in (ROOT / folder).rglob("*.py"):
            out[f"{prefix}/{path.relative_to(ROOT / folder).as_posix()}"] = path
    for path in (ROOT / "protocols").iterdir():
        if path.suffix in {".yaml", ".py"} or path.name == "protocols.lock":
            out[f"dmlbench/protocols/{path.name}"] = path
    for path in (ROOT / "benchmark" / "report" / "assets").iterdir():
        out[f"dmlbench/report/assets/{path.name}"] = path
    return out


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("build", reason="the test extra installs build")
    src = tmp_path_factory.mktemp("src")
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(ROOT / name, src / name)
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(src)],
        check=True,
        capture_output=True,
    )
    return out


def test_the_wheel_and_the_sdist_hold_every_file_read_at_run_time(dist: Path) -> None:
    [wheel] = dist.glob("dmlbench-*.whl")
    [sdist] = dist.glob("dmlbench-*.tar.gz")
    names = set(zipfile.ZipFile(wheel).namelist())
    wanted = runtime_files()
    assert len(wanted) > 150 and "dmlbench/protocols/glyphs-mini.yaml" in wanted
    assert sorted(set(wanted) - names) == []
    assert any(n.endswith("entry_points.txt") for n in names)  # the dmlbench command
    with tarfile.open(sdist) as tar:
        in_sdist = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    sources = {p.relative_to(ROOT).as_posix() for p in wanted.values()}
    assert sorted(sources - in_sdist) == []


@pytest.mark.heavy  # a minute of training in a fresh environment
def test_a_plain_install_of_the_wheel_runs_and_reports_outside_the_tree(
    dist: Path, tmp_path: Path
) -> None:
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    purelib = subprocess.run(
        [str(env_dir / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    deps = sysconfig.get_paths()["purelib"]  # this environment's torch, faiss, ...
    Path(purelib, "dmlbench_test_deps.pth").write_text(deps + "\n", encoding="utf-8")
    [wheel] = dist.glob("dmlbench-*.whl")
    pip = [str(env_dir / "bin" / "python"), "-m", "pip", "install", "--no-deps", "-q"]
    subprocess.run([*pip, str(wheel)], check=True)
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH"}}
    dml = str(env_dir / "bin" / "dmlbench")
    where = subprocess.run(
        [str(env_dir / "bin" / "python"), "-c", "import dmlbench; print(dmlbench.__file__)"],
        cwd=work, env=env, check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    assert where.startswith(purelib), where
    run = [dml, "run", "--no-search", "--max-steps", "20", "--method", "contrastive"]
    for cmd in ([*run, "--no-progress"], [dml, "report"]):
        done = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-2000:]
    assert list((work / "results").rglob("*.json"))
    assert list((work / "reports").glob("*.html")) and list((work / "reports").glob("*.md"))
