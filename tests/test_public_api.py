"""The public API: what ``import dmlbench`` offers, and what it does not load."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

import dmlbench


def test_the_public_functions_are_importable_from_the_package() -> None:
    from dmlbench.options import RunOptions
    from dmlbench.protocol import load_protocol
    from dmlbench.run import run_protocol

    assert dmlbench.load_protocol is load_protocol
    assert dmlbench.run_protocol is run_protocol and dmlbench.RunOptions is RunOptions
    from dmlbench.engine.inference import load_model
    from dmlbench.report.results import load_results

    assert dmlbench.load_model is load_model and dmlbench.load_results is load_results
    from dmlbench.engine.external import evaluate_external

    assert dmlbench.evaluate_external is evaluate_external
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        dmlbench.nope  # noqa: B018


def test_importing_the_package_loads_neither_torch_nor_the_pipeline() -> None:
    code = "import sys, dmlbench; print('torch' in sys.modules, 'dmlbench.run' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ("benchmark", "methods")  # dmlbench and dmlbench.methods
DOCS = ROOT / "docs" / "development.md"
SECTION = "### Public functions no module of the package calls"


def names_used(tree: ast.AST, skip_reexports: bool) -> set[str]:
    """Every name a module uses: names, attributes, imported names (not a package's
    ``__init__`` re-exporting one, which calls nothing) and lazy ``"module:object"`` strings."""
    used: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            used.add(node.id)
        elif isinstance(node, ast.Attribute):
            used.add(node.attr)
        elif isinstance(node, ast.ImportFrom) and not skip_reexports:
            used.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and ":" in node.value:
            used.add(node.value.rpartition(":")[2])
    return used


def names_only_tests_use(root: Path) -> tuple[set[str], set[str]]:
    """Public top-level functions and classes of the package that no module of it names, but a
    test does (the count issue 46 asks for, drawn from the files), and every public top-level
    name the package defines."""
    package = [p for d in PACKAGE for p in sorted((root / d).rglob("*.py"))]
    defined = {
        node.name
        for path in package
        for node in ast.parse(path.read_text(encoding="utf-8")).body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        and not node.name.startswith("_")
    }
    in_package: set[str] = set()
    for path in package:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        in_package |= names_used(tree, skip_reexports=path.name == "__init__.py")
    in_tests: set[str] = set()
    for path in sorted((root / "tests").rglob("*.py")):
        in_tests |= names_used(ast.parse(path.read_text(encoding="utf-8")), skip_reexports=False)
    return (defined & in_tests) - in_package, defined


def documented_names() -> set[str]:
    """The names docs/development.md's section lists (its table, the components' line and the
    helpers moved to tests)."""
    text = DOCS.read_text(encoding="utf-8")
    section = text[text.index(SECTION) : text.index("\n### ", text.index(SECTION) + 1)]
    return {ref.rpartition(".")[2] for ref in re.findall(r"`([A-Za-z_][\w.]*)`", section)}


def test_every_function_only_tests_call_is_documented_as_api() -> None:
    """A public function the package never calls is either API (``dmlbench.__all__``, or
    listed in docs/development.md with why a user calls it, or a registered component found by
    name) or a test helper (it lives in tests/); and the list names nothing the package calls."""
    only, defined = names_only_tests_use(ROOT)
    assert only, "the scan finds nothing: it is broken"
    documented = documented_names()
    undocumented = only - documented - set(dmlbench.__all__)
    assert not undocumented, f"used only by tests, not documented as API: {sorted(undocumented)}"
    stale = (documented & defined) - only
    assert not stale, f"docs/development.md lists as uncalled what the package calls: {stale}"


def test_the_scan_finds_a_function_only_a_test_calls(tmp_path: Path) -> None:
    for folder, text in {
        "benchmark": "def used():\n    pass\n\n\ndef helper():\n    used()\n\n\ndef lonely():\n    pass\n",
        "methods": "",
        "tests": "from dmlbench.mod import helper, lonely\n\nhelper()\nlonely()\n",
    }.items():
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "mod.py").write_text(text)
    assert names_only_tests_use(tmp_path)[0] == {"helper", "lonely"}  # the package calls `used`
    (tmp_path / "benchmark" / "caller.py").write_text("from dmlbench.mod import lonely\n")
    assert names_only_tests_use(tmp_path)[0] == {"helper"}


def test_the_documented_api_is_importable() -> None:
    import importlib

    text = DOCS.read_text(encoding="utf-8")
    section = text[text.index(SECTION) : text.index("\n### ", text.index(SECTION) + 1)]
    table = [line for line in section.splitlines() if line.startswith("| `")]
    refs = [r for line in table for r in re.findall(r"`([a-z_]+\.[\w.]+)`", line.split("|")[1])]
    assert len(refs) >= 4, refs  # the scan of the table works: it finds the rows
    for ref in refs:
        module, _, name = ref.rpartition(".")
        assert callable(getattr(importlib.import_module(f"dmlbench.{module}"), name)), ref
