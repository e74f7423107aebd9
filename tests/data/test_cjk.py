"""hanzi and hangul: sixteen installed fonts each, licences known, distinct non-blank classes,
deterministic cached generation, a zero-shot split by code point, one-line errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dmlbench.data import DATASETS, cjk
from dmlbench.data.audit import BLANK_STD, lookalikes
from dmlbench.errors import DataError

pytestmark = pytest.mark.skipif(
    any(not Path(path).is_file() for _, path, _, _ in (*cjk.HANZI_FONTS, *cjk.HANGUL_FONTS)),
    reason="the CJK font packages are not installed (.ci/run installs them; docs/datasets.md)",
)
SETS = ("hanzi", "hangul")


@pytest.mark.parametrize("name", SETS)
def test_sixteen_distinct_fonts_with_known_licences(name: str) -> None:
    fonts = cjk.SETS[name][1]
    assert len(fonts) == 16 and len({(path, face) for _, path, face, _ in fonts}) == 16
    rows = cjk.font_licences(name)
    assert all(r["licence"] != "unknown" for r in rows), rows
    by_file = {Path(r["file"]).name: r["licence"] for r in rows}
    if name == "hanzi":  # a stanza for *.ttf only; a copyright file that is not DEP-5
        assert by_file["ipag.ttf"] == "IPA-1" and by_file["ukai.ttc"] == "Arphic-1999"


def test_the_fonts_share_thousands_of_characters_in_their_block() -> None:
    hanzi, hangul = cjk.common_characters("hanzi"), cjk.common_characters("hangul")
    assert len(hanzi) > 5000 and all("\u4e00" <= c <= "\u9fff" for c in hanzi)
    assert len(hangul) == 11172 and hangul == sorted(hangul)


@pytest.mark.parametrize("name", SETS)
def test_classes_are_spread_distinct_and_drawn_by_every_font(name: str) -> None:
    params = cjk.CjkParams(num_classes=60, train_classes=20, image_size=16)
    classes = cjk.select_classes(name, params)
    assert len(classes) == 60 and classes == sorted(classes)
    drawn = np.concatenate([cjk.drawings_of(name, c, 16) for c in classes])
    assert (drawn.std(axis=1) >= BLANK_STD).all()
    labels = np.repeat(np.arange(60), 16)
    clashes = [(i, j) for i, j, _ in lookalikes(drawn, drawn, True) if labels[i] != labels[j]]
    assert clashes == []
    spread = cjk.common_characters(name)
    assert classes[0] == spread[0] and spread.index(classes[-1]) > 0.9 * len(spread)


def test_a_character_a_font_draws_blank_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    """NanumSquare maps every syllable but draws only the common 2,350: such a syllable is
    passed over for the next one, as a look-alike is."""
    real = cjk.drawings_of
    first = cjk.common_characters("hangul")[0]

    def blank_first(name: str, ch: str, size: int) -> np.ndarray:
        out = real(name, ch, size)
        if ch == first:
            out[3] = 0.0
        return out

    monkeypatch.setattr(cjk, "drawings_of", blank_first)
    classes = cjk.select_classes("hangul", cjk.CjkParams(num_classes=5, train_classes=2))
    assert first not in classes and len(classes) == 5


def test_generation_is_deterministic_cached_and_split_by_code_point(tmp_path: Path) -> None:
    params = cjk.CjkParams(num_classes=6, train_classes=2, image_size=16)
    a, la, ca = cjk.load_or_generate("hanzi", params, tmp_path)
    b, lb, cb = cjk.generate("hanzi", params)
    assert np.array_equal(a, b) and np.array_equal(la, lb) and ca == cb
    assert a.shape == (6 * 16, 1, 16, 16) and len({x.tobytes() for x in a}) == len(a)
    (path,) = (tmp_path / "hanzi").glob("*.npz")
    path.write_bytes(b"damaged")
    assert np.array_equal(cjk.load_or_generate("hanzi", params, tmp_path)[0], a)
    splits = DATASETS.get("hanzi")().load(params, None, tmp_path)
    assert splits.train.num_classes == 2 and splits.test.num_classes == 4
    assert len(splits.train) == 2 * 16 and len(splits.test) == 4 * 16
    assert splits.info["first_test_class"] == f"U+{ord(ca[2]):04X}"
    drawings = DATASETS.get("hanzi")().drawings(params, splits)
    assert drawings["train"].shape == (32, 256) and drawings["test"].shape == (64, 256)
    each = np.concatenate([cjk.drawings_of("hanzi", c, 16) for c in ca])  # class, then font
    assert np.array_equal(np.concatenate([drawings["train"], drawings["test"]]), each)


def test_bad_parameters_and_missing_fonts_are_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(DataError, match="train_classes=6 leaves no test class"):
        DATASETS.get("hangul")().load(cjk.CjkParams(num_classes=6, train_classes=6), None, tmp_path)
    monkeypatch.setattr(cjk, "common_characters", lambda name: ["\uac00", "\uac01", "\uac02"])
    with pytest.raises(DataError, match="num_classes=4 but its fonts share 3 characters"):
        cjk.select_classes("hangul", cjk.CjkParams(num_classes=4, train_classes=2))
    monkeypatch.undo()
    fonts = (("fonts-made-up", "/nonexistent/font.ttf", 0, "Made Up"), *cjk.HANZI_FONTS[1:])
    monkeypatch.setitem(cjk.SETS, "hanzi", (cjk.SETS["hanzi"][0], fonts))
    with pytest.raises(DataError, match="install the Debian packages fonts-made-up"):
        cjk.generate("hanzi", cjk.CjkParams(num_classes=4, train_classes=2))
    with pytest.raises(DataError, match="install the Debian packages fonts-made-up"):
        cjk.select_classes(
            "hanzi", cjk.CjkParams(num_classes=4, train_classes=2)
        )  # the audit's way in
