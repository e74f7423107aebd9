"""``dmlbench.load_index(record).search(images, k)`` and ``dmlbench search-images``, end to end
on a 3-step glyphs run: a test image saved as a file finds itself first among the kept test
embeddings, a folder gallery finds each file itself, and the distances and order are a brute
force's."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

import dmlbench
from dmlbench.cli.main import main
from dmlbench.engine.artifacts import read_embeddings
from dmlbench.errors import DmlbenchError
from dmlbench.metrics.retrieval import l2_normalize
from dmlbench.records import load_record
from tests.cli.test_embed import run


@pytest.fixture(scope="module")
def kept(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A kept 3-step run and a folder of its first five test images as PNG files."""
    from PIL import Image

    from dmlbench.engine.inference import kept_split, open_kept

    folder = tmp_path_factory.mktemp("neighbours")
    record = run(folder)
    test = kept_split(open_kept(record), "test")
    images = folder / "images"
    images.mkdir()
    for i in range(5):
        pixels = (test.images[i][0].numpy() * 255).round().astype(np.uint8)
        Image.fromarray(pixels, "L").save(images / f"{i}.png")
    return record, images


def test_a_test_image_finds_itself_in_the_test_split(kept: tuple[Path, Path]) -> None:
    record, images = kept
    index = dmlbench.load_index(record)
    arrays = read_embeddings(load_record(record), record)
    assert len(index) == len(arrays["labels"]) == 320
    results = index.search(images, k=4)
    assert [r.query for r in results] == [f"{i}.png" for i in range(5)]
    gallery = l2_normalize(arrays["embeddings"]).astype(np.float64)
    for i, result in enumerate(results):
        first = result.neighbours[0]
        assert first.index == i and first.distance < 1e-3  # itself, up to PNG rounding
        assert first.label == int(arrays["labels"][i]) and first.path is None
        query = l2_normalize(index.embed([images / f"{i}.png"])).astype(np.float64)[0]
        d = np.sqrt(((gallery - query) ** 2).sum(axis=1))
        brute = np.lexsort((np.arange(len(d)), d))[:4]
        assert [n.index for n in result.neighbours] == brute.tolist()
        np.testing.assert_allclose([n.distance for n in result.neighbours], d[brute], atol=1e-6)


def test_a_folder_gallery_and_the_command(
    kept: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record, images = kept
    results = dmlbench.load_index(record, gallery=images).search(
        [images / "3.png", images / "0.png"], k=2
    )
    assert [r.neighbours[0].path for r in results] == ["3.png", "0.png"]
    assert results[0].neighbours[0].distance == 0.0 and results[0].neighbours[0].label is None
    out = tmp_path / "n.csv"
    argv = ["search-images", "--record", str(record), "--images", str(images), "-k", "3"]
    assert main([*argv, "--csv", str(out)]) == 0
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    assert len(rows) == 15 and list(rows[0]) == ["query", "rank", "index", "distance", "label"]
    assert all(r["index"] == r["query"][0] for r in rows if r["rank"] == "1")
    assert main([*argv, "--gallery", str(images)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].split("\t") == ["query", "rank", "index", "distance", "path"]
    assert printed[1].split("\t")[:3] == ["0.png", "1", "0"] and len(printed) == 16


def test_bad_input_is_one_line(kept: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    record, images = kept
    with pytest.raises(DmlbenchError, match="must be in"):
        dmlbench.load_index(record, gallery=images).search(images, k=6)
    with pytest.raises(DmlbenchError, match=r"nothing\.png: image not found"):
        dmlbench.load_index(record).search([images / "nothing.png"])
    assert main(["search-images", "--record", str(record), "--images", "no-such-dir"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: images no-such-dir: not a folder"]
