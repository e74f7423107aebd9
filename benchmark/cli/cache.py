"""``dmlbench cache list`` / ``dmlbench cache clean``: what the data cache holds, and freeing it.

The cache (``$DMLBENCH_CACHE``, default ``~/.cache/dmlbench``) keeps one decoded copy of a real
data set per manifest fingerprint and image size, plus generated data sets and neighbour
lists. Everything in it can be rebuilt, but nothing removes it by itself: a changed file list
leaves the old copy behind (hundreds of MB for a CUB-sized set). Each entry's age is the time
it was last opened by a run (its modification time, refreshed on use).
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

from dmlbench.errors import DmlbenchError

KINDS = ("images", "glyphs", "hanzi", "hangul", "poses", "neighbours")


def entries(root: Path) -> list[Path]:
    """Every cache entry (an image cache folder or a ``.npz`` file), hidden temp folders too."""
    found: list[Path] = []
    for kind in KINDS:
        folder = root / kind
        if folder.is_dir():
            found.extend(sorted(folder.iterdir()))
    return found


def size_of(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def human(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def cmd_cache(args: argparse.Namespace) -> int:
    from dmlbench.data.base import cache_dir

    root = cache_dir()
    now = time.time()
    found = [(p, size_of(p), (now - p.stat().st_mtime) / 86400) for p in entries(root)]
    if args.cache_command == "list":
        for path, size, days in found:
            print(f"{human(size):>9}  {days:6.1f} days  {path}")
        print(f"{human(sum(s for _, s, _ in found)):>9}  total in {len(found)} entries, {root}")
        return 0
    if not args.all and args.older_than is None:
        raise DmlbenchError("cache clean: pass --older-than DAYS or --all")
    if args.older_than is not None and args.older_than < 0:
        raise DmlbenchError(f"--older-than {args.older_than}: must be >= 0")
    freed = 0
    for path, size, days in found:
        if args.all or days > args.older_than:
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
            freed += size
            print(f"removed {path}")
    print(f"freed {human(freed)} in {root}")
    return 0


# This command's place in ``dmlbench --help`` (:func:`dmlbench.cli.main.command_modules`).
ORDER = 110


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    cache = subparsers.add_parser(
        "cache",
        help="list or clean the data cache",
        description="List the data cache ($DMLBENCH_CACHE, default ~/.cache/dmlbench): decoded "
        "image sets, generated data sets, neighbour lists, with sizes and days since last "
        "use; or remove entries (all of it can be rebuilt).",
    )
    actions = cache.add_subparsers(dest="cache_command", metavar="ACTION", required=True)
    actions.add_parser("list", help="entries with size and age").set_defaults(func=cmd_cache)
    clean = actions.add_parser("clean", help="remove entries (rebuilt when next needed)")
    clean.add_argument("--older-than", type=float, default=None, metavar="DAYS")
    clean.add_argument("--all", action="store_true", help="remove everything")
    clean.set_defaults(func=cmd_cache)
