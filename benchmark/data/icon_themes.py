"""The icon themes the ``icons`` data set can draw from, and the licence of each of their files.

Every theme is a Debian package (``apt-get install``; nothing is downloaded). Its licences are
read from the package's machine-readable copyright file (:mod:`dmlbench.data.licences`): the
``Files:`` patterns name paths of the *source* tree, while a package installs built files
under ``/usr/share/icons/<folder>``, so :func:`icon_sources` lists the source paths an
installed icon may come from, as each theme's tree names them (:attr:`Theme.sources`).

:data:`THEMES` is ordered, and the order matters: of two near-identical drawings of one class
the earlier theme's is kept (:func:`dmlbench.data.icons.collect`). The first five are the
default theme set (:data:`DEFAULT_THEMES`, the committed ``icons-mini`` boards'); the ten
appended after them (issue #47) enlarge the set, and where they share drawings with each other
(Paper, Moka and Faenza; elementary and elementary-xfce; gnome and Adwaita) the copies are
dropped by that order.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dmlbench.data.licences import default_licence, file_stanza, package_stanzas
from dmlbench.errors import did_you_mean


@dataclass(frozen=True)
class Theme:
    """An icon theme: its folder under ``<data dir>/icons``, Debian package, upstream, author.

    ``sources``: further source-tree paths an installed icon may be built from, for the Debian
    copyright file's per-file stanzas (:func:`icon_sources`). A template may use ``{name}``
    (the icon name; Adwaita renders its PNGs from ``src/fullcolor/<name>.svg``), ``{file}``
    (the installed path under the icons folder, theme folder first: Yaru's tree keeps it under
    ``icons/``) and ``{path}`` (the installed path under the theme folder: elementary's tree
    is the theme folder itself).
    """

    folder: str
    package: str
    url: str
    author: str
    sources: tuple[str, ...] = ()


THEMES = (
    # the default set, in its order (elementary-xfce borrows a few GNOME drawings, so it
    # comes after Adwaita)
    Theme(
        "Adwaita",
        "adwaita-icon-theme",
        "https://gitlab.gnome.org/GNOME/adwaita-icon-theme",
        "GNOME Project",
        ("src/fullcolor/{name}.svg", "41/src/fullcolor/{name}.svg"),
    ),
    Theme(
        "Tango",
        "tango-icon-theme",
        "http://tango.freedesktop.org/Tango_Icon_Library",
        "Tango Desktop Project",
    ),
    Theme(
        "oxygen",
        "oxygen-icon-theme",
        "https://invent.kde.org/frameworks/oxygen-icons5",
        "Oxygen Team (KDE)",
    ),
    Theme(
        "breeze",
        "breeze-icon-theme",
        "https://invent.kde.org/frameworks/breeze-icons",
        "KDE Visual Design Group",
    ),
    Theme(
        "elementary-xfce",
        "elementary-xfce-icon-theme",
        "https://github.com/shimmerproject/elementary-xfce",
        "Daniel Foré, Simon Steinbeiß and contributors",
    ),
    # issue #47: ten more Debian themes, after the five (their copies of them are dropped)
    Theme(
        "Papirus",
        "papirus-icon-theme",
        "https://github.com/PapirusDevelopmentTeam/papirus-icon-theme",
        "Papirus Development Team (Alexey Varfolomeev, Sergei Eremenko)",
    ),
    Theme(
        "Numix",
        "numix-icon-theme",
        "https://github.com/numixproject/numix-icon-theme",
        "Numix Project (Satyajit Sahoo)",
    ),
    Theme(
        "Faenza",
        "faenza-icon-theme",
        "https://www.gnome-look.org",  # the Source of Debian's copyright file
        "Matthieu James",
    ),
    Theme(
        "gnome",
        "gnome-icon-theme",
        "https://download.gnome.org/sources/gnome-icon-theme/",
        "GNOME Project (Jakub Steiner, Lapo Calamandrei and other GNOME artists)",
    ),
    Theme(
        "mate",
        "mate-icon-theme",
        "https://git.mate-desktop.org/mate-icon-theme/",
        "MATE Project (Perberos, Steve Zesch, Stefano Karapetsas) and GNOME artists",
    ),
    Theme(
        "Yaru",
        "yaru-theme-icon",
        "https://github.com/ubuntu/yaru",
        "Canonical Ltd. and the Yaru team (icons: Sam Hewitt)",
        ("icons/{file}",),
    ),
    Theme(
        "Paper",
        "paper-icon-theme",
        "https://github.com/snwh/paper-icon-theme",
        "Sam Hewitt",
    ),
    Theme(
        "suru",
        "suru-icon-theme",
        "https://gitlab.com/ubports/core/suru-icon-theme/",
        "Canonical Ltd. (UBports)",
    ),
    Theme(
        "Moka",
        "moka-icon-theme",
        "https://github.com/ubuntubudgie/moka-icon-theme",
        "Sam Hewitt, Ubuntu Budgie Developers",
    ),
    Theme(
        "elementary",
        "elementary-icon-theme",
        "https://github.com/elementary/icons",
        "Daniel Foré, elementary LLC",
        ("{path}",),
    ),
)
BY_FOLDER = {t.folder: t for t in THEMES}
# The theme set of ``data.params.themes`` when a protocol names none: the committed boards'.
DEFAULT_THEMES = ("Adwaita", "Tango", "oxygen", "breeze", "elementary-xfce")


def check_themes(names: tuple[str, ...]) -> tuple[str, ...]:
    """``names`` if each is a known theme folder, named once; else ``ValueError`` naming the
    first unknown one (with the closest known name) and every known name."""
    for name in names:
        if name not in BY_FOLDER:
            known = list(BY_FOLDER)
            raise ValueError(
                f"unknown theme {name!r}{did_you_mean(name, known)}; known: {', '.join(known)}"
            )
        if names.count(name) > 1:
            raise ValueError(f"theme {name!r} is named twice")
    return names


def chosen(names: tuple[str, ...]) -> tuple[Theme, ...]:
    """The :class:`Theme` of each name, in the given order (the order that keeps a drawing)."""
    return tuple(BY_FOLDER[n] for n in check_themes(names))


@dataclass(frozen=True)
class Icon:
    """One theme's file for one icon name, with its nominal size and context."""

    theme: str
    name: str
    path: Path
    size: int
    context: str


