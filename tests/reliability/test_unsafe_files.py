"""Unsafe files (issue #9, point 6): nothing dmlbench reads can run code.

Each payload below is a real one: a control step shows that the ordinary, unsafe loader
(``torch.load(weights_only=False)``, ``pickle.load``, ``yaml.unsafe_load``,
``np.load(allow_pickle=True)``) does execute it (it writes a marker file), then the test shows
that dmlbench's loader refuses it and the marker never appears.

- a checkpoint holding a pickled object whose ``__reduce__`` calls a function;
- a protocol YAML with ``!!python/…`` tags (directly and through ``include:``);
- a neighbour-list pickle (MPII) and an image-cache index holding such objects;
- a download whose SHA-256 differs from the expected one (the archive helper of
  ``tests/data/test_prepare.py`` is reused);
- a static check over the package sources (``benchmark/``, ``methods/``, ``protocols/``): no
  ``eval``/``exec``, no pickle loading except through a restricted unpickler, ``yaml.load``
  only with the safe loader, ``torch.load`` only with ``weights_only=True`` (one reviewed
  exception, guarded by a pinned full SHA-256), ``np.load`` never with ``allow_pickle=True``.
"""

from __future__ import annotations

import ast
import pickle
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import yaml

from dmlbench.cli.main import main
from dmlbench.data import prepare
from dmlbench.data.cache import open_or_build
from dmlbench.data.mpii import load_pickle
from dmlbench.engine.checkpoint import load_checkpoint
from dmlbench.errors import DataError, DmlbenchError
from tests.data.fixtures import write_jpeg
from tests.data.test_prepare import cub_archive
from tests.reliability.test_bad_input import BANNER, Setup

REPO = Path(__file__).resolve().parents[2]
PACKAGE_DIRS = ("benchmark", "methods", "protocols")


def leave_mark(path: str) -> None:
    """What a payload does when it is unpickled: write a marker file."""
    Path(path).write_text("this ran")


class Payload:
    """Unpickling this calls :func:`leave_mark` (an arbitrary call, as in an attack)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return leave_mark, (str(self.marker),)


def checkpoint_with_payload(path: Path, marker: Path) -> Path:
    """A file shaped like a dmlbench checkpoint whose model entry is a :class:`Payload`."""
    state = {
        "progress": {"epoch": 0},
        "model": Payload(marker),
        "loss": {},
        "optimizer": {},
        "scheduler": None,
        "torch_rng": torch.get_rng_state(),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(state, path)
    return path


# --------------------------------------------------------------------------- checkpoints


def test_a_checkpoint_with_a_pickled_callable_is_refused(tmp_path: Path) -> None:
    control = tmp_path / "control"
    torch.load(checkpoint_with_payload(tmp_path / "c.pt", control), weights_only=False)
    assert control.exists()  # the payload is live
    marker = tmp_path / "marker"
    path = checkpoint_with_payload(tmp_path / "evil.pt", marker)
    model = torch.nn.Linear(2, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(DmlbenchError, match=re.escape(f"{path}: refused: the checkpoint")):
        load_checkpoint(path, model, torch.nn.Module(), opt, None)
    assert not marker.exists()


def torn(path: Path, marker: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"PK\x03\x04 half a zip")


def foreign(path: Path, marker: Path) -> None:
    checkpoint_with_payload(path, marker)


@pytest.mark.parametrize(
    "plant",
    [
        pytest.param(torn, id="torn"),
        pytest.param(foreign, id="pickled-callable"),
    ],
)
def test_a_bad_checkpoint_of_a_run_is_one_error_line(
    plant: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The checkpoint a run would resume from is damaged or foreign: exit 2, one line naming it,
    nothing executed."""
    setup = Setup(tmp_path)
    assert main(setup.argv()) == 0  # a finished run: find where its checkpoint lives
    (record,) = setup.results.rglob("contrastive-seed0-final*.json")
    record.unlink()
    checkpoint = record.parent / "checkpoints" / record.with_suffix(".pt").name
    marker = tmp_path / "marker"
    plant(checkpoint, marker)
    capsys.readouterr()
    assert main(setup.argv()) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip() and not BANNER.match(line)]
    assert not marker.exists()
    assert len(lines) == 1 and lines[0].startswith(f"error: {checkpoint}: "), err
    assert "delete it" in lines[0]


# --------------------------------------------------------------------------- YAML


