"""Run the ``dmlbench`` command line inside the test process, as a shell would run it in a new one.

Why: a new ``python -m dmlbench`` spends about 5 s importing torch, pytorch-metric-learning and
scipy before it reads its first argument, and the reliability suites run many commands whose
own work is a fraction of that. In this process a command sees what a new one would where
it matters for what the tests assert:

- its own environment variables (``DMLBENCH_CACHE``…) and working folder, restored afterwards;
- ``sys.argv`` as the shell gives it (records keep the command line that made them);
- stdout and stderr of its own, and no logging handlers but the ones it installs (pytest's are
  put aside, so warnings reach stderr exactly as on a terminal);
- warnings silenced (``PYTHONWARNINGS=ignore``) and torch's thread count restored;
- an exception that escapes ``main`` becomes what the interpreter prints, a traceback on
  stderr and exit status 1, so "no traceback" assertions keep their meaning.

Cases that need a process of their own keep ``subprocess``: another user, a memory limit, a
signal, a plugin module (registering a method twice in one process is an error).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import subprocess
import sys
import traceback
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path

import torch

from dmlbench.engine import progress


def run_cli(
    *argv: str | Path, env: Mapping[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``dmlbench ARGV`` in this process: exit status, stdout and stderr as a shell sees them."""
    from dmlbench.cli.main import main

    args = [str(a) for a in argv]
    out, err = io.StringIO(), io.StringIO()
    with (
        _as_a_new_process(args, env, cwd),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        try:
            status = main(args)
        except SystemExit as stop:  # argparse's usage errors, --help, --version
            status = _exit_status(stop.code)
        except Exception:
            traceback.print_exc()
            status = 1
    return subprocess.CompletedProcess(["dmlbench", *args], status, out.getvalue(), err.getvalue())


def _exit_status(code: object) -> int:
    """What the interpreter makes of ``SystemExit(code)`` (a message is printed, status 1)."""
    if code is None or isinstance(code, int):
        return code or 0
    print(code, file=sys.stderr)
    return 1


@contextlib.contextmanager
def _as_a_new_process(
    argv: list[str], env: Mapping[str, str] | None, cwd: Path | None
) -> Iterator[None]:
    saved_env, saved_cwd, saved_argv = dict(os.environ), os.getcwd(), sys.argv
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    threads = torch.get_num_threads()
    os.environ.update(env or {})
    sys.argv = ["dmlbench", *argv]
    for handler in saved_handlers:
        root.removeHandler(handler)
    try:
        if cwd is not None:
            os.chdir(cwd)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        progress.reset_logging()  # a later command's early error must not reach this log file
        for handler in root.handlers[:]:  # anything else the command installed
            root.removeHandler(handler)
            handler.close()
        for handler in saved_handlers:
            root.addHandler(handler)
        root.setLevel(saved_level)
        torch.set_num_threads(threads)
        sys.argv = saved_argv
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