def package_licence(package: str) -> str:
    """The ``License`` of the ``Files: *`` paragraph of the package's Debian copyright file:
    the package's default. An image's own licence may differ (:func:`icon_licence`)."""
    return default_licence(package_stanzas(package))


def theme_licence(theme: Theme) -> str:
    """The licence of the theme's files as a whole, as ``sources.yaml`` records it: the stanza
    matching the theme's ``index.theme`` in its source tree, else the package default.

    The default alone is wrong for a package whose art is not its ``Files: *``: Yaru's
    ``Files: *`` is GPL-3.0+ (its code) and its ``icons/*`` CC-BY-SA-4.0; mate's and suru's
    copyright files have no ``Files: *`` at all. For the five default themes both agree (the
    committed boards' ``sources.yaml`` bytes, and so their fingerprints, hold).
    """
    folder = Path("/", theme.folder)  # only the path under it is read
    index = Icon(theme.folder, "index", folder / "index.theme", 0, "")
    stanza = file_stanza(package_stanzas(theme.package), icon_sources(theme, index, folder))
    return stanza.licence if stanza else package_licence(theme.package)


def icon_sources(theme: Theme, icon: Icon, folder: Path) -> list[str]:
    """The source-tree paths the installed ``icon`` may be built from, as the Debian
    copyright file's ``Files:`` patterns name them: its path under the icons folder
    (``elementary-xfce/emblems/48/emblem-readonly.png``), the SVG a PNG is rendered from, and
    the theme's own :attr:`Theme.sources` of both."""
    path = icon.path.relative_to(folder).as_posix()
    variants = [path] + ([path[: -len(".png")] + ".svg"] if path.endswith(".png") else [])
    paths = [f"{theme.folder}/{v}" for v in variants]
    for template in theme.sources:
        for v in variants:
            paths.append(template.format(name=icon.name, file=f"{theme.folder}/{v}", path=v))
    return list(dict.fromkeys(paths))


def icon_licence(theme: Theme, icon: Icon, folder: Path) -> tuple[str, str]:
    """``(licence, copyright)`` of one icon file: the stanza of its package's copyright file
    that matches it, the last one winning (``unknown`` when none does)."""
    stanza = file_stanza(package_stanzas(theme.package), icon_sources(theme, icon, folder))
    return (stanza.licence, stanza.copyright) if stanza else ("unknown", "")
