"""Shipped protocols (one YAML each) and ``protocols.lock``; see ``dmlbench list protocols``.

The lock records each shipped protocol's version and content hash: a protocol whose content
changes must bump its ``version:`` (old numbers stay reproducible under the old hash), and
``dmlbench validate`` fails until it does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from dmlbench.errors import ProtocolError
from dmlbench.protocol import builtin_dir, load_protocol

LOCK_NAME = "protocols.lock"


def read_lock(directory: Path | None = None) -> dict[str, dict[str, Any]]:
    path = (directory or builtin_dir()) / LOCK_NAME
    if not path.is_file():
        return {}
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    return {str(k): dict(v) for k, v in data.items()}


def check_lock(directory: Path | None = None) -> list[str]:
    """Problems with the lock: a protocol whose content changed without a version bump."""
    directory = directory or builtin_dir()
    lock = read_lock(directory)
    problems = []
    for path in sorted(directory.glob("*.yaml")):
        protocol = load_protocol(path)
        entry = lock.get(path.stem)
        if entry is None:
            problems.append(f"{path.name}: not in {LOCK_NAME} (run `dmlbench validate --lock`)")
        elif entry["version"] == protocol.version and entry["sha256"] != protocol.hash:
            problems.append(
                f"{path.name}: content changed but version is still {protocol.version}; "
                "bump `version:` (old numbers must stay reproducible), then update the lock"
            )
        elif entry["version"] != protocol.version:
            problems.append(f"{path.name}: version {protocol.version} is not in the lock yet")
    return problems


def write_lock(directory: Path | None = None) -> Path:
    """Rewrite the lock; refuses an entry whose content changed without a version bump."""
    directory = directory or builtin_dir()
    old = read_lock(directory)
    entries = {}
    for path in sorted(directory.glob("*.yaml")):
        protocol = load_protocol(path)
        prev = old.get(path.stem)
        if prev and prev["version"] == protocol.version and prev["sha256"] != protocol.hash:
            raise ProtocolError(
                f"{path.name}: content changed but version is still {protocol.version}; bump it"
            )
        entries[path.stem] = {"version": protocol.version, "sha256": protocol.hash}
    target = directory / LOCK_NAME
    header = "# name: version and sha256 of the canonical protocol (dmlbench validate --lock)\n"
    target.write_text(header + yaml.safe_dump(entries, sort_keys=True), encoding="utf-8")
    return target
