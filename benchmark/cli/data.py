"""``dmlbench data prepare``: real data sets into place (:mod:`dmlbench.data.prepare`), and
``dmlbench data figure``: a grid of a rendered set's classes by their sources."""

from __future__ import annotations

import argparse
from pathlib import Path

from dmlbench.data.prepare import SPECS, prepare
from dmlbench.errors import DataError

# Rendered from installed packages, not downloaded: prepared into --root, or the cache.
RENDERED = {"emoji": "dmlbench.data.emoji", "icons": "dmlbench.data.icons"}


def cmd_prepare(args: argparse.Namespace) -> int:
    if args.name in RENDERED:
        return prepare_rendered(args.name, args.root)
    if args.root is None:
        raise DataError(f"{args.name}: --root DIR is required (the protocol's data.root)")
    return prepare(
        args.name,
        Path(args.root).expanduser(),
        args.url,
        args.sha256,
        args.keep_archive,
        args.force,
    )


def prepare_rendered(name: str, root: str | None) -> int:
    """Render a set from installed packages into ``root``, or under the cache (first use)."""
    import importlib
    import time

    from dmlbench.data.base import cache_dir

    module = importlib.import_module(RENDERED[name])
    start = time.perf_counter()
    if root is None:
        done = module.prepared_root(cache_dir())
    else:
        done = module.prepare(Path(root).expanduser())
    print(f"{name}: {done} ({time.perf_counter() - start:.1f} s)")
    return 0


def cmd_figure(args: argparse.Namespace) -> int:
    """A few classes of a rendered set (``--classes``, else the module's ``FIGURE_CLASSES``)
    by its sources, from ``--root`` or the cache (prepared on first use)."""
    import importlib

    from dmlbench.data.base import cache_dir
    from dmlbench.data.rendered import figure

    module = importlib.import_module(RENDERED[args.name])
    root = Path(args.root).expanduser() if args.root else module.prepared_root(cache_dir())
    classes = args.classes.split(",") if args.classes else module.FIGURE_CLASSES
    print(figure(root, classes, module.FIGURE_SOURCES, Path(args.out)))
    return 0


EPILOG = """examples:
  dmlbench data prepare cub200 --root $DMLBENCH_DATA/CUB_200_2011
  dmlbench data prepare cars196 --root $DMLBENCH_DATA/CARS196     # prints where files go
  dmlbench data prepare cub200 --root DIR --url file:///mirror/CUB_200_2011.tgz
  dmlbench data prepare icons                # renders the icon themes into the cache
  dmlbench data prepare emoji                # renders the emoji vendors into the cache
  dmlbench data figure emoji --out emoji.png # a grid of 8 classes by their vendors
"""


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    data = subparsers.add_parser(
        "data",
        help="get data sets into place; draw the rendered ones",
        description="Download, verify and extract real data sets, or print where their files "
        "go, and write a manifest; render the emoji and icons sets, and draw a few of their "
        "classes.",
    )
    actions = data.add_subparsers(dest="data_command", metavar="ACTION")
    prep = actions.add_parser(
        "prepare",
        help="download/verify/extract a data set, or print where files go",
        description="If ROOT already holds the data set's official files, check them and write "
        "ROOT/dmlbench-manifest.json. Otherwise download the archive where a public URL can "
        "be used (cub200), verify its SHA-256 before extracting, extract safely and write the "
        "manifest; where none can (cars196, sop, inshop), print which files to place where "
        "and exit with status 2.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    prep.add_argument("name", choices=sorted([*SPECS, *RENDERED]), help="data set")
    prep.add_argument(
        "--root",
        default=None,
        help="the data set's folder (the protocol's data.root); rendered sets (emoji, icons) "
        "default to the cache",
    )
    prep.add_argument(
        "--url", default=None, help="download from this mirror or file:// URL instead"
    )
    prep.add_argument("--sha256", default=None, help="expected SHA-256 of the archive at --url")
    prep.add_argument(
        "--keep-archive", action="store_true", help="keep the archive after extracting"
    )
    prep.add_argument(
        "--force",
        action="store_true",
        help="download and extract even though ROOT already holds files (which may be overwritten)",
    )
    prep.set_defaults(func=cmd_prepare)

    fig = actions.add_parser(
        "figure",
        help="a grid of a rendered set's classes (rows) by their sources (columns)",
        description="Draw a few classes of a rendered data set, one column per vendor or "
        "theme, as stored after preparing: what the retrieval task looks like.",
        epilog="example:\n  dmlbench data figure icons --out icons.png --classes go-next,printer",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    fig.add_argument("name", choices=sorted(RENDERED), help="rendered data set")
    fig.add_argument("--out", required=True, help="PNG file to write")
    fig.add_argument(
        "--root", default=None, help="a prepared root (default: the cache, prepared on first use)"
    )
    fig.add_argument(
        "--classes", default=None, help="comma-separated class names (default: eight chosen)"
    )
    fig.set_defaults(func=cmd_figure)

    def show_help(args: argparse.Namespace) -> int:
        data.print_help()
        return 2

    data.set_defaults(func=show_help)
