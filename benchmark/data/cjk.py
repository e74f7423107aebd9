"""hanzi and hangul: characters drawn by sixteen CJK fonts that Debian packages.

Two fine-grained, many-class sets in the spirit of Omniglot and of handwritten-character
benchmarks (CASIA-HWDB): a class is one character, an instance is that character drawn by one
of sixteen fonts of different designs (Ming/Song, Kai brush, Gothic/Hei, hand-written pens),
with the random transform of :mod:`dmlbench.data.letters`.

- ``hanzi``: CJK unified ideographs (U+4E00-U+9FFF) drawn by Chinese and Japanese fonts.
- ``hangul``: precomposed Hangul syllables (U+AC00-U+D7A3) drawn by Korean fonts.

Classes are taken evenly over the characters every font of the set draws, in code point
order; the first ``train_classes`` train and the rest test. Code point order is radical order
for the ideographs and initial-consonant order for the syllables, so the test classes are
built from components the training classes use, in new combinations: the zero-shot split of
CUB or Omniglot. A character whose drawing in any font is within the audit's near-identity of
a kept character's drawing in any font is skipped for the next code point (the same rule as
glyphs' ``distinct``), so no two classes share a drawing, within or across splits.

Fonts of many designs matter: with few designs, raw pixels find a query's class in another
weight of the same design and no learning is needed. Every image depends only on (seed, code
point, font, instance) and the installed font files; the fingerprint proves it. The fonts keep
their licences (:func:`font_licences`, read from each package's Debian copyright file).
"""

from __future__ import annotations

import hashlib
from functools import lru_cache, partial
from pathlib import Path
from typing import Any, ClassVar

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
from dmlbench.data.licences import DOC_DIR, default_licence, file_stanza, package_stanzas
from dmlbench.data.npz_cache import load_or_rebuild
from dmlbench.errors import DataError
from dmlbench.protocol import MAX_SEED, FrozenModel, Int

