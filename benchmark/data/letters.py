"""One letter drawn by one font: the renderer shared by the data sets made of letters.

A class is a character and an instance is that character drawn by one font with a seeded
random rotation (±15°), scale (55-80% of the canvas), offset (±8%), stroke thickness and
pixel noise: what varies between two people writing the same letter, so that a method must
learn what stays. The drawing is made at ``SUPERSAMPLE`` times the image size and
box-filtered down, which anti-aliases the strokes the way a camera would.

:func:`clean_drawing` is the same character at the middle scale with no transform: what two
classes share when a font draws them alike, which is what the look-alike filter and
``dmlbench data audit`` compare.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

SUPERSAMPLE = 4
MIDDLE_SCALE = 0.675  # the middle of the random scale's range

FontAt = Callable[[int], Any]  # pixel size -> a PIL FreeTypeFont


def render_letter(ch: str, font_at: FontAt, size: int, rng: np.random.Generator) -> np.ndarray:
    """One randomly transformed instance of ``ch`` as a (size, size) uint8 array, drawn by
    ``font_at(pixel size)``; every random number comes from ``rng``, in a fixed order."""
    from PIL import Image, ImageDraw

    canvas = size * SUPERSAMPLE
    scale = rng.uniform(0.55, 0.8)
    stroke = int(rng.integers(0, 3)) * SUPERSAMPLE // 2
    dx, dy = rng.uniform(-0.08, 0.08, size=2) * canvas
    angle = rng.uniform(-15.0, 15.0)
    img = Image.new("L", (canvas, canvas), 0)
    ImageDraw.Draw(img).text(
        (canvas / 2 + dx, canvas / 2 + dy),
        ch,
        fill=255,
        font=font_at(max(8, int(canvas * scale))),
        anchor="mm",
        stroke_width=stroke,
        stroke_fill=255,
    )
    img = img.rotate(angle, resample=Image.Resampling.BICUBIC)
    img = img.resize((size, size), resample=Image.Resampling.BOX)
    arr = np.asarray(img, dtype=np.float32)
    arr += rng.normal(0.0, rng.uniform(0.0, 12.0), size=arr.shape)
    return np.clip(arr, 0, 255).astype(np.uint8)


def clean_drawing(ch: str, font_at: FontAt, size: int) -> np.ndarray:
    """``ch`` drawn by ``font_at`` at ``size`` px as :func:`render_letter` draws it before its
    random transform (middle scale, no stroke, offset, rotation or noise)."""
    from PIL import Image, ImageDraw

    canvas = size * SUPERSAMPLE
    img = Image.new("L", (canvas, canvas), 0)
    font = font_at(max(8, int(canvas * MIDDLE_SCALE)))
    ImageDraw.Draw(img).text((canvas / 2, canvas / 2), ch, fill=255, font=font, anchor="mm")
    return np.asarray(img.resize((size, size), resample=Image.Resampling.BOX), dtype=np.uint8)
