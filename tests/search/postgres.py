"""A throw-away PostgreSQL cluster for the distributed-search tests.

The server refuses to run as root, so under root the cluster is owned by, and started as, the
``postgres`` system user that Debian's package creates. ``.ci/run`` installs the package when
it is missing; when the server still cannot start, the tests are skipped with the reason.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def server_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    if found:
        return Path(found[-1]).parent
    pg_ctl = shutil.which("pg_ctl")
    return Path(pg_ctl).resolve().parent if pg_ctl else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def cluster() -> Iterator[str]:
    """Yield a ``postgresql://`` URL of a fresh database; raise RuntimeError with the reason
    when no server can be started here."""
    bindir = server_bin()
    if bindir is None:
        raise RuntimeError("no PostgreSQL server binaries (Debian package 'postgresql')")
    as_user: list[str] = []
    if os.geteuid() == 0:
        if shutil.which("runuser") is None:
            raise RuntimeError("running as root without runuser: cannot start PostgreSQL")
        as_user = ["runuser", "-u", "postgres", "--"]
    root = Path(tempfile.mkdtemp(prefix="dmlbench-pg-"))
    data, port = root / "data", _free_port()
    if as_user:
        shutil.chown(root, "postgres")
    os.chmod(root, 0o755)

    def run(*args: str) -> None:
        proc = subprocess.run([*as_user, *args], capture_output=True, text=True, timeout=120)
        if proc.returncode:
            raise RuntimeError(f"{Path(args[0]).name} failed: {proc.stderr.strip()[-300:]}")

    try:
        run(str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-N")
        run(
            str(bindir / "pg_ctl"), "-D", str(data), "-l", str(root / "log"), "-w", "start",
            "-o", f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off",
        )  # fmt: skip
        try:
            run(str(bindir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres",
                "optuna")  # fmt: skip
            yield f"postgresql://postgres@127.0.0.1:{port}/optuna"
        finally:
            subprocess.run(
                [*as_user, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
                capture_output=True,
                timeout=60,
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)
