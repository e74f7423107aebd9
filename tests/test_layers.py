"""The architecture is enforced, not only drawn: every import points down the pipeline.

Layers, lowest first (docs/development.md, "Layout"): the foundations (errors, registry, atomic
writes, the SIMD pin, the run options, provenance), then protocols and records, then the components, each
its own layer in this order: data, models, metrics, methods; then the engine, the search, the
orchestration (run, report), the leaderboard, and on top the command line and the benchmark
scripts. A module may import its own layer and those below it. Imports under
``if TYPE_CHECKING:`` are annotations, not dependencies, and are not counted.

Why a hand-written test and not import-linter's layers contract: import-linter (grimp) builds
its graph from the package's folder, and ``dmlbench.methods`` and ``dmlbench.protocols`` live
in other folders (``methods/``, ``protocols/``, mapped in pyproject.toml), so it cannot see
them; this test reads every file of the three folders.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import dmlbench

ROOTS = {  # import prefix -> folder
    "dmlbench.methods": Path(dmlbench.__file__).parents[1] / "methods",
    "dmlbench.protocols": Path(dmlbench.__file__).parents[1] / "protocols",
    "dmlbench": Path(dmlbench.__file__).parent,
}
LAYERS = [
    {
        "dmlbench.errors",
        "dmlbench.atomic",
        "dmlbench.simd",
        "dmlbench.options",
        "dmlbench.provenance",
    },
    {"dmlbench.protocol", "dmlbench.protocols", "dmlbench.records"},
    # the components, each its own layer so that a circle among them fails
    {"dmlbench.data"},
    {"dmlbench.models"},
    {"dmlbench.metrics"},
    {"dmlbench.methods"},
    {"dmlbench.engine"},
    {"dmlbench.search"},
    {"dmlbench.run", "dmlbench.report"},
    {"dmlbench.leaderboard"},
    {"dmlbench.cli", "dmlbench.perf"},
]
# The package's public API and ``python -m dmlbench``: entry points above every layer.
TOP = {"dmlbench", "dmlbench.__main__"}


def layer(module: str) -> int:
    if module in TOP:
        return len(LAYERS)
    for rank, names in enumerate(LAYERS):
        if any(module == n or module.startswith(n + ".") for n in names):
            return rank
    raise AssertionError(f"{module} is in no layer: add it to LAYERS (tests/test_layers.py)")


def modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for prefix, root in ROOTS.items():
        for path in sorted(root.rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            name = ".".join([prefix, *parts]).removesuffix(".__init__")
            out.setdefault(name, path)
    return out


def imports(path: Path) -> set[str]:
    """Every ``dmlbench`` module ``path`` imports, at module level or inside functions, except
    under ``if TYPE_CHECKING:``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = {
        id(n)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for n in ast.walk(node)
    }
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {f"{node.module}.{a.name}" for a in node.names}
    return {m for m in found if m == "dmlbench" or m.startswith("dmlbench.")}


def known(name: str, all_modules: dict[str, Path]) -> str | None:
    """The module an imported name refers to (``dmlbench.x.y`` may be a function of ``x``)."""
    while name and name not in all_modules:
        name = name.rpartition(".")[0]
    return name or None


def upward_imports() -> list[str]:
    all_modules = modules()
    bad = []
    for name, path in all_modules.items():
        for imported in imports(path):
            if imported == "dmlbench.__version__":  # a constant: importing it loads nothing
                continue
            target = known(imported, all_modules)
            if target is None or target == name:
                continue
            if layer(target) > layer(name):
                bad.append(f"{name} imports {target}")
    return sorted(set(bad))


def test_every_import_points_down_the_pipeline() -> None:
    assert upward_imports() == []


def test_every_module_is_in_a_layer() -> None:
    for name in modules():
        layer(name)


def test_the_check_sees_an_upward_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A module of the engine that imports the CLI is reported (the test can fail)."""
    fake = tmp_path / "dmlbench"
    (fake / "engine").mkdir(parents=True)
    (fake / "cli").mkdir()
    (fake / "engine" / "bad.py").write_text("def f():\n    from dmlbench.cli.main import main\n")
    (fake / "cli" / "main.py").write_text("def main(): ...\n")
    monkeypatch.setattr("tests.test_layers.ROOTS", {"dmlbench": fake})
    assert upward_imports() == ["dmlbench.engine.bad imports dmlbench.cli.main"]


@pytest.mark.parametrize(
    ("lower", "upper"),
    [
        ("data/files.py", "dmlbench.metrics.retrieval"),  # data -> metrics
        ("data/base.py", "dmlbench.models.head"),  # data -> models
        ("models/head.py", "dmlbench.metrics.stats"),  # models -> metrics
        ("metrics/retrieval.py", "dmlbench.methods"),  # metrics -> methods
    ],
)
def test_an_upward_import_between_the_component_layers_fails(
    lower: str, upper: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A copy of the package with one import added from a lower component layer to a higher
    one: the test names exactly that import (the real tree has none)."""
    import shutil

    fake = tmp_path / "dmlbench"
    shutil.copytree(ROOTS["dmlbench"], fake, ignore=shutil.ignore_patterns("__pycache__"))
    with (fake / lower).open("a", encoding="utf-8") as fh:
        fh.write(f"\n\ndef _injected():\n    import {upper}\n")
    roots = {**ROOTS, "dmlbench": fake}
    monkeypatch.setattr("tests.test_layers.ROOTS", roots)
    name = "dmlbench." + lower.removesuffix(".py").replace("/", ".")
    target = known(upper, modules())
    assert upward_imports() == [f"{name} imports {target}"]


def test_no_import_circle_across_folders() -> None:
    """Files of different folders never import each other in a circle (within a folder a
    package may: its __init__ re-exports its modules)."""
    all_modules = modules()
    graph: dict[str, set[str]] = {}
    for name, path in all_modules.items():
        for imported in imports(path):
            target = known(imported, all_modules)
            if target is not None and target != name:
                graph.setdefault(name, set()).add(target)

    def folder(m: str) -> str:
        return (
            m.rpartition(".")[0] if m in all_modules and all_modules[m].name != "__init__.py" else m
        )

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            m = todo.pop()
            if m == goal:
                return True
            if m not in seen:
                seen.add(m)
                todo += graph.get(m, ())
        return False

    circles = sorted(
        f"{a} -> {b} -> ... -> {a}"
        for a, targets in graph.items()
        for b in targets
        if folder(a) != folder(b) and reaches(b, a)
    )
    assert circles == []
