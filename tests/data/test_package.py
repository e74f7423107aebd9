"""The data package loads its sources on first use: a parser is built without torch."""

from __future__ import annotations

import subprocess
import sys

import pytest

from dmlbench.data import source_modules


def _fresh(code: str) -> str:
    """Run ``code`` in a new interpreter (this one has torch loaded already) and return stdout."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_building_the_command_line_parser_imports_no_torch() -> None:
    """`dmlbench --help` and every subcommand's parser answer in about a second, not five."""
    code = (
        "import sys; from dmlbench.cli.main import build_parser; build_parser(); "
        "print(sorted(m for m in ('torch', 'dmlbench.data.base') if m in sys.modules))"
    )
    assert _fresh(code) == "[]"


def test_the_registry_is_whole_whenever_it_is_seen() -> None:
    code = (
        "import dmlbench.data.prepare; from dmlbench.data import DATASETS; "
        "print(','.join(DATASETS.list()))"
    )
    names = _fresh(code).split(",")
    assert len(names) == 13 and len(source_modules()) > len(names)  # and the helpers
    assert {
        "glyphs",
        "hanzi",
        "hangul",
        "emoji",
        "icons",
        "images",
        "mpii-pose",
        "cub200",
        "fractals",
    } <= set(names)


def test_an_unknown_name_is_an_attribute_error() -> None:
    import dmlbench.data

    with pytest.raises(AttributeError, match="no attribute 'DATASET'"):
        dmlbench.data.DATASET  # noqa: B018
