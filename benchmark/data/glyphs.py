"""glyphs: a fine-grained, many-class image set rendered from matplotlib's own fonts.

A class is one Unicode letter; an instance is that letter rendered in one of the 16 fonts that
ship in ``matplotlib/mpl-data/fonts/ttf`` (DejaVu Sans, Sans Mono and Serif, STIXGeneral, four
styles each), with a seeded random rotation, scale, translation, stroke thickness and noise.
It stands in for CUB/Omniglot: learnable in seconds on a CPU, and close enough between methods
that seeds and confidence intervals matter.

Classes are the letters every font has, in code point order, with homoglyphs removed (Latin
``A``, Greek ``Α`` and Cyrillic ``А`` are the same drawing: keeping all three would put
identical images in different classes). ``num_classes`` letters are taken evenly spaced over
that list; the first half (by code point) are the training classes, the second half the test
classes, so the split is zero-shot like CUB's.

Every image depends only on (seed, code point, font, instance), so the data set is the same on
every machine that has the same fonts; the fingerprint (a hash of the arrays) proves it.

The fonts keep their licences (:func:`font_licences`, read from the files matplotlib ships
beside them): DejaVu is under the Bitstream Vera licence (its own changes public domain),
STIXGeneral under the SIL Open Font License 1.1.
"""

from __future__ import annotations

import hashlib
import logging
import unicodedata
from functools import lru_cache, partial
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from dmlbench.data.about import About
from dmlbench.data.base import (
    DATASETS,
    ArrayImages,
    DatasetSource,
    DataSplits,
    Split,
    fingerprint_arrays,
)
from dmlbench.data.letters import clean_drawing, render_letter
from dmlbench.data.npz_cache import load_or_rebuild
from dmlbench.protocol import MAX_SEED, Bool, FrozenModel, Int

log = logging.getLogger(__name__)

GENERATOR_VERSION = 1
FONT_FILES = tuple(
    f"{family}{style}.ttf"
    for family, styles in (
        ("DejaVuSans", ("", "-Bold", "-Oblique", "-BoldOblique")),
        ("DejaVuSansMono", ("", "-Bold", "-Oblique", "-BoldOblique")),
        ("DejaVuSerif", ("", "-Bold", "-Italic", "-BoldItalic")),
        ("STIXGeneral", ("", "Bol", "Italic", "BolIta")),
    )
    for style in styles
)
# The two font families rendered, with the licence file matplotlib ships beside them (the
# copies rendered are matplotlib's, so their licences are read there; Debian's
# fonts-dejavu-core says the same, "bitstream-vera") and the marker that identifies each text.
FONT_FAMILIES = (
    {
        "family": "DejaVu (Sans, Sans Mono, Serif)",
        "prefix": "DejaVu",
        "author": "Bitstream, Inc. (Vera); DejaVu changes public domain; Arev glyphs Tavmjong Bah",
        "url": "https://dejavu-fonts.github.io",
        "licence_file": "LICENSE_DEJAVU",
    },
    {
        "family": "STIXGeneral",
        "prefix": "STIX",
        "author": "STI Pub Companies; portions MicroPress, Inc. and Elsevier, Inc.",
        "url": "https://www.stixfonts.org",
        "licence_file": "LICENSE_STIX",
    },
)
KNOWN_LICENCES = (  # (text the licence file holds, its name)
    ("SIL Open Font License, Version 1.1", "OFL-1.1"),
    ("Bitstream Vera Fonts Copyright", "Bitstream-Vera (DejaVu changes: public domain; Arev)"),
)


class GlyphsParams(FrozenModel):
    image_size: Int = Field(32, ge=16, le=128)
    num_classes: Int = Field(400, ge=4, le=100_000)
    instances_per_font: Int = Field(1, ge=1, le=16)
    seed: Int = Field(0, ge=0, le=MAX_SEED)
    distinct: Bool = Field(
        False,
        description="drop every letter drawn like an earlier one in any font at image_size "
        "(what the audit checks); false: the byte-identical 48-px filter of v1-v4 protocols",
    )


def font_dir() -> Path:
    import matplotlib

    return Path(matplotlib.get_data_path()) / "fonts" / "ttf"


