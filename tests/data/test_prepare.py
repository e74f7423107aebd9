"""`dmlbench data prepare`: download + SHA-256 + safe extraction + manifest, and instructions."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import tarfile
import zipfile
from pathlib import Path

import pytest

from dmlbench.cli.main import main
from dmlbench.data import DATASETS, prepare
from dmlbench.data.about import Spec
from dmlbench.errors import DataError
from tests.data.fixtures import make_cars_mat, make_cub, make_sop


def cub_archive(tmp_path: Path) -> tuple[Path, str]:
    """A tar.gz shaped like CUB_200_2011.tgz: a CUB_200_2011/ folder plus a top-level file."""
    src = make_cub(tmp_path / "src" / "CUB_200_2011", train=2, test=2, per_class=2)
    (tmp_path / "src" / "attributes.txt").write_text("outside the data set folder\n")
    archive = tmp_path / "CUB_200_2011.tgz"
    with tarfile.open(archive, "w:gz") as tf:
        tf.add(src, arcname="CUB_200_2011")
        tf.add(tmp_path / "src" / "attributes.txt", arcname="attributes.txt")
    return archive, hashlib.sha256(archive.read_bytes()).hexdigest()


def test_download_verify_extract_and_manifest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    archive, digest = cub_archive(tmp_path)
    cub = DATASETS.get("cub200")
    spec = cub.about.prepare
    assert isinstance(spec, Spec) and spec.archive is not None
    official = dataclasses.replace(spec.archive, url=archive.as_uri(), sha256=digest)
    about = dataclasses.replace(cub.about, prepare=dataclasses.replace(spec, archive=official))
    monkeypatch.setattr(cub, "about", about)
    root = tmp_path / "data" / "CUB_200_2011"
    assert main(["data", "prepare", "cub200", "--root", str(root)]) == 0
    assert (root / "images.txt").is_file() and not (root / "attributes.txt").exists()
    assert not (root / "CUB_200_2011.tgz").exists()  # removed after extraction
    manifest = json.loads((root / prepare.MANIFEST).read_text())
    assert manifest["counts"] == {"train": 4, "test": 4}
    assert manifest["source"] == {"url": archive.as_uri(), "sha256": digest}
    assert len(manifest["files"]) == 8 and manifest["files"][0][0].startswith("images/")
    assert "written:" in capsys.readouterr().out
    # Already in place: the second run only checks and rewrites the manifest.
    monkeypatch.setattr(prepare, "download", lambda *a: pytest.fail("downloaded again"))
    assert main(["data", "prepare", "cub200", "--root", str(root)]) == 0


def test_wrong_sha256_keeps_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    archive, _ = cub_archive(tmp_path)
    root = tmp_path / "CUB"
    status = main(["data", "prepare", "cub200", "--root", str(root), "--url", archive.as_uri()])
    assert status == 2
    err = capsys.readouterr().err
    assert "SHA-256" in err and "differs from the expected 0c685df5" in err
    assert sorted(p.name for p in root.iterdir()) == []  # no .part, nothing extracted


def test_mirror_url_with_its_sha256(tmp_path: Path) -> None:
    archive, digest = cub_archive(tmp_path)
    root = tmp_path / "CUB"
    assert (
        main(
            [
                "data",
                "prepare",
                "cub200",
                "--root",
                str(root),
                "--url",
                archive.as_uri(),
                "--sha256",
                digest,
                "--keep-archive",
            ]
        )
        == 0
    )
    assert (root / "CUB_200_2011.tgz").is_file() and (root / prepare.MANIFEST).is_file()


def test_unreachable_url_is_an_error_naming_it(tmp_path: Path) -> None:
    missing = (tmp_path / "nope.tgz").as_uri()
    with pytest.raises(DataError, match=f"{missing}: download failed"):
        prepare.download(missing, tmp_path / "x.tgz", "0" * 64)


def _tar_with(tmp_path: Path, name: str, kind: bytes = tarfile.REGTYPE) -> Path:
    path = tmp_path / "evil.tar"
    with tarfile.open(path, "w") as tf:
        info = tarfile.TarInfo("CUB_200_2011/ok.txt")
        info.size = 2
        tf.addfile(info, io.BytesIO(b"ok"))
        info = tarfile.TarInfo(name)
        info.type = kind
        if kind == tarfile.SYMTYPE:
            info.linkname = "/etc/passwd"
        else:
            info.size = 4
        tf.addfile(info, io.BytesIO(b"evil") if kind == tarfile.REGTYPE else None)
    return path


@pytest.mark.parametrize(
    "name,kind,message",
    [
        ("CUB_200_2011/../../escape.txt", tarfile.REGTYPE, "escapes the root"),
        ("/tmp/absolute.txt", tarfile.REGTYPE, "absolute path"),
        ("CUB_200_2011/link", tarfile.SYMTYPE, "link or device"),
    ],
)
def test_unsafe_members_are_refused_before_writing(
    tmp_path: Path, name: str, kind: bytes, message: str
) -> None:
    archive = _tar_with(tmp_path, name, kind)
    root = tmp_path / "out"
    with pytest.raises(DataError, match=message):
        prepare.safe_extract(archive, root, strip="CUB_200_2011/" if "link" in name else "")
    assert not (root / "ok.txt").exists() and not (root / "CUB_200_2011").exists()
    assert not (tmp_path / "escape.txt").exists()


def test_zip_archives_are_checked_too(tmp_path: Path) -> None:
    path = tmp_path / "a.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("Stanford_Online_Products/Ebay_info.txt", "x")
        zf.writestr("Stanford_Online_Products/../../evil.txt", "x")
    with pytest.raises(DataError, match="escapes the root"):
        prepare.safe_extract(path, tmp_path / "out")
    good = tmp_path / "b.zip"
    with zipfile.ZipFile(good, "w") as zf:
        zf.writestr("Stanford_Online_Products/sub/Ebay_info.txt", "x")
    assert prepare.safe_extract(good, tmp_path / "out", strip="Stanford_Online_Products/") == 1
    assert (tmp_path / "out" / "sub" / "Ebay_info.txt").read_text() == "x"


@pytest.mark.parametrize("name", ["cars196", "sop", "inshop"])
def test_no_usable_url_prints_where_files_go(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / name
    assert main(["data", "prepare", name, "--root", str(root)]) == 2
    out = capsys.readouterr().out
    assert "the files are not in place" in out and f"--root {root}" in out
    expected = {
        "cars196": f"{root}/cars_annos.mat",
        "sop": f"{root}/Ebay_train.txt",
        "inshop": f"{root}/Eval/list_eval_partition.txt",
    }[name]
    assert expected in out


def test_placed_files_get_a_manifest(tmp_path: Path) -> None:
    cars = make_cars_mat(tmp_path / "cars", per_class=2)
    assert main(["data", "prepare", "cars196", "--root", str(cars)]) == 0
    assert json.loads((cars / prepare.MANIFEST).read_text())["counts"] == {"train": 6, "test": 6}
    sop = make_sop(tmp_path / "sop", per_class=2)
    assert main(["data", "prepare", "sop", "--root", str(sop)]) == 0
