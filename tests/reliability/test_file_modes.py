"""Records, reports and manifests are readable by colleagues sharing the folder: the user's
normal mode (0666 less the umask), not mkstemp's private 0600."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from dmlbench.atomic import atomic_write
from dmlbench.records import atomic_write_text


@pytest.fixture
def umask() -> Iterator[None]:
    before = os.umask(0o022)
    yield
    os.umask(before)


@pytest.mark.parametrize(("mask", "mode"), [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_atomic_writes_follow_the_umask(tmp_path: Path, umask: None, mask: int, mode: int) -> None:
    os.umask(mask)
    path = tmp_path / "sub" / "record.json"
    atomic_write_text(path, "{}\n")
    assert stat.S_IMODE(path.stat().st_mode) == mode
    atomic_write(path, lambda fh: fh.write(b"[]\n"))  # a replaced file too
    assert stat.S_IMODE(path.stat().st_mode) == mode and path.read_text() == "[]\n"
    assert [p.name for p in path.parent.iterdir()] == ["record.json"]  # no temp file left
