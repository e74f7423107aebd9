"""CI installs the versions the leaderboard was made with: constraints.txt names exactly the
packages (and versions) that tolerances.yaml records."""

from __future__ import annotations

from pathlib import Path

from dmlbench.leaderboard import tolerances

REPO = Path(__file__).resolve().parents[2]


def test_ci_constraints_are_the_leaderboards_package_versions() -> None:
    pins = {}
    for line in (REPO / "constraints.txt").read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = line.split("==")
            pins[name.strip()] = version.strip()
    tol = tolerances.load_tolerances(REPO / "results" / "leaderboard")
    assert tol is not None
    recorded = {k: str(v) for k, v in tol.machine["packages"].items() if k != "dmlbench"}
    assert pins == recorded


def test_ci_and_the_readme_install_with_the_constraints() -> None:
    command = 'pip install -e ".[test]" -c constraints.txt'
    assert command in (REPO / "README.md").read_text(encoding="utf-8")
    assert command in (REPO / ".ci" / "run").read_text(encoding="utf-8")