def font_licences() -> list[dict[str, Any]]:
    """Each rendered font family with its licence, read from the licence file beside the
    fonts (``unknown`` when the text is not one this module recognises): the images are
    renderings of these fonts, so their licences travel with the data set's record."""
    rows = []
    for family in FONT_FAMILIES:
        path = font_dir() / family["licence_file"]
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            text = ""
        licence = next((name for mark, name in KNOWN_LICENCES if mark in text), "unknown")
        rows.append(
            {
                "family": family["family"],
                "files": [f for f in FONT_FILES if f.startswith(family["prefix"])],
                "licence": licence,
                "author": family["author"],
                "url": family["url"],
                "licence_file": f"matplotlib/mpl-data/fonts/ttf/{family['licence_file']}",
            }
        )
    return rows


@lru_cache(maxsize=1)
@lru_cache(maxsize=8)
def available_letters(distinct_at: int | None = None) -> tuple[str, ...]:
    """Letters every font draws, look-alikes removed, in code point order.

    Without ``distinct_at`` (protocols up to glyphs-mini v4), a letter is dropped when its
    48-px render in three of the fonts is byte-identical to an earlier letter's: that kept
    230 test images with an identical drawing in another class (Greek Β, Cyrillic В). With
    ``distinct_at`` (the image size), a letter is dropped when its drawing in *any* font is
    within the audit's near-identity (:data:`dmlbench.data.audit.NEAR_RMS`) of an earlier kept
    letter's drawing in any font, at that size: what ``dmlbench data audit`` checks.
    """
    from matplotlib.ft2font import FT2Font

    common: set[int] | None = None
    for name in FONT_FILES:
        codes = set(FT2Font(str(font_dir() / name)).get_charmap())
        common = codes if common is None else common & codes
    assert common is not None
    letters = [chr(c) for c in sorted(common) if unicodedata.category(chr(c)).startswith("L")]
    letters = [ch for ch in letters if any(_clean_render(ch, 0))]
    if distinct_at is not None:
        return _distinct(letters, distinct_at)
    seen: set[bytes] = set()
    kept = []
    for ch in letters:
        key = b"".join(_clean_render(ch, f) for f in (0, 8, 12))
        if key in seen:
            continue
        seen.add(key)
        kept.append(ch)
    return tuple(kept)


def _distinct(letters: list[str], size: int) -> tuple[str, ...]:
    """``letters`` (in order) whose drawings at ``size``, in every font, are all farther than
    the audit's near-identity from every earlier kept letter's drawings in every font."""
    from dmlbench.data.audit import lookalikes

    kept: list[str] = []
    rows = np.empty((0, size * size), dtype=np.float32)
    for ch in letters:
        drawn = np.stack([drawing(ch, f, size).reshape(-1) for f in range(len(FONT_FILES))])
        drawn = drawn.astype(np.float32) / 255.0
        if next(lookalikes(drawn, rows, same_split=False), None) is None:
            kept.append(ch)
            rows = np.concatenate([rows, drawn])
    return tuple(kept)


def _clean_render(ch: str, font_index: int) -> bytes:
    from PIL import Image, ImageDraw

    img = Image.new("L", (48, 48), 0)
    ImageDraw.Draw(img).text((24, 24), ch, fill=255, font=_font(font_index, 32), anchor="mm")
    return img.tobytes()


@lru_cache(maxsize=512)
def _font(index: int, size: int) -> Any:
    from PIL import ImageFont

    return ImageFont.truetype(str(font_dir() / FONT_FILES[index]), size)


