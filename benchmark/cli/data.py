"""``dmlbench data prepare``: real data sets into place (:mod:`dmlbench.data.prepare`),
``dmlbench data figure``: a grid of a rendered set's classes by their sources, and ``dmlbench
data audit``: look-alike classes and near-blank images (:mod:`dmlbench.data.audit`)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from pathlib import Path

from dmlbench.data.prepare import prepare
from dmlbench.errors import DataError


def rendered() -> dict[str, str]:
    """Data sets rendered from installed packages, not downloaded (prepared into --root, or
    the cache), with the module that renders them: read from the sources' ``About.prepare``."""
    from dmlbench.data import DATASETS

    classes = {name: DATASETS.get(name) for name in DATASETS.list()}
    return {name: cls.__module__ for name, cls in classes.items() if cls.about.prepare == "render"}


def with_figure() -> list[str]:
    """Data sets ``dmlbench data figure`` draws (``About.figure``)."""
    from dmlbench.data import DATASETS

    return [name for name in DATASETS.list() if DATASETS.get(name).about.figure]


def preparable() -> list[str]:
    """Data sets ``dmlbench data prepare`` knows: fetched or explained, or rendered."""
    from dmlbench.data.prepare import specs

    return sorted([*specs(), *rendered()])


class LazyChoices:
    """An argparse ``choices`` read from the registry when a command line is checked or help
    is printed, not when the parser is built: the registry imports every source (torch), and
    building the parser must not (tests/data/test_package.py). Give the argument a
    ``metavar``: argparse formats one from the choices as soon as the argument is added."""

    def __init__(self, names: Callable[[], list[str]]) -> None:
        self._names = names

    def __contains__(self, name: object) -> bool:
        return name in self._names()

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._names()))


def cmd_prepare(args: argparse.Namespace) -> int:
    if args.name in rendered():
        return prepare_rendered(args.name, args.root, args.themes)
    if args.themes is not None:
        raise DataError(f"--themes: {args.name} has no themes (only icons has)")
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


def prepare_rendered(name: str, root: str | None, themes: str | None = None) -> int:
    """Render a set from installed packages into ``root``, or under the cache (first use);
    ``themes`` (icons): the comma-separated theme set, as ``data.params.themes`` names it."""
    import importlib
    import time

    from dmlbench.data.base import cache_dir

    module = importlib.import_module(rendered()[name])
    chosen: dict[str, tuple[str, ...]] = {}
    if themes is not None:
        if not hasattr(module, "check_themes"):
            raise DataError(f"--themes: {name} has no themes (only icons has)")
        names = tuple(t.strip() for t in themes.split(",") if t.strip())
        try:
            chosen["themes"] = module.check_themes(names)
        except ValueError as err:
            raise DataError(f"--themes: {err}") from None
    start = time.perf_counter()
    if root is None:
        done = module.prepared_root(cache_dir(), **chosen)
    else:
        done = module.prepare(Path(root).expanduser(), **chosen)
    print(f"{name}: {done} ({time.perf_counter() - start:.1f} s)")
    return 0


def cmd_figure(args: argparse.Namespace) -> int:
    """A few classes of a rendered set (``--classes``, else the module's ``FIGURE_CLASSES``)
    by its sources, from ``--root`` or the cache (prepared on first use)."""
    import importlib

    from dmlbench.data import DATASETS
    from dmlbench.data.base import cache_dir
    from dmlbench.data.rendered import figure

    module = importlib.import_module(DATASETS.get(args.name).__module__)
    root = Path(args.root).expanduser() if args.root else module.prepared_root(cache_dir())
    classes = args.classes.split(",") if args.classes else module.FIGURE_CLASSES
    print(figure(root, classes, module.FIGURE_SOURCES, Path(args.out)))
    return 0


EPILOG = """examples:
  dmlbench data prepare cub200 --root $DMLBENCH_DATA/CUB_200_2011
  dmlbench data prepare cars196 --root $DMLBENCH_DATA/CARS196     # prints where files go
  dmlbench data prepare cub200 --root DIR --url file:///mirror/CUB_200_2011.tgz
  dmlbench data prepare icons                # renders the icon themes into the cache
  dmlbench data prepare icons --themes Adwaita,Tango,oxygen,breeze,elementary-xfce,Papirus
  dmlbench data prepare emoji                # renders the emoji vendors into the cache
  dmlbench data figure emoji --out emoji.png # a grid of 8 classes by their vendors
"""


def cmd_audit(args: argparse.Namespace) -> int:
    """Exit 1 when the protocol's data hands out free or impossible queries."""
    from dmlbench.data.audit import audit_protocol
    from dmlbench.protocol import load_protocol

    limits = {k: v for k, v in (("near_rms", args.near_rms), ("blank_std", args.blank_std)) if v}
    found = audit_protocol(load_protocol(args.protocol), args.data_root, **limits)
    print(found.summary())
    return 0 if found.ok else 1


# This command's place in ``dmlbench --help`` (:func:`dmlbench.cli.main.command_modules`).
ORDER = 100


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    data = subparsers.add_parser(
        "data",
        help="get data sets into place; draw the rendered ones; audit a protocol's data",
        description="Download, verify and extract real data sets, or print where their files "
        "go, and write a manifest; render the emoji and icons sets, and draw a few of their "
        "classes; audit a protocol's data for look-alike classes and blank images.",
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
    prep.add_argument(
        "name", choices=LazyChoices(preparable), metavar="NAME", help="data set: %(choices)s"
    )
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
        "--themes",
        default=None,
        help="icons: the comma-separated theme set to render, in order, as a protocol's "
        "data.params.themes names it (default: the five of the committed boards)",
    )
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
    fig.add_argument(
        "name",
        choices=LazyChoices(with_figure),
        metavar="NAME",
        help="rendered data set: %(choices)s",
    )
    fig.add_argument("--out", required=True, help="PNG file to write")
    fig.add_argument(
        "--root", default=None, help="a prepared root (default: the cache, prepared on first use)"
    )
    fig.add_argument(
        "--classes", default=None, help="comma-separated class names (default: eight chosen)"
    )
    fig.set_defaults(func=cmd_figure)

    aud = actions.add_parser(
        "audit",
        help="look-alike classes and near-blank images in a protocol's data",
        description="Compare every pair of images of different classes as the protocol feeds "
        "them to the network (its resolution, its test pipeline for both splits): identical or "
        "nearly identical drawings within the test split, within the training split and across "
        "them, and near-blank images. Exit 1 when any is found: such data hands out impossible "
        "or free queries.",
        epilog="example:\n  dmlbench data audit --protocol glyphs-mini",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    aud.add_argument("--protocol", required=True, help="protocol name or YAML file")
    aud.add_argument("--data-root", default=None, help="the data set's folder (real data sets)")
    aud.add_argument(
        "--near-rms",
        type=float,
        default=None,
        help="largest RMS pixel difference (0-1 scale) of a near-identical pair (default "
        "0.01: copies up to anti-aliasing; dmlbench.data.audit.NEAR_RMS)",
    )
    aud.add_argument(
        "--blank-std",
        type=float,
        default=None,
        help="an image whose pixels' std is below this is near-blank (default 0.02; "
        "dmlbench.data.audit.BLANK_STD)",
    )
    aud.set_defaults(func=cmd_audit)

    def show_help(args: argparse.Namespace) -> int:
        data.print_help()
        return 2

    data.set_defaults(func=show_help)