@pytest.mark.parametrize(
    "tag", ["!!python/object/apply:os.mkdir", "!!python/object/new:os.mkdir"], ids=["apply", "new"]
)
@pytest.mark.parametrize("via_include", [False, True], ids=["direct", "include"])
def test_a_protocol_with_python_tags_executes_nothing(
    tag: str, via_include: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "marker"
    evil = tmp_path / "evil.yaml"
    evil.write_text(f'name: evil\nversion: {tag} ["{marker}"]\n')
    yaml.unsafe_load(evil.read_text())
    assert marker.is_dir()  # the payload is live
    marker.rmdir()
    target = evil
    if via_include:
        target = tmp_path / "variant.yaml"
        target.write_text("include: evil.yaml\nname: variant\n")
    assert main(["validate", str(target)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {evil}: line 2: ")
    assert "python/object" in err and not marker.exists()


# --------------------------------------------------------------------------- pickles, caches


def test_a_neighbour_pickle_with_a_callable_is_refused(tmp_path: Path) -> None:
    control = tmp_path / "control"
    path = tmp_path / "bundle.pkl"
    path.write_bytes(pickle.dumps({"trn": np.zeros(2), "val": Payload(control)}))
    pickle.loads(path.read_bytes())
    assert control.exists()  # the payload is live
    marker = tmp_path / "marker"
    path.write_bytes(pickle.dumps({"trn": np.zeros(2), "val": Payload(marker)}))
    with pytest.raises(DataError, match=re.escape(str(path)) + ".*refusing to load"):
        load_pickle(path)
    assert not marker.exists()


def test_an_image_cache_index_with_a_callable_is_rebuilt_not_run(tmp_path: Path) -> None:
    files = [tmp_path / f"{k}.jpg" for k in range(3)]
    for k, f in enumerate(files):
        write_jpeg(f, label=k, k=k)
    cache = open_or_build(tmp_path / "cache", "f" * 64, files, resize=None, workers=1)
    good = cache.index.copy()
    index = cache.path / "index.npy"
    control = tmp_path / "control"
    np.save(index, np.array([Payload(control)], dtype=object), allow_pickle=True)
    np.load(index, allow_pickle=True)
    assert control.exists()  # the payload is live
    marker = tmp_path / "marker"
    np.save(index, np.array([Payload(marker)], dtype=object), allow_pickle=True)
    rebuilt = open_or_build(tmp_path / "cache", "f" * 64, files, resize=None, workers=1)
    assert not marker.exists()
    assert np.array_equal(rebuilt.index, good) and rebuilt.index.dtype == np.int64


# --------------------------------------------------------------------------- downloads


def test_a_download_whose_sha256_differs_is_refused_and_nothing_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A mirror given with the digest of the genuine archive serves a tampered copy."""
    archive, genuine = cub_archive(tmp_path)
    archive.write_bytes(archive.read_bytes() + b"\0appended")
    root = tmp_path / "CUB"
    argv = ["data", "prepare", "cub200", "--root", str(root), "--url", archive.as_uri()]
    assert main([*argv, "--sha256", genuine]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {archive.as_uri()}: SHA-256 ")
    assert f"differs from the expected {genuine}" in err
    assert list(root.iterdir()) == []  # no archive, no .part, nothing extracted


def test_a_stale_download_with_another_sha256_is_not_used(tmp_path: Path) -> None:
    archive, digest = cub_archive(tmp_path)
    dest = tmp_path / "out" / "CUB_200_2011.tgz"
    dest.parent.mkdir()
    dest.write_bytes(b"an earlier, different file of the same name")
    assert prepare.download(archive.as_uri(), dest, digest) == dest
    assert prepare.sha256_of(dest) == digest  # fetched again and verified, not reused
    assert sorted(p.name for p in dest.parent.iterdir()) == [dest.name]


# --------------------------------------------------------------------------- static check


# UniqueKeyLoader: the protocol loader, a SafeLoader subclass that refuses duplicate keys
# (checked to stay one in test_the_protocol_loader_is_a_safe_loader).
SAFE_YAML_LOADERS = {"SafeLoader", "CSafeLoader", "UniqueKeyLoader"}
NEVER_CALL = {
    "eval", "exec", "pickle.load", "pickle.loads", "pickle.Unpickler",
    "yaml.unsafe_load", "yaml.full_load", "yaml.unsafe_load_all", "yaml.full_load_all",
}  # fmt: skip
UNSAFE_MODULES = {"marshal", "shelve", "dill", "cloudpickle", "joblib"}
# Reviewed exceptions: (file, function) -> why it is safe. Each must still exist (no stale entry).
ALLOWED_TORCH_LOAD = {
    ("benchmark/models/bn_inception.py", "fetch_state_dict"): (
        "an old (Python 2) pickle of the published BN-Inception weights is read with the full "
        "unpickler only right after check_digest() matched the pinned full SHA-256"
    ),
}


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _is_true(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return "?"


class UnsafeCalls(ast.NodeVisitor):
    """Collects ``(line, function, problem)`` for every unsafe way of reading data."""

    def __init__(self) -> None:
        self.found: list[tuple[int, str, str]] = []
        self.function = "<module>"
        self.previous: ast.stmt | None = None

    def add(self, node: ast.AST, problem: str) -> None:
        self.found.append((getattr(node, "lineno", 0), self.function, problem))

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        outer, self.function = self.function, node.name
        self.generic_visit(node)
        self.function = outer

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name.split(".")[0] in UNSAFE_MODULES:
                self.add(node, f"imports {alias.name}")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        names = {a.name for a in node.names}
        if module.split(".")[0] in UNSAFE_MODULES:
            self.add(node, f"imports from {module}")
        if module in {"pickle", "_pickle"} and names & {"load", "loads", "Unpickler"}:
            self.add(node, f"from {module} import {', '.join(sorted(names))}")
        if module == "yaml" and names & {"load", "load_all", "unsafe_load", "full_load"}:
            self.add(node, f"from yaml import {', '.join(sorted(names))}")
        if module.startswith("torch") and "load" in names:
            self.add(node, f"from {module} import load")

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        if any(_dotted(b).endswith("Unpickler") for b in node.bases):
            methods = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
            if "find_class" not in methods:
                self.add(node, f"Unpickler subclass {node.name} without find_class")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        name = _dotted(node.func)
        if name in NEVER_CALL:
            self.add(node, f"{name}()")
        elif name in {"yaml.load", "yaml.load_all"}:
            loader = _keyword(node, "Loader") or (node.args[1] if len(node.args) > 1 else None)
            if loader is None or _dotted(loader).split(".")[-1] not in SAFE_YAML_LOADERS:
                self.add(node, f"{name}() without SafeLoader")
        elif name in {"torch.load", "torch.serialization.load"}:
            if not _is_true(_keyword(node, "weights_only")):
                self.add(node, "torch.load() without weights_only=True")
        elif name.endswith("load_state_dict_from_url") or name.endswith("load_from_url"):
            if not _is_true(_keyword(node, "weights_only")):
                self.add(node, f"{name}() without weights_only=True")
        elif name in {"np.load", "numpy.load"} and _is_true(_keyword(node, "allow_pickle")):
            self.add(node, "np.load(allow_pickle=True)")
        self.generic_visit(node)


def unsafe_calls(source: str) -> list[tuple[int, str, str]]:
    visitor = UnsafeCalls()
    visitor.visit(ast.parse(source))
    return visitor.found


def test_the_static_check_finds_each_unsafe_pattern() -> None:
    """The checker itself: every pattern it looks for is found, safe spellings are not."""
    bad = """
import marshal
from pickle import loads
def f(p, s):
    eval(s); exec(s)
    pickle.load(p); pickle.loads(s); pickle.Unpickler(p).load()
    yaml.load(s); yaml.load(s, Loader=yaml.FullLoader); yaml.unsafe_load(s); yaml.full_load(s)
    torch.load(p); torch.load(p, weights_only=False)
    torch.hub.load_state_dict_from_url(p)
    np.load(p, allow_pickle=True)
class Loose(pickle.Unpickler):
    pass
"""
    problems = [problem for _, _, problem in unsafe_calls(bad)]
    assert len(problems) == 16, problems
    good = """
def f(p, s):
    model.eval(); yaml.safe_load(s); yaml.load(s, Loader=yaml.SafeLoader)
    torch.load(p, map_location="cpu", weights_only=True); np.load(p); np.load(p, mmap_mode="r")
    torch.hub.load_state_dict_from_url(p, weights_only=True)
class Strict(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError(name)
"""
    assert unsafe_calls(good) == []


def test_the_protocol_loader_is_a_safe_loader() -> None:
    from dmlbench.protocol import UniqueKeyLoader

    assert issubclass(UniqueKeyLoader, yaml.SafeLoader)
    with pytest.raises(yaml.constructor.ConstructorError, match="could not determine"):
        yaml.load("!!python/object/apply:os.system ['true']", Loader=UniqueKeyLoader)


def test_the_package_reads_nothing_unsafely() -> None:
    found: dict[tuple[str, str], list[str]] = {}
    files = sorted(f for d in PACKAGE_DIRS for f in (REPO / d).rglob("*.py"))
    assert len(files) > 40  # the package is really there
    for path in files:
        rel = path.relative_to(REPO).as_posix()
        for line, function, problem in unsafe_calls(path.read_text(encoding="utf-8")):
            found.setdefault((rel, function), []).append(f"{rel}:{line} {problem}")
    unexpected = {k: v for k, v in found.items() if k not in ALLOWED_TORCH_LOAD}
    assert unexpected == {}
    for (rel, function), problems in found.items():  # the reviewed exceptions, re-checked
        assert all("torch.load() without weights_only=True" in p for p in problems), problems
        text = (REPO / rel).read_text(encoding="utf-8")
        source = ast.get_source_segment(text, _function(ast.parse(text), function)) or ""
        before_load = source.split("weights_only=False")[0].rsplit("except", 1)[-1]
        assert "check_digest()" in before_load, "the full SHA-256 check must come first"
        assert re.search(r'sha256="[0-9a-f]{64}"', text), "the digest must be pinned in full"
    stale = set(ALLOWED_TORCH_LOAD) - set(found)
    assert not stale, f"remove the fixed exceptions from ALLOWED_TORCH_LOAD: {stale}"


def _function(tree: ast.Module, name: str) -> ast.AST:
    return next(
        n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
        and n.name == name
    )  # fmt: skip