def render(ch: str, font_index: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """One randomly transformed instance of ``ch`` in font ``font_index`` (:mod:`letters`)."""
    return render_letter(ch, partial(_font, font_index), size, rng)


def drawing(ch: str, font_index: int, size: int) -> np.ndarray:
    """``ch`` in one font at ``size`` px before its random transform: what two classes share
    when a font draws them alike (:mod:`dmlbench.data.audit`)."""
    return clean_drawing(ch, partial(_font, font_index), size)


def select_classes(num_classes: int, distinct_at: int | None = None) -> list[str]:
    letters = available_letters(distinct_at)
    if num_classes > len(letters):
        from dmlbench.errors import DataError

        raise DataError(
            f"glyphs: num_classes={num_classes} but the fonts share {len(letters)} letters"
        )
    picks = np.linspace(0, len(letters) - 1, num_classes).round().astype(int)
    return [letters[i] for i in picks]


def _distinct_at(params: GlyphsParams) -> int | None:
    return params.image_size if params.distinct else None


def generate(params: GlyphsParams) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """All images (N, 1, S, S) uint8 and class ids (N,), classes in code point order."""
    classes = select_classes(params.num_classes, _distinct_at(params))
    n = len(classes) * len(FONT_FILES) * params.instances_per_font
    images = np.empty((n, 1, params.image_size, params.image_size), dtype=np.uint8)
    labels = np.empty(n, dtype=np.int64)
    i = 0
    for label, ch in enumerate(classes):
        for f in range(len(FONT_FILES)):
            for k in range(params.instances_per_font):
                rng = np.random.default_rng([params.seed, ord(ch), f, k, GENERATOR_VERSION])
                images[i, 0] = render(ch, f, params.image_size, rng)
                labels[i] = label
                i += 1
    return images, labels, classes


def _cache_key(params: GlyphsParams) -> str:
    import matplotlib
    import PIL

    versions = f"v{GENERATOR_VERSION}|mpl{matplotlib.__version__}|pil{PIL.__version__}"
    text = f"{params.model_dump_json()}|{versions}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def load_or_generate(params: GlyphsParams, cache: Path) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Generated arrays, from ``cache`` when present (a damaged cache file is regenerated)."""
    path = cache / "glyphs" / f"glyphs-{_cache_key(params)}.npz"
    size = params.image_size

    def build() -> tuple[np.ndarray, ...]:
        images, labels, classes = generate(params)
        return images, labels, np.array(classes)

    def plausible(arrays: tuple[np.ndarray, ...]) -> bool:
        images, labels, classes = arrays
        n = len(classes) * len(FONT_FILES) * params.instances_per_font
        return (
            images.dtype == np.uint8
            and images.shape == (n, 1, size, size)
            and labels.shape == (n,)
            and labels.dtype == np.int64
            and classes.shape == (params.num_classes,)
            and classes.dtype.kind == "U"
            and bool(((labels >= 0) & (labels < params.num_classes)).all())
        )

    images, labels, classes = load_or_rebuild(
        path, ("images", "labels", "classes"), build, plausible, "glyphs cache"
    )
    return images, labels, [str(c) for c in classes]


@DATASETS.register("glyphs")
class Glyphs(DatasetSource):
    Params = GlyphsParams
    reads_root = False
    description = "letters rendered in matplotlib's 16 fonts (embedded, generated)"
    about = About(
        source="the fonts matplotlib ships, rendered in memory",
        licence="the fonts' own licences, read from the files beside them (font_licences)",
        splits="by letter: the test letters are classes never trained on",
    )

    def load(self, params: BaseModel, root: Path | None, cache_dir: Path) -> DataSplits:
        assert isinstance(params, GlyphsParams)
        images, labels, classes = load_or_generate(params, cache_dir)
        n_train = len(classes) // 2
        train = labels < n_train
        return DataSplits(
            train=Split(ArrayImages(images[train]), labels[train]),
            test=Split(ArrayImages(images[~train]), labels[~train] - n_train),
            fingerprint=fingerprint_arrays(images, labels, extra="glyphs"),
            info={
                "train_classes": n_train,
                "test_classes": len(classes) - n_train,
                "first_test_class": classes[n_train],
                "fonts": font_licences(),  # not in the fingerprint (the arrays are)
            },
        )

    def drawings(self, params: BaseModel, splits: DataSplits) -> dict[str, np.ndarray]:
        """Each image's drawing before its random transform, per split, in the splits' order
        (:func:`generate`'s: class, then font, then instance), on [0, 1]."""
        assert isinstance(params, GlyphsParams)
        classes = select_classes(params.num_classes, _distinct_at(params))
        per_class = [
            drawing(ch, f, params.image_size).reshape(-1) / 255.0
            for ch in classes
            for f in range(len(FONT_FILES))
            for _ in range(params.instances_per_font)
        ]
        rows = np.stack(per_class).astype(np.float32)
        n_train = len(splits.train)
        return {"train": rows[:n_train], "test": rows[n_train:]}