GENERATOR_VERSION = 1
_NOTO = "/usr/share/fonts/opentype/noto/"
_TT = "/usr/share/fonts/truetype/"
_OT = "/usr/share/fonts/opentype/"
# (Debian package, font file, face index in a collection, what it is). Noto CJK collections
# hold one face per region: 0 JP, 1 KR, 2 SC.
HANZI_FONTS = (
    ("fonts-noto-cjk", _NOTO + "NotoSansCJK-Regular.ttc", 2, "Noto Sans CJK SC"),
    ("fonts-noto-cjk-extra", _NOTO + "NotoSansCJK-Black.ttc", 2, "Noto Sans CJK SC Black"),
    ("fonts-noto-cjk-extra", _NOTO + "NotoSansCJK-Light.ttc", 0, "Noto Sans CJK JP Light"),
    ("fonts-noto-cjk", _NOTO + "NotoSerifCJK-Regular.ttc", 2, "Noto Serif CJK SC"),
    ("fonts-noto-cjk-extra", _NOTO + "NotoSerifCJK-Black.ttc", 2, "Noto Serif CJK SC Black"),
    ("fonts-noto-cjk-extra", _NOTO + "NotoSerifCJK-ExtraLight.ttc", 0, "Noto Serif CJK JP XLight"),
    ("fonts-arphic-ukai", _TT + "arphic/ukai.ttc", 0, "AR PL UKai CN (Kai brush)"),
    ("fonts-arphic-uming", _TT + "arphic/uming.ttc", 0, "AR PL UMing CN (Ming)"),
    ("fonts-wqy-zenhei", _TT + "wqy/wqy-zenhei.ttc", 0, "WenQuanYi Zen Hei"),
    ("fonts-wqy-microhei", _TT + "wqy/wqy-microhei.ttc", 0, "WenQuanYi Micro Hei"),
    ("fonts-ipafont-gothic", _OT + "ipafont-gothic/ipag.ttf", 0, "IPAGothic"),
    ("fonts-ipafont-mincho", _OT + "ipafont-mincho/ipam.ttf", 0, "IPAMincho"),
    ("fonts-ipaexfont-gothic", _OT + "ipaexfont-gothic/ipaexg.ttf", 0, "IPAexGothic"),
    ("fonts-ipaexfont-mincho", _OT + "ipaexfont-mincho/ipaexm.ttf", 0, "IPAexMincho"),
    ("fonts-vlgothic", _TT + "vlgothic/VL-Gothic-Regular.ttf", 0, "VL Gothic"),
    ("fonts-hanazono", _TT + "hanazono/HanaMinA.ttf", 0, "Hanazono Mincho A"),
)
_UN = _TT + "unfonts-core/"
_NANUM = _TT + "nanum/"
HANGUL_FONTS = (
    ("fonts-noto-cjk", _NOTO + "NotoSansCJK-Regular.ttc", 1, "Noto Sans CJK KR"),
    ("fonts-noto-cjk", _NOTO + "NotoSerifCJK-Regular.ttc", 1, "Noto Serif CJK KR"),
    ("fonts-unfonts-core", _UN + "UnBatang.ttf", 0, "UnBatang"),
    ("fonts-unfonts-core", _UN + "UnDotum.ttf", 0, "UnDotum"),
    ("fonts-unfonts-core", _UN + "UnGraphic.ttf", 0, "UnGraphic"),
    ("fonts-unfonts-core", _UN + "UnGungseo.ttf", 0, "UnGungseo (brush)"),
    ("fonts-unfonts-core", _UN + "UnPilgi.ttf", 0, "UnPilgi (pen)"),
    ("fonts-unfonts-core", _UN + "UnDinaru.ttf", 0, "UnDinaru"),
    ("fonts-nanum", _NANUM + "NanumGothic.ttf", 0, "NanumGothic"),
    ("fonts-nanum", _NANUM + "NanumMyeongjo.ttf", 0, "NanumMyeongjo"),
    ("fonts-nanum", _NANUM + "NanumBarunGothic.ttf", 0, "NanumBarunGothic"),
    ("fonts-nanum-extra", _NANUM + "NanumBarunpenR.ttf", 0, "NanumBarunpen"),
    ("fonts-nanum-extra", _NANUM + "NanumPen.ttf", 0, "Nanum Pen Script"),
    ("fonts-nanum-extra", _NANUM + "NanumBrush.ttf", 0, "Nanum Brush Script"),
    ("fonts-baekmuk", _TT + "baekmuk/batang.ttf", 0, "Baekmuk Batang"),
    ("fonts-baekmuk", _TT + "baekmuk/gulim.ttf", 0, "Baekmuk Gulim"),
)
SETS: dict[str, tuple[tuple[int, int], tuple[tuple[str, str, int, str], ...]]] = {
    "hanzi": ((0x4E00, 0x9FFF), HANZI_FONTS),
    "hangul": ((0xAC00, 0xD7A3), HANGUL_FONTS),
}
# Copyright files that are not machine-readable (DEP-5): the licence named in their text.
_PLAIN_LICENCES = (("ARPHIC PUBLIC LICENSE", "Arphic-1999"),)


class CjkParams(FrozenModel):
    image_size: Int = Field(24, ge=16, le=128)
    num_classes: Int = Field(700, ge=4, le=8000)
    train_classes: Int = Field(200, ge=2, description="the first classes by code point train")
    instances_per_font: Int = Field(1, ge=1, le=16)
    seed: Int = Field(0, ge=0, le=MAX_SEED)


def _fonts(name: str) -> tuple[tuple[str, str, int, str], ...]:
    return SETS[name][1]


def check_installed(name: str) -> None:
    """A :class:`DataError` naming the packages to install when a font file is missing."""
    missing = sorted({pkg for pkg, path, _, _ in _fonts(name) if not Path(path).is_file()})
    if missing:
        raise DataError(
            f"{name}: font files missing; install the Debian packages {' '.join(missing)} "
            f"(apt-get install {' '.join(missing)})"
        )


@lru_cache(maxsize=1024)
def _font(name: str, index: int, size: int) -> Any:
    from PIL import ImageFont

    _, path, face, _ = _fonts(name)[index]
    return ImageFont.truetype(path, size, index=face)


