"""Per-file licences from Debian copyright files, and the licence records of the data sets.

Reading only ``Files: *`` labelled elementary-xfce's ``emblem-readonly`` (CC-BY-SA-2.0) as
GPL-2+. A file with a stanza of its own must get that stanza's licence, the last matching
stanza winning (copyright-format 1.0); and writing the corrected licences must not move the
data fingerprint of the committed boards.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from dmlbench.data import glyphs, icon_themes, licences
from dmlbench.data.licences import file_stanza, parse_copyright, pattern_regex

# A DEP-5 file in the shape of elementary-xfce's, with the traps of the real ones: free text
# before the first stanza (Adwaita's), "Files:     *" with padding (Noto's), patterns over
# several lines, " ." empty lines, and a later stanza overriding an earlier one.
FIXTURE = """\
This package was debianized by someone; a line with a colon: not a field.

Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: some-theme

Files:     *
Copyright: 2007-2013 Main Author <main@example.org>
           .
           2010 Second Author
License: GPL-2+

Files: some-theme/emblems/*/emblem-readonly.svg
       some-theme/emblems/*/emblem-unreadable.svg
Copyright: 2005-2009 Lapo Calamandrei
License: CC-BY-SA-2.0
 The licence text, indented.

Files: some-theme/emblems/16/*
Copyright: 2020 Small Sizes
License: MIT

Files: weird/a\\*b?.svg
Copyright: 2021 Escapes
License: CC0-1.0

Files: debian/*
Copyright: 2018 Packager
License: GPL-2+

License: GPL-2+
 A stand-alone licence paragraph: no Files field, not a stanza.
"""


@pytest.fixture()
def stanzas() -> list[licences.Stanza]:
    return parse_copyright(FIXTURE)


def test_the_stanzas_are_read_in_order_with_their_licences(stanzas: list[licences.Stanza]) -> None:
    assert [s.licence for s in stanzas] == ["GPL-2+", "CC-BY-SA-2.0", "MIT", "CC0-1.0", "GPL-2+"]
    assert stanzas[0].patterns == ("*",)
    assert stanzas[1].patterns == (
        "some-theme/emblems/*/emblem-readonly.svg",
        "some-theme/emblems/*/emblem-unreadable.svg",
    )
    assert stanzas[0].copyright == "2007-2013 Main Author <main@example.org>; 2010 Second Author"
    assert licences.default_licence(stanzas) == "GPL-2+"


def test_a_file_with_its_own_stanza_gets_its_own_licence(stanzas: list[licences.Stanza]) -> None:
    own = file_stanza(stanzas, ["some-theme/emblems/48/emblem-readonly.svg"])
    assert own is not None and own.licence == "CC-BY-SA-2.0"
    assert own.copyright == "2005-2009 Lapo Calamandrei"
    other = file_stanza(stanzas, ["some-theme/emblems/48/emblem-favorite.svg"])
    assert other is not None and other.licence == "GPL-2+"  # only Files: * matches


def test_the_last_matching_stanza_wins(stanzas: list[licences.Stanza]) -> None:
    """emblems/16/emblem-readonly.svg matches the CC-BY-SA stanza and the later MIT one."""
    stanza = file_stanza(stanzas, ["some-theme/emblems/16/emblem-readonly.svg"])
    assert stanza is not None and stanza.licence == "MIT"


def test_any_source_path_of_a_built_file_may_match(stanzas: list[licences.Stanza]) -> None:
    """An installed PNG is matched through the SVG it was rendered from."""
    png = "some-theme/emblems/48/emblem-readonly.png"
    alone, both = file_stanza(stanzas, [png]), file_stanza(stanzas, [png, png[:-4] + ".svg"])
    assert alone is not None and alone.licence == "GPL-2+"
    assert both is not None and both.licence == "CC-BY-SA-2.0"


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("*", "a/b/c.svg", True),  # * crosses directories
        ("a/*/c.svg", "a/b/x/c.svg", True),
        ("a/?.svg", "a/b.svg", True),
        ("a/?.svg", "a/bb.svg", False),
        ("weird/a\\*b?.svg", "weird/a*bc.svg", True),  # \\* is a literal star
        ("weird/a\\*b?.svg", "weird/axbc.svg", False),
        ("a/[bc].svg", "a/b.svg", False),  # no character classes in DEP-5
        ("a/[bc].svg", "a/[bc].svg", True),
    ],
)
def test_patterns_follow_copyright_format_1_0(pattern: str, path: str, matches: bool) -> None:
    assert bool(pattern_regex(pattern).fullmatch(path)) is matches


