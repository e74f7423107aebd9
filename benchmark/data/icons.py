"""Icons: one class per freedesktop icon name, one image per icon theme (issues #32, #47).

The task is cross-style retrieval: ``go-next`` drawn by Adwaita, Tango, Oxygen, Breeze and
elementary-xfce are five images of one class, and a query must find the other drawings of its
name. The themes come from Debian packages (``apt-get install ...``,
:data:`dmlbench.data.icon_themes.THEMES`, which also reads their licences); nothing is
downloaded. ``data.params.themes`` chooses the theme set (default: the five above, the
committed boards'; fifteen are known). ``prepare`` renders them into the bring-your-own
layout of :mod:`dmlbench.data.custom` (``images/<name>/<theme>.png``, ``index.csv`` with a
``group`` column, ``sources.yaml``); the registered data set ``icons`` prepares each theme
set on first use under the cache, in a folder of its own, and splits by group
(:data:`TEST_GROUPS`).

Rules (why each exists is in docs/datasets.md, section "icons"):

- the icon of a theme is its file in the smallest directory of ``index.theme`` whose nominal
  size is 48 px or more (scale 1): a raster is then only ever scaled down, never blown up
  from a 16 or 32 px drawing; SVG-only art (Breeze, Tango's 48 px) is rasterised at that
  nominal size by resvg, as the theme's PNGs were;
- symlinks and ``*-symbolic`` icons (monochrome stand-ins) are not images of their own; two
  names with identical pixels in one theme keep the image under one name only;
- an image that is (near-)identical to an earlier theme's image of the same class is dropped,
  as a positive pair that is a copy teaches nothing: the order of the theme set decides which
  copy stays (gnome-icon-theme's full-colour art is largely Adwaita's, elementary's
  elementary-xfce's, and Paper, Moka and Faenza share drawings);
- a class is a name drawn by at least :data:`MIN_THEMES` of the kept themes; its group is the
  freedesktop context (``actions``, ``apps``, ...) most of its themes file it under;
- every image goes through one pipeline, so no theme can be told apart by format: crop to the
  alpha bounding box, scale the longer side to :data:`EXTENT` px with one filter, centre on a
  :data:`SIZE` px canvas, composite on one background. No flips: ``go-next`` mirrored is
  ``go-previous``.
"""

from __future__ import annotations

import configparser
import hashlib
import io
import os
import shutil
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image
from pydantic import Field, field_validator

from dmlbench.data.about import About
from dmlbench.data.base import DATASETS
from dmlbench.data.icon_themes import (
    BY_FOLDER,
    DEFAULT_THEMES,
    Icon,
    check_themes,
    chosen,
    icon_licence,
    theme_licence,
)
from dmlbench.data.licences import package_version
from dmlbench.data.rendered import (
    GroupSplitParams,
    RenderedImages,
    prepared_under,
    write_licences,
)
from dmlbench.errors import DataError

SIZE = 64  # stored canvas, px
EXTENT = 48  # the longer side of every icon's alpha bounding box on the canvas, px
MIN_SOURCE = 48  # the smallest nominal size read (rasters are only scaled down)
MARGIN = 4  # px of surround the filter reads around the box (Lanczos reaches 3)
ALPHA_CUT = 32  # alpha at or above this is art; fainter shadows and glows do not set the box
BACKGROUND = (255, 255, 255)
FILTER = Image.Resampling.LANCZOS
MIN_THEMES = 3
NEAR = 2.0  # mean |difference| (of 255) under which two rendered images are one drawing
PIPELINE = 2  # bump when the rendering changes: it keys the cache

# Context of index.theme -> the freedesktop folder name written as the group. Contexts that
# say nothing of the icon (Adwaita's "Legacy", "UI") do not vote.
CONTEXTS = {
    "Actions": "actions",
    "Animations": "animations",
    "Applications": "apps",
    "Categories": "categories",
    "Devices": "devices",
    "Emblems": "emblems",
    "Emotes": "emotes",
    "International": "intl",
    "MimeTypes": "mimetypes",
    "Places": "places",
    "Status": "status",
}


# The fixed test side of the ``icons`` data set: whole contexts, about half of the classes.
TEST_GROUPS = ("actions", "devices", "emotes", "categories")


def data_dirs() -> list[Path]:
    """``$XDG_DATA_DIRS``: where the icon-theme spec looks (default /usr/local/share:/usr/share)."""
    dirs = os.environ.get("XDG_DATA_DIRS") or "/usr/local/share:/usr/share"
    return [Path(d) for d in dirs.split(":") if d]