def font_licences(name: str) -> list[dict[str, Any]]:
    """Each font of set ``name`` with its package and licence: the stanza of the package's
    Debian copyright file that matches the font file, else its default; the images are
    renderings of these fonts, so their licences travel with the data set's record."""
    rows = []
    for package, path, face, label in _fonts(name):
        stanzas = package_stanzas(package)
        stanza = file_stanza(stanzas, [Path(path).name])
        licence = stanza.licence if stanza else default_licence(stanzas)
        if licence == "unknown":
            licence = _plain_licence(package)
        rows.append({"font": label, "file": path, "face": face, "package": package,
                     "licence": licence})  # fmt: skip
    return rows


def _plain_licence(package: str) -> str:
    try:
        text = (DOC_DIR / package / "copyright").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "unknown"
    return next((lic for mark, lic in _PLAIN_LICENCES if mark in text.upper()), "unknown")


def common_characters(name: str) -> list[str]:
    """The characters of the set's block that every one of its fonts maps, in code point
    order (the fonts' character maps, read with fontTools); a :class:`DataError` naming the
    packages when a font is missing (everything that draws starts here)."""
    from fontTools.ttLib import TTFont

    check_installed(name)
    (lo, hi), fonts = SETS[name]
    common: set[int] | None = None
    for _, path, face, _ in fonts:
        codes = {c for c in TTFont(path, fontNumber=face, lazy=True).getBestCmap() if lo <= c <= hi}
        common = codes if common is None else common & codes
    return [chr(c) for c in sorted(common or ())]


def drawings_of(name: str, ch: str, size: int) -> np.ndarray:
    """``ch`` in every font of the set, before the random transform: (fonts, size²) on [0, 1]."""
    rows = [clean_drawing(ch, partial(_font, name, f), size) for f in range(len(_fonts(name)))]
    return np.stack(rows).reshape(len(rows), -1).astype(np.float32) / 255.0


def select_classes(name: str, params: CjkParams) -> list[str]:
    """:func:`selection`'s characters."""
    return selection(name, params)[0]


def selection(name: str, params: CjkParams) -> tuple[list[str], np.ndarray]:
    """``num_classes`` characters spread evenly over :func:`common_characters`, with their
    drawings (:func:`drawings_of`, stacked in class order: the audit reads them): at each
    evenly spaced position, the first character from there on that is unused, drawn by every
    font (a font may map a character it draws blank: NanumSquare draws only the 2,350 common
    syllables) and whose drawings are all farther than the audit's near-identity from every
    kept one's."""
    from dmlbench.data.audit import BLANK_STD, lookalikes

    chars = common_characters(name)
    if params.num_classes > len(chars):
        raise DataError(
            f"{name}: data.params.num_classes={params.num_classes} but its fonts share "
            f"{len(chars)} characters"
        )
    kept: list[str] = []
    used: set[int] = set()
    rows = np.empty((0, params.image_size**2), dtype=np.float32)
    for start in np.linspace(0, len(chars) - 1, params.num_classes).round().astype(int):
        for i in range(int(start), len(chars)):
            if i in used:
                continue
            drawn = drawings_of(name, chars[i], params.image_size)
            used.add(i)
            blank = bool((drawn.std(axis=1) < BLANK_STD).any())
            if not blank and next(lookalikes(drawn, rows, same_split=False), None) is None:
                kept.append(chars[i])
                rows = np.concatenate([rows, drawn])
                break
        else:
            raise DataError(f"{name}: too few distinct characters for {params.num_classes}")
    return kept, rows


def generate(name: str, params: CjkParams) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """All images (N, 1, S, S) uint8 and class ids (N,), classes in code point order."""
    classes = select_classes(name, params)
    fonts = len(_fonts(name))
    n = len(classes) * fonts * params.instances_per_font
    images = np.empty((n, 1, params.image_size, params.image_size), dtype=np.uint8)
    labels = np.repeat(np.arange(len(classes), dtype=np.int64), fonts * params.instances_per_font)
    i = 0
    for ch in classes:
        for f in range(fonts):
            for k in range(params.instances_per_font):
                rng = np.random.default_rng([params.seed, ord(ch), f, k, GENERATOR_VERSION])
                images[i, 0] = render_letter(ch, partial(_font, name, f), params.image_size, rng)
                i += 1
    return images, labels, classes


