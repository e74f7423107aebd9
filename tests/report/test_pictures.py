"""Retrieval grids and embedding maps: the query rule, the neighbours, the frames, the groups."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dmlbench.report.pictures import (
    CELL,
    FRAME,
    HIT,
    MISS,
    SplitImages,
    choose_queries,
    class_groups,
    grid_canvas,
    map_points,
    neighbours,
    write_grid,
    write_map,
)


def test_queries_are_one_per_class_the_lowest_index_and_do_not_depend_on_a_method() -> None:
    labels = np.repeat(np.arange(20), 3)[::-1].copy()  # class 19 first
    q = choose_queries(labels, None, n=8)
    assert len(q) == 8 and len(set(labels[q])) == 8
    for i in q:
        assert i == np.flatnonzero(labels == labels[i]).min()
    assert np.array_equal(q, choose_queries(labels, None, n=8))  # seeded: the same every time
    only = np.flatnonzero(labels % 2 == 0)  # a split with a query set: queries from it only
    assert set(labels[choose_queries(labels, only)]) <= set(range(0, 20, 2))


def test_neighbours_exclude_the_query_rank_by_cosine_and_break_ties_by_index() -> None:
    e = np.array([[1.0, 0.0], [2.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    out = neighbours(e, np.array([0]), None, k=3)
    assert out.tolist() == [[1, 2, 4]]  # 1 and 2 tie (cosine 1): the lower index first
    gallery = np.array([3, 4])
    assert neighbours(e, np.array([0]), gallery, k=2).tolist() == [[4, 3]]


def test_grid_frames_hits_green_and_misses_red() -> None:
    images = np.zeros((4, 1, 16, 16), dtype=np.float32)
    test = SplitImages(images, np.array([0, 0, 1, 1]), None, None, False, None, "", [])
    canvas = grid_canvas(test, {"m": np.array([[1, 2]])}, np.array([0]))
    gap = CELL // 2
    first, second = CELL + gap, 2 * CELL + gap  # after the query and the gap
    assert tuple(canvas[0, first]) == HIT and tuple(canvas[0, second]) == MISS
    assert tuple(canvas[FRAME, first + FRAME]) == (0, 0, 0)  # the image inside the frame
    assert canvas.shape == (CELL, 3 * CELL + gap, 3)


def test_glyph_groups_are_the_letters_scripts() -> None:
    class P:
        class data:  # the protocol's attribute
            params = {"num_classes": 400}

    groups, words = class_groups("glyphs", {}, np.arange(200), P())
    assert groups is not None and "script" in words
    assert {"Latin", "Greek", "Cyrillic"} <= set(groups.tolist())


def test_glyph_groups_follow_the_distinct_letters() -> None:
    """A ``distinct`` protocol's classes are the distinct letters, not v4's list."""
    import unicodedata

    from dmlbench.data.glyphs import select_classes

    class P:
        class data:
            params = {"num_classes": 400, "image_size": 16, "distinct": True}

    groups, _ = class_groups("glyphs", {}, np.arange(200), P())
    letters = select_classes(400, 16)[200:]
    scripts = [unicodedata.name(ch).split()[0].capitalize() for ch in letters]
    assert groups is not None
    assert all(g in (s, "Other") for g, s in zip(groups, scripts, strict=True))
    assert select_classes(400, 16)[200:] != select_classes(400)[200:]  # the lists differ


def test_groups_come_from_the_index_of_a_prepared_set(tmp_path: Path) -> None:
    (tmp_path / "index.csv").write_text(
        "path,label,group\na.png,cat,Animals\nb.png,apple,Food\nc.png,dog,Animals\n",
        encoding="utf-8",
    )
    groups, _ = class_groups("emoji", {"root": str(tmp_path)}, np.array([0, 1, 2]), None)
    assert groups is not None and groups.tolist() == ["Food", "Animals", "Animals"]  # sorted ids
    none, why = class_groups("custom", {}, np.array([0, 1]), None)
    assert none is None and "by class" in why


def test_map_is_seeded_and_samples_at_most_n_points() -> None:
    rng = np.random.default_rng(1)
    e = rng.normal(size=(60, 8)).astype(np.float32)
    items, xy = map_points(e, n=40)
    assert xy.shape == (40, 2) and np.all(np.diff(items) > 0)
    again = map_points(e, n=40)
    assert np.array_equal(items, again[0]) and np.allclose(xy, again[1])


@pytest.mark.parametrize("continuous", [False, True])
def test_grid_and_map_are_written(tmp_path: Path, continuous: bool) -> None:
    from dmlbench.report.kept import KeptEmbeddings

    rng = np.random.default_rng(0)
    n = 40
    labels = rng.normal(size=(n, 4)) if continuous else np.repeat(np.arange(10), 4)
    images = rng.random((n, 3, 16, 16)).astype(np.float32)
    test = SplitImages(images, labels, None, None, continuous, None, "", [])
    kept = KeptEmbeddings(
        "m", rng.normal(size=(n, 8)).astype(np.float32), labels, {}, "f", {}, tmp_path
    )
    grid = write_grid(test, {"m": kept, "untrained": kept}, "t", tmp_path / "grid.png")
    assert grid.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert write_map(test, kept, "t", tmp_path / "map.png").is_file()
