"""``dmlbench validate --plugin MODULE``: a protocol naming a plugin's method validates, as
``run --plugin`` accepts it (before, validate had no --plugin and refused every such protocol)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.methods.test_plugin import readme_example
from tests.test_protocol import BASE


def _validate(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dmlbench", "validate", *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
    )


def test_a_protocol_naming_a_plugin_method_validates_with_plugin(tmp_path: Path) -> None:
    code, _ = readme_example()
    (tmp_path / "my_methods.py").write_text(code, encoding="utf-8")
    (tmp_path / "mine.yaml").write_text(
        BASE + "methods: [my-cosine-contrastive]\n", encoding="utf-8"
    )
    without = _validate(tmp_path, "mine.yaml")
    assert without.returncode == 2 and len(without.stderr.strip().splitlines()) == 1
    assert "my-cosine-contrastive" in without.stderr and "Traceback" not in without.stderr
    proc = _validate(tmp_path, "--plugin", "my_methods", "mine.yaml")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("mine.yaml: ok — mine v1, hash ")


def test_a_plugin_that_cannot_be_imported_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "mine.yaml").write_text(BASE, encoding="utf-8")
    proc = _validate(tmp_path, "--plugin", "no_such_module", "mine.yaml")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "error: --plugin no_such_module: cannot import (No module named 'no_such_module')"
    ]