def theme_folders(themes: tuple[str, ...] = DEFAULT_THEMES) -> dict[str, Path]:
    """Each chosen theme's folder, in the given order; a missing one is one line naming the
    packages to install."""
    found: dict[str, Path] = {}
    for theme in chosen(themes):
        for d in data_dirs():
            if (d / "icons" / theme.folder / "index.theme").is_file():
                found[theme.folder] = d / "icons" / theme.folder
                break
    missing = [t for t in chosen(themes) if t.folder not in found]
    if missing:
        where = ":".join(str(d / "icons") for d in data_dirs())
        raise DataError(
            f"icons: icon theme {', '.join(t.folder for t in missing)} not found in {where}; "
            f"install it: apt-get install {' '.join(t.package for t in missing)}"
        )
    return found


def theme_icons(theme: str, folder: Path) -> dict[str, Icon]:
    """Every icon name of a theme, from the smallest directory of nominal size >= 48 px."""
    index = configparser.ConfigParser(interpolation=None, strict=False)
    index.optionxform = str  # type: ignore[assignment,method-assign]
    index.read(folder / "index.theme", encoding="utf-8")
    dirs = []
    for d in index.get("Icon Theme", "Directories", fallback="").split(","):
        d = d.strip()
        if d in index and index[d].get("Scale", "1") == "1" and "symbolic" not in d:
            size = int(index[d].get("Size", "0"))
            if size >= MIN_SOURCE:
                dirs.append((size, d, index[d].get("Context", "")))
    icons: dict[str, Icon] = {}
    for size, d, context in sorted(dirs):
        for path in sorted((folder / d).glob("*")):
            name, suffix = path.stem, path.suffix
            if suffix not in (".png", ".svg") or "symbolic" in name or path.is_symlink():
                continue
            if name not in icons:  # smallest size first; .png sorts before .svg
                icons[name] = Icon(theme, name, path, size, context)
    return icons


def source_image(icon: Icon) -> Image.Image:
    """The icon as an RGBA raster at its nominal size (SVGs rasterised by resvg)."""
    if icon.path.suffix == ".png":
        with Image.open(icon.path) as im:
            return im.convert("RGBA")
    png = resvg().svg_to_bytes(
        svg_path=str(icon.path), width=icon.size, height=icon.size, skip_system_fonts=True
    )
    return Image.open(io.BytesIO(png)).convert("RGBA")


def resvg() -> Any:
    """The resvg binding, or one line naming its install command."""
    try:
        import resvg_py
    except ImportError:
        raise DataError(
            "icons: rasterising SVG themes needs resvg-py: pip install resvg-py"
        ) from None
    return resvg_py


