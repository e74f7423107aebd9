"""The architecture is enforced, not only drawn: every import points down the pipeline.

Layers, lowest first (docs/development.md, "Layout"): the foundations (errors and registries,
atomic writes, the SIMD pin, the run options, provenance), then protocols and records, then the
components, each its own layer in this order: data, models, metrics, methods; then the engine,
the search, the orchestration (run, report), the leaderboard, and on top the command line and
the benchmark scripts. A module may import its own layer and those below it, and no files may
import each other in a circle, inside a folder or across folders (imports inside functions
count). Imports under ``if TYPE_CHECKING:`` are annotations, not dependencies, and are not
counted.

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
        # the metrics' description: the protocol reads it, so it sits below the protocol
        # although it lives in metrics/ (test_a_low_module_in_a_high_folder_loads_alone)
        "dmlbench.metrics.catalogue",
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


def test_a_low_module_in_a_high_folder_loads_alone() -> None:
    """Importing ``dmlbench.metrics.catalogue`` runs ``dmlbench/metrics/__init__.py`` first: a
    module placed in a lower layer than its folder is only below its importers if every
    package ``__init__`` on its path imports nothing of dmlbench."""
    all_modules = modules()
    for name in all_modules:
        package = name.rpartition(".")[0]
        while package.count(".") >= 1 and layer(name) < layer(package):
            assert not imports(all_modules[package]), (
                f"{package}/__init__.py imports dmlbench modules, so {name} (layer "
                f"{layer(name)}) would load the layer-{layer(package)} package under it"
            )
            package = package.rpartition(".")[0]


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


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules it imports (inside functions too, not under TYPE_CHECKING)."""
    all_modules = modules()
    graph: dict[str, set[str]] = {}
    for name, path in all_modules.items():
        for imported in imports(path):
            target = known(imported, all_modules)
            if target is not None and target != name:
                graph.setdefault(name, set()).add(target)
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every set of modules that import each other in a circle (the strongly connected
    components of more than one module, Tarjan's algorithm), each sorted, sorted.

    A circle inside one folder counts as much as one across folders: a function-level import
    that closes it still ties the two files together (neither can be read, tested or moved
    without the other), and it hides an import-order trap for the next module-level import.
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def test_no_import_circle_anywhere() -> None:
    """No files import each other in a circle, across folders or inside one (a package's
    ``__init__`` re-exporting its modules is no circle: they do not import it back)."""
    assert import_circles(import_graph()) == []


def test_the_check_sees_a_circle_inside_a_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two modules of one folder, one importing the other inside a function: the circle is
    reported (the test can fail), and the real tree's modules are not in it."""
    import shutil

    fake = tmp_path / "dmlbench"
    shutil.copytree(ROOTS["dmlbench"], fake, ignore=shutil.ignore_patterns("__pycache__"))
    (fake / "engine" / "injected_a.py").write_text("from dmlbench.engine.injected_b import g\n")
    (fake / "engine" / "injected_b.py").write_text(
        "def g():\n    from dmlbench.engine.injected_a import f\n"
    )
    monkeypatch.setattr("tests.test_layers.ROOTS", {**ROOTS, "dmlbench": fake})
    assert import_circles(import_graph()) == [
        ["dmlbench.engine.injected_a", "dmlbench.engine.injected_b"]
    ]


def test_the_circle_check_sees_a_longer_circle() -> None:
    """Three modules in a ring (the search's study -> processes -> worker -> study was one),
    beside a module outside it: the ring alone is reported."""
    graph = {"a.study": {"a.processes"}, "a.processes": {"a.worker"},
             "a.worker": {"a.study", "a.storage"}, "a.storage": set()}  # fmt: skip
    assert import_circles(graph) == [["a.processes", "a.study", "a.worker"]]


# Modules directly in the package folder (``__init__`` and ``__main__`` aside): the
# foundations, protocol, records and the orchestrator. Everything else belongs in a folder.
MAX_TOP_LEVEL = 8


def test_at_most_eight_top_level_modules() -> None:
    top = sorted(
        p.stem for p in ROOTS["dmlbench"].glob("*.py") if p.stem not in ("__init__", "__main__")
    )
    assert len(top) <= MAX_TOP_LEVEL, top
