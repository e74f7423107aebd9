"""``dmlbench embed`` with a kept model, and ``dmlbench run --no-keep``: bad input is one
``error:`` line with exit status 2."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from dmlbench.cli.main import main
from dmlbench.engine.artifacts import read_embeddings
from dmlbench.protocol import load_protocol
from dmlbench.records import load_record


def run(folder: Path, *extra: str) -> Path:
    """The tiny glyphs protocol, contrastive for 3 steps; the contrastive record's path."""
    protocol = folder / "tiny.yaml"
    tiny = load_protocol("glyphs-mini").with_overrides(
        {"data.params.num_classes": 40, "optim.epochs": 1, "batch.size": 40, "search.trials": 0},
        name="glyphs-tiny",
    )
    protocol.write_text(yaml.safe_dump(tiny.model_dump(mode="json")))
    argv = ["run", "--protocol", str(protocol), "--method", "contrastive", "--seed", "0"]
    argv += ["--max-steps", "3", "--no-progress", "--results-dir", str(folder / "results")]
    assert main([*argv, "--reports-dir", str(folder / "reports"), *extra]) == 0
    (record,) = (folder / "results").rglob("contrastive-seed0-final*.json")
    return record


@pytest.fixture(scope="module")
def record(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run(tmp_path_factory.mktemp("embed"))


def one_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


def test_embed_the_test_split_again(record: Path, tmp_path: Path) -> None:
    out = tmp_path / "test.npz"
    assert main(["embed", "--record", str(record), "--images", "test", "--out", str(out)]) == 0
    kept = read_embeddings(load_record(record), record)
    with np.load(out) as npz:
        order = ["index", "protocol", "split", "split_fingerprint"]  # for dmlbench evaluate
        model = ["model_name", "seed", "trained_by", "trained_on"]
        assert sorted(npz.files) == sorted(["embeddings", "labels", *order, *model])
        assert str(npz["split"]) == "test" and str(npz["model_name"]) == "contrastive"
        assert npz["embeddings"].shape == (320, 64)
        np.testing.assert_allclose(npz["embeddings"], kept["embeddings"], atol=1e-6)
        assert (npz["labels"] == kept["labels"]).all()


def test_embed_a_folder_of_images(record: Path, tmp_path: Path) -> None:
    from PIL import Image

    from dmlbench.engine.inference import kept_split, open_kept

    test = kept_split(open_kept(record), "test")
    folder = tmp_path / "images"
    (folder / "more").mkdir(parents=True)
    for i in range(3):  # the first test images, as PNG files: the same embeddings
        pixels = (test.images[i][0].numpy() * 255).round().astype(np.uint8)
        Image.fromarray(pixels, "L").save(folder / f"{i}.png")
    Image.new("RGB", (50, 70), (200, 10, 10)).save(folder / "more" / "red.jpg")  # any size
    out = tmp_path / "mine.npz"
    assert main(["embed", "--record", str(record), "--images", str(folder), "--out", str(out)]) == 0
    with np.load(out) as npz:
        assert list(npz["files"]) == ["0.png", "1.png", "2.png", "more/red.jpg"]
        assert npz["embeddings"].shape == (4, 64)
        kept = read_embeddings(load_record(record), record)["embeddings"][:3]
        np.testing.assert_allclose(npz["embeddings"][:3], kept, atol=1e-6)


def test_bad_input_is_one_line(
    record: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = ["--out", str(tmp_path / "x.npz")]
    embed = ["embed", "--record", str(record), "--images"]
    missing = tmp_path / "nope.json"
    assert str(missing) in one_error(
        ["embed", "--record", str(missing), "--images", "test", *out], capsys
    )
    assert "neither test, train nor a folder" in one_error([*embed, "tset", *out], capsys)
    folder = tmp_path / "images"
    folder.mkdir()
    (folder / "broken.png").write_bytes(b"not a png")
    assert "broken.png: not a readable image" in one_error([*embed, str(folder), *out], capsys)
    assert not (tmp_path / "x.npz").exists()


def test_a_tampered_weights_file_is_refused(
    record: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = tmp_path / "copy" / record.name
    shutil.copytree(record.parent, copy.parent)
    (weights,) = copy.parent.glob("artifacts/*.pt")
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0xFF
    weights.write_bytes(bytes(data))
    line = one_error(["embed", "--record", str(copy), "--images", "test", "--out", "x.npz"], capsys)
    assert str(weights) in line and "SHA-256" in line


def test_no_keep_writes_nothing_and_embed_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record = run(tmp_path, "--no-keep")
    assert not list((tmp_path / "results").rglob("artifacts"))
    assert load_record(record).artifacts == {}
    capsys.readouterr()
    argv = ["embed", "--record", str(record), "--images", "test", "--out", str(tmp_path / "x.npz")]
    assert "--no-keep" in one_error(argv, capsys)
