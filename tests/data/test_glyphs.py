"""glyphs: deterministic, cached, fingerprinted, zero-shot split, no homoglyph classes."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dmlbench.data import load_data
from dmlbench.data.glyphs import (
    FONT_FILES,
    GlyphsParams,
    available_letters,
    generate,
    load_or_generate,
)


def test_sixteen_fonts_and_hundreds_of_letters() -> None:
    assert len(FONT_FILES) == 16
    letters = available_letters()
    assert 400 <= len(letters) <= 730
    assert list(letters) == sorted(letters)


def test_look_alikes_are_removed_at_the_image_size() -> None:
    """The distinct filter drops the Greek and Cyrillic twins of Latin letters that the
    48-px byte filter of v1-v4 protocols kept (Β, В: identical to B in most fonts)."""
    old, distinct = set(available_letters()), set(available_letters(16))
    assert "A" in distinct and "B" in distinct
    twins = ("\u0391", "\u0392", "\u0412", "\u0415", "\u041c", "\u039f", "\u041e")
    assert all(t in old for t in twins[1:])  # the old filter's failure, for the record
    assert not any(t in distinct for t in twins)
    assert distinct < old and len(distinct) >= 400  # glyphs-mini's 400 classes still fit


def test_generation_is_deterministic_and_varied() -> None:
    p = GlyphsParams(num_classes=6, image_size=32)
    a, la, ca = generate(p)
    b, lb, cb = generate(p)
    assert np.array_equal(a, b) and np.array_equal(la, lb) and ca == cb
    assert a.shape == (6 * 16, 1, 32, 32) and a.dtype == np.uint8
    assert len({img.tobytes() for img in a}) == len(a)  # every instance differs
    c, _, _ = generate(p.model_copy(update={"seed": 1}))
    assert not np.array_equal(a, c)


def test_cache_round_trip_and_corrupt_cache_is_regenerated(tmp_path: Path) -> None:
    p = GlyphsParams(num_classes=4)
    first = load_or_generate(p, tmp_path)
    files = list((tmp_path / "glyphs").glob("*.npz"))
    assert len(files) == 1
    again = load_or_generate(p, tmp_path)
    assert np.array_equal(first[0], again[0])
    files[0].write_bytes(b"not a zip file")
    repaired = load_or_generate(p, tmp_path)
    assert np.array_equal(first[0], repaired[0])


def test_zero_shot_split_and_fingerprint(tiny_glyphs_protocol) -> None:
    data = load_data(tiny_glyphs_protocol)
    assert data.train.num_classes == data.test.num_classes == 20
    assert len(data.train) == len(data.test) == 20 * 16
    assert data.info["train_classes"] == 20
    assert data.fingerprint == load_data(tiny_glyphs_protocol).fingerprint
    # Test images are classes the training split never contains.
    train_imgs = {bytes(data.train.images[i].numpy().tobytes()) for i in range(len(data.train))}
    assert not any(data.test.images[i].numpy().tobytes() in train_imgs for i in range(50))