def render(image: Image.Image) -> Image.Image:
    """The one pipeline: alpha box, longer side to EXTENT (one filter), centred on SIZE px.

    The filter reads MARGIN px of transparent surround on every side: resampling a tight crop
    would clamp at its border and leave the outline unfiltered (crisp where every other edge
    is smoothed), a mark of the themes whose art touches its box in straight lines.

    Returns the RGBA canvas (transparent around the art); :func:`flatten` composites it.
    """
    alpha = np.asarray(image.getchannel("A"))
    ys, xs = np.nonzero(alpha >= ALPHA_CUT)
    if not len(xs):
        raise ValueError("no opaque pixel")
    w, h = int(xs.max() - xs.min() + 1), int(ys.max() - ys.min() + 1)
    scale = EXTENT / max(w, h)
    out = (max(1, round(w * scale)) + 2 * MARGIN, max(1, round(h * scale)) + 2 * MARGIN)
    pad = int(np.ceil((MARGIN + 4) / min(scale, 1.0)))  # beyond the filter's reach
    padded = Image.new("RGBA", (image.width + 2 * pad, image.height + 2 * pad), (0, 0, 0, 0))
    padded.paste(image, (pad, pad))
    cx, cy = pad + (xs.min() + xs.max() + 1) / 2, pad + (ys.min() + ys.max() + 1) / 2
    half_w, half_h = out[0] / (2 * scale), out[1] / (2 * scale)
    box = (cx - half_w, cy - half_h, cx + half_w, cy + half_h)
    art = padded.resize(out, FILTER, box=box)  # Pillow resamples RGBA premultiplied
    canvas = Image.new("RGBA", (SIZE, SIZE), (0, 0, 0, 0))
    canvas.paste(art, ((SIZE - out[0]) // 2, (SIZE - out[1]) // 2))
    return canvas


def flatten(canvas: Image.Image) -> Image.Image:
    """The canvas on the background, as stored (RGB: no alpha left to tell sources apart)."""
    out = Image.new("RGBA", canvas.size, (*BACKGROUND, 255))
    out.alpha_composite(canvas)
    return out.convert("RGB")


@dataclass
class IconSet:
    """The rendered classes: per class name its group and (theme, image) list."""

    images: dict[str, list[tuple[str, Image.Image]]]
    groups: dict[str, str]


def collect(folders: dict[str, Path], classes: tuple[str, ...] | None = None) -> IconSet:
    """Apply the rules of the module docstring to the themes of ``folders``, in its order (an
    earlier theme's drawing is kept); ``classes`` limits the names (tests)."""
    per_theme = {t: theme_icons(t, folder) for t, folder in folders.items()}
    count = Counter(n for icons in per_theme.values() for n in icons)
    names = sorted(n for n, c in count.items() if c >= MIN_THEMES)
    if classes is not None:
        names = [n for n in names if n in set(classes)]
    images: dict[str, list[tuple[str, Image.Image]]] = defaultdict(list)
    for t in folders:
        seen: dict[bytes, str] = {}
        # a name drawn by more themes keeps an aliased image (it is likelier to be a class)
        for name in sorted(names, key=lambda n: (-count[n], n)):
            icon = per_theme[t].get(name)
            if icon is None:
                continue
            src = source_image(icon)
            digest = hashlib.sha256(src.tobytes() + str(src.size).encode()).digest()
            if seen.setdefault(digest, name) != name:
                continue  # an alias of seen[digest] in this theme
            flat = flatten(render(src))
            if not any(near(flat, other) for _, other in images[name]):
                images[name].append((t, flat))
    kept = {n: images[n] for n in sorted(images) if len(images[n]) >= MIN_THEMES}
    groups = {n: group_of([per_theme[t][n].context for t, _ in kept[n]]) for n in kept}
    return IconSet(kept, groups)


def near(a: Image.Image, b: Image.Image) -> bool:
    diff = np.abs(np.asarray(a, dtype=np.int16) - np.asarray(b, dtype=np.int16))
    return float(diff.mean()) < NEAR


def group_of(contexts: list[str]) -> str:
    """The context most of a class's themes use (the first theme's on a tie)."""
    votes = [CONTEXTS[c] for c in contexts if c in CONTEXTS]
    if not votes:
        return "other"
    counts = Counter(votes)
    return max(votes, key=lambda v: counts[v])  # max keeps the first of equal counts


def prepared_themes(root: Path) -> tuple[str, ...]:
    """The theme set a prepared folder was rendered from, in its order (``sources.yaml``)."""
    import yaml

    meta = yaml.safe_load((root / "sources.yaml").read_text(encoding="utf-8"))
    return tuple(str(s["name"]) for s in meta["sources"])


def licences(root: Path) -> dict[str, Any]:
    """The licence record of a prepared folder (``licences.yaml``): per theme its licence,
    author and home; per image the licence of the theme file it was rendered from.

    Written beside ``sources.yaml``, not into it: the data fingerprint hashes that file's
    bytes, and the committed boards' fingerprints must not move with a licence's wording.
    """
    import csv

    themes = chosen(prepared_themes(root))
    folders = theme_folders(tuple(t.folder for t in themes))
    icons = {t.folder: theme_icons(t.folder, folders[t.folder]) for t in themes}
    images: dict[str, dict[str, str]] = {}
    with (root / "index.csv").open(newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            theme = BY_FOLDER[Path(row["path"]).stem]
            icon = icons[theme.folder][row["label"]]
            licence, holders = icon_licence(theme, icon, folders[theme.folder])
            images[row["path"]] = {
                "licence": licence,
                "file": f"{theme.folder}/{icon.path.relative_to(folders[theme.folder])}",
                "copyright": holders,
            }
    rows = [
        {
            "name": t.folder,
            "package": t.package,
            "licence": theme_licence(t),
            "author": t.author,
            "url": t.url,
            "copyright_file": f"/usr/share/doc/{t.package}/copyright",
        }
        for t in themes
    ]
    return {"sources": rows, "images": images}


def sources(
    counts: dict[str, int] | None = None, themes: tuple[str, ...] = DEFAULT_THEMES
) -> list[dict[str, Any]]:
    """One ``sources.yaml`` entry per chosen theme (images: how many it gives the set)."""
    rows = []
    for t in chosen(themes):
        row: dict[str, Any] = {
            "name": t.folder,
            "package": t.package,
            "version": package_version(t.package),
            "licence": theme_licence(t),
            "url": t.url,
        }
        if counts is not None:
            row["images"] = counts.get(t.folder, 0)
        rows.append(row)
    return rows


def settings() -> dict[str, Any]:
    """What the rendered bytes depend on besides the theme packages: it keys the cache."""
    return {
        "pipeline": PIPELINE,
        "size": SIZE,
        "extent": EXTENT,
        "min_source": MIN_SOURCE,
        "alpha_cut": ALPHA_CUT,
        "margin": MARGIN,
        "background": list(BACKGROUND),
        "filter": FILTER.name,
        "min_themes": MIN_THEMES,
        "near": NEAR,
        "pillow": Image.__version__,
        "resvg_py": getattr(resvg(), "__version__", "unknown"),
    }


def prepare(
    dest: Path, classes: tuple[str, ...] | None = None, themes: tuple[str, ...] = DEFAULT_THEMES
) -> Path:
    """Render the chosen themes into ``dest`` (replaced whole, atomically); returns ``dest``.

    Bytes are deterministic: PNGs without metadata, files and rows in sorted order.
    """
    import yaml

    folders = theme_folders(themes)
    resvg()  # fail before rendering half of the themes
    icons = collect(folders, classes)
    if not icons.images:
        raise DataError(f"icons: no class is drawn by {MIN_THEMES} of the themes")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        rows = ["path,label,group"]
        per_theme: Counter[str] = Counter()
        for name, images in icons.images.items():
            (tmp / "images" / name).mkdir(parents=True)
            for theme, image in sorted(images, key=lambda ti: ti[0]):
                rel = f"images/{name}/{theme}.png"
                image.save(tmp / rel, format="PNG")
                rows.append(f"{rel},{name},{icons.groups[name]}")
                per_theme[theme] += 1
        (tmp / "index.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
        meta = {"sources": sources(dict(per_theme), themes), "settings": settings()}
        (tmp / "sources.yaml").write_text(yaml.safe_dump(meta, sort_keys=False), "utf-8")
        write_licences(tmp, licences(tmp))
        old = dest.with_name(f".{dest.name}.old")
        if dest.exists():
            os.replace(dest, old)
        os.replace(tmp, dest)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def prepared_root(cache: Path, themes: tuple[str, ...] = DEFAULT_THEMES) -> Path:
    """The prepared set of the theme set ``themes`` under ``cache/icons``, rendered on first
    use, keyed by the chosen theme packages' versions, :func:`settings` and the chosen themes'
    folders (in their order): an upgraded theme, a changed pipeline or another theme set is a
    new folder, never a stale one. (The default set's key material is what it was before the
    theme set was a parameter, so its folder, and the committed boards' data, stay put.)"""
    folders = theme_folders(themes)
    versions = [(s["package"], s["version"]) for s in sources(themes=themes)]
    key = repr((versions, settings(), folders))
    return prepared_under(cache / "icons", key, lambda dest: prepare(dest, themes=themes))


class IconsParams(GroupSplitParams):
    """``data.params`` of ``icons``: the groups (freedesktop contexts) held out for test, and
    the icon themes drawn from, in the order that keeps a drawing (of two near-identical
    drawings of a class, the earlier theme's)."""

    test_groups: tuple[str, ...] = Field(TEST_GROUPS, min_length=1)
    themes: tuple[str, ...] = Field(
        DEFAULT_THEMES,
        min_length=MIN_THEMES,
        description="icon theme folders (dmlbench.data.icon_themes.THEMES), in the order "
        "that keeps a drawing; default: the five of the committed boards",
    )

    @field_validator("themes")
    @classmethod
    def _known_themes(cls, themes: tuple[str, ...]) -> tuple[str, ...]:
        return check_themes(themes)


@DATASETS.register("icons")
class Icons(RenderedImages):
    """Freedesktop icon names across a set of themes (``themes``: five by default, fifteen
    known); each set prepared on first use, split by context."""

    Params = IconsParams
    name = "icons"
    description = "icon names across 5-15 freedesktop themes (Debian packages), split by context"
    about = About(
        source="5 (default) to 15 freedesktop icon themes installed as Debian packages, rendered",
        licence="each icon's licence from its package's copyright file, recorded per image in "
        "the prepared folder's licences.yaml (dmlbench.data.licences)",
        splits="by freedesktop context",
        prepare="render",
        figure=True,
    )
    mirrored = "go-next is go-previous"

    def prepared_root(self, cache_dir: Path, params: GroupSplitParams) -> Path:
        assert isinstance(params, IconsParams)
        return prepared_root(cache_dir, params.themes)

    def licences(self, root: Path) -> dict[str, Any]:
        return licences(root)


FIGURE_CLASSES = (
    "go-next",
    "accessories-calculator",
    "camera-photo",
    "dialog-warning",
    "folder-open",
    "printer",
    "utilities-terminal",
    "x-office-document",
)
FIGURE_SOURCES = DEFAULT_THEMES  # the prepared set of the default themes