def _cache_key(name: str, params: CjkParams) -> str:
    import PIL

    from dmlbench.data.licences import package_version

    packages = sorted({pkg for pkg, _, _, _ in _fonts(name)})
    versions = "|".join(f"{p}={package_version(p)}" for p in packages)
    text = f"{name}|{params.model_dump_json()}|v{GENERATOR_VERSION}|pil{PIL.__version__}|{versions}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def load_or_generate(
    name: str, params: CjkParams, cache: Path
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Generated arrays, from ``cache`` when present (a damaged cache file is regenerated)."""
    path = cache / name / f"{name}-{_cache_key(name, params)}.npz"
    n = params.num_classes * len(_fonts(name)) * params.instances_per_font
    size = params.image_size

    def build() -> tuple[np.ndarray, ...]:
        images, labels, classes = generate(name, params)
        return images, labels, np.array(classes)

    def plausible(arrays: tuple[np.ndarray, ...]) -> bool:
        images, labels, classes = arrays
        return (
            images.dtype == np.uint8
            and images.shape == (n, 1, size, size)
            and labels.dtype == np.int64
            and labels.shape == (n,)
            and classes.shape == (params.num_classes,)
            and bool(((labels >= 0) & (labels < params.num_classes)).all())
        )

    images, labels, classes = load_or_rebuild(
        path, ("images", "labels", "classes"), build, plausible, f"{name} cache"
    )
    return images, labels, [str(c) for c in classes]


class _CjkSource(DatasetSource):
    """One of :data:`SETS`; a subclass names it."""

    Params = CjkParams
    reads_root = False
    name: ClassVar[str] = ""

    def load(self, params: BaseModel, root: Path | None, cache_dir: Path) -> DataSplits:
        assert isinstance(params, CjkParams)
        if params.train_classes >= params.num_classes:
            raise DataError(
                f"data.params.train_classes={params.train_classes} leaves no test class "
                f"(num_classes={params.num_classes})"
            )
        images, labels, classes = load_or_generate(self.name, params, cache_dir)
        n_train = params.train_classes
        train = labels < n_train
        return DataSplits(
            train=Split(ArrayImages(images[train]), labels[train]),
            test=Split(ArrayImages(images[~train]), labels[~train] - n_train),
            fingerprint=fingerprint_arrays(images, labels, extra=self.name),
            info={
                "train_classes": n_train,
                "test_classes": len(classes) - n_train,
                "first_test_class": f"U+{ord(classes[n_train]):04X}",
                "fonts": font_licences(self.name),  # not in the fingerprint (the arrays are)
            },
        )

    def drawings(self, params: BaseModel, splits: DataSplits) -> dict[str, np.ndarray]:
        """Each image's drawing before its random transform, per split, in the splits'
        order (:func:`generate`'s: class, then font, then instance), on [0, 1]."""
        assert isinstance(params, CjkParams)
        rows = np.repeat(selection(self.name, params)[1], params.instances_per_font, axis=0)
        n_train = len(splits.train)
        return {"train": rows[:n_train], "test": rows[n_train:]}


@DATASETS.register("hanzi")
class Hanzi(_CjkSource):
    name = "hanzi"
    description = "CJK ideographs drawn by 16 Chinese and Japanese fonts (Debian packages)"
    about = About(
        source="16 fonts of Debian's fonts-noto-cjk(-extra), arphic, wqy, ipa(ex), vlgothic "
        "and hanazono packages, rendered in memory",
        licence="the fonts' own licences, read from each package's copyright file",
        splits="by character, in radical (code point) order: test characters never trained on",
    )


@DATASETS.register("hangul")
class Hangul(_CjkSource):
    name = "hangul"
    description = "Hangul syllables drawn by 16 Korean fonts (Debian packages)"
    about = About(
        source="16 fonts of Debian's fonts-noto-cjk, unfonts-core, nanum(-extra) and baekmuk "
        "packages, rendered in memory",
        licence="the fonts' own licences, read from each package's copyright file",
        splits="by syllable, in initial-consonant (code point) order: test syllables never "
        "trained on",
    )