def test_an_unreadable_copyright_file_is_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(licences, "DOC_DIR", tmp_path)
    licences.package_stanzas.cache_clear()
    assert licences.package_stanzas("no-such-package") == ()
    assert licences.default_licence(()) == "unknown"


def test_an_icon_gets_the_licence_of_its_own_stanza(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """icon_licence reads the theme package's copyright file per file."""
    (tmp_path / "some-theme-pkg").mkdir()
    (tmp_path / "some-theme-pkg" / "copyright").write_text(FIXTURE, encoding="utf-8")
    monkeypatch.setattr(licences, "DOC_DIR", tmp_path)
    licences.package_stanzas.cache_clear()
    theme = icon_themes.Theme("some-theme", "some-theme-pkg", "https://example.org", "Someone")
    folder = tmp_path / "icons" / "some-theme"

    def icon(rel: str) -> icon_themes.Icon:
        return icon_themes.Icon("some-theme", Path(rel).stem, folder / rel, 48, "Emblems")

    assert icon_themes.icon_licence(theme, icon("emblems/48/emblem-readonly.png"), folder) == (
        "CC-BY-SA-2.0",
        "2005-2009 Lapo Calamandrei",
    )
    favorite = icon("emblems/48/emblem-favorite.png")
    assert icon_themes.icon_licence(theme, favorite, folder)[0] == "GPL-2+"
    assert icon_themes.package_licence("some-theme-pkg") == "GPL-2+"  # the default
    assert icon_themes.theme_licence(theme) == "GPL-2+"  # sources.yaml's: its files' stanza
    licences.package_stanzas.cache_clear()


# Yaru's and mate's shapes: the art in a stanza of its own under another licence than the
# package's code (Yaru: source tree icons/Yaru/..., installed as Yaru/...), or no "Files: *".
YARU_LIKE = """\
Files: *
Copyright: 2018 The Code Authors
License: GPL-3.0+

Files: icons/*
Copyright: 2018, Sam Hewitt <sam@snwh.org>
License: CC-BY-SA-4.0
"""
MATE_LIKE = """\
Files: src/*.svg
       mate/*
Copyright: 2009-2013, Perberos
License: LGPL-3+ or CC-BY-SA

Files: debian/*
Copyright: 2011 A Packager
License: GPL-2+
"""
# elementary's shape: the source tree is the theme folder itself (actions/48/x.svg).
ELEMENTARY_LIKE = """\
Files: *
Copyright: 2021 elementary LLC
License: GPL-3.0-or-later

Files:
 actions/48/node-insert.svg
Copyright: 2021 elementary LLC
License: GPL-2.0
"""


@pytest.mark.parametrize(
    ("text", "sources", "folder", "icon_path", "expected", "theme_default", "package_default"),
    [
        (YARU_LIKE, ("icons/{file}",), "Yaru", "48x48/apps/x.png", "CC-BY-SA-4.0", "CC-BY-SA-4.0", "GPL-3.0+"),
        (YARU_LIKE, (), "Yaru", "48x48/apps/x.png", "GPL-3.0+", "GPL-3.0+", "GPL-3.0+"),
        (MATE_LIKE, (), "mate", "48x48/apps/x.png", "LGPL-3+ or CC-BY-SA", "LGPL-3+ or CC-BY-SA", "unknown"),
        (ELEMENTARY_LIKE, ("{path}",), "elementary", "actions/48/node-insert.svg", "GPL-2.0", "GPL-3.0-or-later", "GPL-3.0-or-later"),
        (ELEMENTARY_LIKE, (), "elementary", "actions/48/node-insert.svg", "GPL-3.0-or-later", "GPL-3.0-or-later", "GPL-3.0-or-later"),
    ],
)  # fmt: skip
def test_a_theme_tree_maps_installed_icons_to_their_stanzas(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    text: str,
    sources: tuple[str, ...],
    folder: str,
    icon_path: str,
    expected: str,
    theme_default: str,
    package_default: str,
) -> None:
    """``Theme.sources`` templates ({file}, {path}) reach the stanza of a theme whose source
    tree differs from its installed layout; without them the icon falls to ``Files: *``."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "copyright").write_text(text, encoding="utf-8")
    monkeypatch.setattr(licences, "DOC_DIR", tmp_path)
    licences.package_stanzas.cache_clear()
    theme = icon_themes.Theme(folder, "pkg", "https://example.org", "Someone", sources)
    root = tmp_path / "icons" / folder
    icon = icon_themes.Icon(folder, Path(icon_path).stem, root / icon_path, 48, "Apps")
    assert icon_themes.icon_licence(theme, icon, root)[0] == expected
    assert icon_themes.theme_licence(theme) == theme_default
    assert icon_themes.package_licence("pkg") == package_default
    licences.package_stanzas.cache_clear()


ELEMENTARY = Path("/usr/share/doc/elementary-xfce-icon-theme/copyright")
ELEMENTARY_ICONS = Path("/usr/share/icons/elementary-xfce")


@pytest.mark.skipif(
    not (ELEMENTARY.is_file() and (ELEMENTARY_ICONS / "index.theme").is_file()),
    reason="elementary-xfce-icon-theme is not installed",
)
def test_the_real_emblem_readonly_is_cc_by_sa_2_0() -> None:
    """The case of the issue: Debian's file says GPL-2+ for *, CC-BY-SA-2.0 for this icon."""
    from dmlbench.data import icons

    theme = icon_themes.BY_FOLDER["elementary-xfce"]
    found = icons.theme_icons(theme.folder, ELEMENTARY_ICONS)
    for name in ("emblem-readonly", "emblem-unreadable"):
        licence, holders = icon_themes.icon_licence(theme, found[name], ELEMENTARY_ICONS)
        assert licence == "CC-BY-SA-2.0" and "Lapo Calamandrei" in holders, name
    assert icon_themes.icon_licence(theme, found["go-next"], ELEMENTARY_ICONS)[0] == "GPL-2+"
    assert icon_themes.package_licence(theme.package) == "GPL-2+"


DOC = Path("/usr/share/doc")
# Per theme: (an icon name, its licence read per file, the theme's licence in sources.yaml).
# Yaru's art is CC-BY-SA-4.0 in a GPL-3.0+ package; mate's and suru's copyright files have no
# "Files: *" (their package default is unknown, their art's stanza is not); Paper's builder
# has a stanza of its own.
NEW_THEMES = {
    "Papirus": ("accessories-calculator", "GPL-3", "GPL-3"),
    "Numix": ("applications-games", "GPL-3+", "GPL-3+"),
    "Faenza": ("go-next", "GPL-3+", "GPL-3+"),
    "gnome": ("go-next", "GPL-2+", "GPL-2+"),
    "mate": ("go-next", "LGPL-3+ or CC-BY-SA", "LGPL-3+ or CC-BY-SA"),
    "Yaru": ("folder-music", "CC-BY-SA-4.0", "CC-BY-SA-4.0"),
    "Paper": ("builder", "CC-BY-SA-4.0", "CC-BY-SA-3.0"),
    "suru": ("folder-music", "CC-BY-SA-3.0", "CC-BY-SA-3.0"),
    "Moka": ("accessories-calculator", "CC-BY-SA-4.0 or GPL-3+", "CC-BY-SA-4.0 or GPL-3+"),
    "elementary": ("go-next", "GPL-3.0-or-later", "GPL-3.0-or-later"),
}


@pytest.mark.parametrize("folder", list(NEW_THEMES))
def test_the_new_themes_get_their_licences_from_their_copyright_files(folder: str) -> None:
    """The ten themes of issue #47, read as the five are: one icon's own licence, the theme's,
    and no icon of a sample without a licence."""
    from dmlbench.data import icons

    theme = icon_themes.BY_FOLDER[folder]
    root = Path("/usr/share/icons") / folder
    if not ((root / "index.theme").is_file() and (DOC / theme.package / "copyright").is_file()):
        pytest.skip(f"{theme.package} is not installed")
    name, licence, default = NEW_THEMES[folder]
    found = icons.theme_icons(folder, root)
    assert icon_themes.icon_licence(theme, found[name], root)[0] == licence
    assert icon_themes.theme_licence(theme) == default
    sample = sorted(found)[:: max(1, len(found) // 50)]
    assert all(icon_themes.icon_licence(theme, found[n], root)[0] != "unknown" for n in sample)


def test_the_five_themes_licence_is_their_package_default() -> None:
    """sources.yaml of the committed boards' set records each theme's licence; for the five,
    the stanza of their files is the package's ``Files: *``, so those bytes (hashed into the
    data fingerprint) did not move when the theme's licence replaced the package default."""
    for folder in icon_themes.DEFAULT_THEMES:
        theme = icon_themes.BY_FOLDER[folder]
        if not (DOC / theme.package / "copyright").is_file():
            pytest.skip(f"{theme.package} is not installed")
        assert icon_themes.theme_licence(theme) == icon_themes.package_licence(theme.package)
        assert icon_themes.package_licence(theme.package) != "unknown"


def test_the_glyphs_fonts_licences_are_read_from_their_licence_files() -> None:
    rows = {r["family"].split()[0]: r for r in glyphs.font_licences()}
    assert rows["DejaVu"]["licence"].startswith("Bitstream-Vera")
    assert rows["STIXGeneral"]["licence"] == "OFL-1.1"
    files = [f for r in rows.values() for f in r["files"]]
    assert sorted(files) == sorted(glyphs.FONT_FILES)  # every rendered font has a licence


def test_an_unrecognised_font_licence_is_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "LICENSE_DEJAVU").write_text("some other terms", encoding="utf-8")
    monkeypatch.setattr(glyphs, "font_dir", lambda: tmp_path)
    rows = glyphs.font_licences()
    assert [r["licence"] for r in rows] == ["unknown", "unknown"]  # STIX's file is absent


def committed_fingerprint(board: str) -> str:
    """The data fingerprint the committed board's records carry."""
    folder = Path(__file__).resolve().parents[2] / "results" / "leaderboard" / board
    record = next(folder.rglob("*-seed0-final.json"))
    return str(json.loads(record.read_text(encoding="utf-8"))["data_fingerprint"])


@pytest.mark.skipif(
    not all((Path("/usr/share/icons") / t / "index.theme").is_file() for t in
            ("Adwaita", "Tango", "oxygen", "breeze", "elementary-xfce")),
    reason="the Debian icon themes are not installed",
)  # fmt: skip
def test_icons_licences_are_recorded_without_moving_the_fingerprint(tmp_path: Path) -> None:
    """licences.yaml is written beside sources.yaml (whose bytes the fingerprint hashes, and
    whose ``licence`` stays the package default): the committed board's fingerprint holds."""
    pytest.importorskip("resvg_py")
    from dmlbench.data import load_data
    from dmlbench.protocol import load_protocol

    data = load_data(load_protocol("icons-mini"))
    assert data.fingerprint == committed_fingerprint("icons-mini")
    record = yaml.safe_load(Path(data.info["licences"]).read_text(encoding="utf-8"))
    images = record["images"]
    assert images["images/emblem-readonly/elementary-xfce.png"]["licence"] == "CC-BY-SA-2.0"
    assert images["images/go-next/elementary-xfce.png"]["licence"] == "GPL-2+"
    sources = yaml.safe_load(Path(data.info["sources"]).read_text(encoding="utf-8"))
    by_theme = {s["name"]: s["licence"] for s in sources["sources"]}
    assert by_theme["elementary-xfce"] == "GPL-2+"  # unchanged bytes: the package default


def test_emoji_licences_are_recorded_without_moving_the_fingerprint() -> None:
    """As for icons: the twemoji row of licences.yaml names the art (CC-BY-4.0), and the
    committed emoji-mini board's fingerprint holds."""
    from dmlbench.data import load_data
    from dmlbench.errors import DataError
    from dmlbench.protocol import load_protocol

    try:
        data = load_data(load_protocol("emoji-mini"))
    except DataError as err:  # a source package missing: the emoji tests say which
        pytest.skip(str(err))
    assert data.fingerprint == committed_fingerprint("emoji-mini")
    record = yaml.safe_load(Path(data.info["licences"]).read_text(encoding="utf-8"))
    assert {s["name"]: s["licence"] for s in record["sources"]}["twemoji"] == "CC-BY-4.0"


def test_a_package_version_is_dpkg_s_and_unknown_without_the_package() -> None:
    """Versions key the caches of data drawn from packages: dpkg's own answer, or a word."""
    import subprocess

    dpkg = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "dpkg"], capture_output=True)
    if dpkg.returncode != 0:
        pytest.skip("no dpkg here")
    assert licences.package_version("dpkg") == dpkg.stdout.decode().strip() != "unknown"
    assert licences.package_version("no-such-package-dmlbench") == "unknown"
