"""Bring-your-own data (dmlbench.data.custom): layouts, split rules, errors, a run end to end."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import numpy as np
import pytest
import yaml
from PIL import Image
from pydantic import ValidationError

from dmlbench.cli.main import main
from dmlbench.data import load_data
from dmlbench.data.custom import SplitSpec, index_entries
from dmlbench.data.files import manifest
from dmlbench.errors import DataError
from dmlbench.protocol import load_protocol

CLASSES = ("ant", "bee", "cat", "dog", "elk", "fox")


def png(path: Path, value: int, size: int = 8) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((size, size, 3), value % 256, dtype=np.uint8)).save(path)


def make_folder(root: Path, classes: tuple[str, ...] = CLASSES, per_class: int = 3) -> Path:
    """The ImageFolder layout: ROOT/<class>/<i>.png."""
    for c, name in enumerate(classes):
        for i in range(per_class):
            png(root / name / f"{i}.png", 40 * c + 9 * i)
    return root


def make_csv(root: Path, lines: list[str], images: bool = True) -> Path:
    """ROOT/index.csv with ``lines`` (header first); each listed path gets a PNG."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "index.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    if images:
        for n, line in enumerate(lines[1:]):
            rel = line.split(",")[0]
            if rel and not rel.startswith(("/", "..")):
                png(root / rel, n)
    return root


def rows(split: bool = False, group: bool = False, per_class: int = 2) -> list[str]:
    header = ["path,label" + (",split" if split else "") + (",group" if group else "")]
    out = []
    for c, name in enumerate(CLASSES):
        for i in range(per_class):
            cells = [f"img/{name}_{i}.png", name]
            cells += ["test" if c % 2 else "train"] if split else []
            cells += ["odd" if c % 2 else "even"] if group else []
            out.append(",".join(cells))
    return header + out


def sides(entries: list) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {"train": set(), "test": set()}
    for e in entries:
        out[e.role].add(e.label)
    return out


# --- SplitSpec ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"test_fraction": 0.5, "column": True},
        {"test_classes": ("a",), "test_groups": ("g",)},
        {"test_fraction": 0.0},
        {"test_fraction": 1.0},
        {"test_classes": ()},
    ],
)
def test_split_spec_needs_exactly_one_valid_rule(kwargs: dict) -> None:
    with pytest.raises(ValidationError):
        SplitSpec(**kwargs)


def test_split_spec_both_rules_message_names_them() -> None:
    with pytest.raises(ValidationError, match=r"exactly one split rule.*test_fraction and column"):
        SplitSpec(test_fraction=0.5, column=True)


# --- layouts and rules --------------------------------------------------------------------


def test_image_folder_layout_labels_by_sorted_folder_name(tmp_path: Path) -> None:
    root = make_folder(tmp_path / "d", classes=("zebra", "ant", "moth"))
    entries = index_entries(root, SplitSpec(test_classes=("moth",)))
    by_path = {e.path: e for e in entries}
    assert len(entries) == 9
    assert by_path["ant/0.png"].label == 0 and by_path["moth/2.png"].label == 1
    assert by_path["zebra/1.png"].label == 2
    assert {e.role for e in entries if e.label == 1} == {"test"}
    assert {e.role for e in entries if e.label != 1} == {"train"}


def test_test_fraction_is_a_seeded_permutation_of_sorted_names(tmp_path: Path) -> None:
    root = make_folder(tmp_path / "d")
    entries = index_entries(root, SplitSpec(test_fraction=0.5, seed=3))
    expected = set(np.random.default_rng(3).permutation(sorted(CLASSES))[:3].tolist())
    test_names = {sorted(CLASSES)[i] for i in sides(entries)["test"]}
    assert test_names == expected
    assert not sides(entries)["train"] & sides(entries)["test"]
    assert index_entries(root, SplitSpec(test_fraction=0.5, seed=3)) == entries
    others = {
        frozenset(sides(index_entries(root, SplitSpec(test_fraction=0.5, seed=s)))["test"])
        for s in range(6)
    }
    assert len(others) > 1  # the seed matters


def test_test_fraction_keeps_one_class_on_each_side(tmp_path: Path) -> None:
    root = make_folder(tmp_path / "d")
    assert len(sides(index_entries(root, SplitSpec(test_fraction=0.01)))["test"]) == 1
    assert len(sides(index_entries(root, SplitSpec(test_fraction=0.99)))["train"]) == 1


def test_csv_split_column_and_groups_give_the_same_split(tmp_path: Path) -> None:
    root = make_csv(tmp_path / "d", rows(split=True, group=True))
    by_column = index_entries(root, SplitSpec(column=True))
    by_group = index_entries(root, SplitSpec(test_groups=("odd",)))
    by_class = index_entries(root, SplitSpec(test_classes=("bee", "dog", "fox")))
    assert by_column == by_group == by_class
    assert sides(by_column) == {"train": {0, 2, 4}, "test": {1, 3, 5}}
    assert by_column[0].path == "img/ant_0.png"


def test_csv_with_a_custom_index_name(tmp_path: Path) -> None:
    root = make_csv(tmp_path / "d", rows())
    (root / "index.csv").rename(root / "mine.csv")
    assert len(index_entries(root, SplitSpec(test_fraction=0.5), index="mine.csv")) == 12
    with pytest.raises(DataError, match=r"other\.csv: index file not found"):
        index_entries(root, SplitSpec(test_fraction=0.5), index="other.csv")


# --- one-line errors naming the file and line ---------------------------------------------


def csv_error(tmp_path: Path, lines: list[str], split: SplitSpec, images: bool = True) -> str:
    root = make_csv(tmp_path / "d", lines, images)
    with pytest.raises(DataError) as err:
        index_entries(root, split)
    message = str(err.value)
    assert "\n" not in message
    return message


FRACTION = SplitSpec(test_fraction=0.5)
INDEX_ERRORS = {
    "no header": (["img/a.png,ant", "img/b.png,ant"], FRACTION, r"index\.csv:1: .*path and label"),
    "missing column": (["path", "img/a.png"], FRACTION, r"index\.csv:1: .*path and label"),
    "unknown column": (["path,label,grup"], FRACTION, r"index\.csv:1: column 'grup' is unknown"),
    "empty label": ([*rows()[:3], "img/x.png,"], FRACTION, r"index\.csv:4: empty label"),
    "short row": ([*rows()[:3], "img/x.png"], FRACTION, r"index\.csv:4: expected 2 fields, got 1"),
    "leaves root": (
        [*rows()[:2], "../x.png,ant"],
        FRACTION,
        r"index\.csv:3: .*'\.\./x\.png'.*outside",
    ),
    "absolute": (
        [*rows()[:2], "/etc/x.png,ant"],
        FRACTION,
        r"index\.csv:3: .*outside the data root",
    ),
    "listed twice": (
        [*rows()[:3], rows()[1]],
        FRACTION,
        r"index\.csv:4: .*listed twice \(line 2\)",
    ),
    "bad split": (
        [*rows(split=True)[:3], "img/x.png,ant,val"],
        FRACTION,
        r"index\.csv:4: split 'val'",
    ),
    "both sides": (
        [*rows(split=True), "img/x.png,ant,test"],
        SplitSpec(column=True),
        r"index\.csv:14: class 'ant' is in test here and in train at .*index\.csv:2",
    ),
    "no split column": (
        rows(),
        SplitSpec(column=True),
        r"split\.column: .*index\.csv has no split",
    ),
    "no group column": (rows(), SplitSpec(test_groups=("odd",)), r"split\.test_groups: .*no group"),
    "unknown group": (
        rows(group=True),
        SplitSpec(test_groups=("od",)),
        r"group 'od' is not in .*index\.csv.*'odd'",
    ),
    "unknown class": (
        rows(),
        SplitSpec(test_classes=("bea",)),
        r"split\.test_classes: class 'bea' .*'bee'",
    ),
    "one-image test class": (
        [*rows(), "img/gnu_0.png,gnu"],
        SplitSpec(test_classes=("gnu",)),
        r"index\.csv:14: test class 'gnu' has 1 image, so it cannot be a query with a positive",
    ),
    "no train class": (rows(), SplitSpec(test_classes=CLASSES), r"leaves no train class"),
}


@pytest.mark.parametrize("case", INDEX_ERRORS)
def test_a_bad_index_is_one_line_naming_file_and_line(case: str, tmp_path: Path) -> None:
    lines, split, pattern = INDEX_ERRORS[case]
    assert re.search(pattern, csv_error(tmp_path, lines, split))


def test_a_missing_image_names_the_index_line(tmp_path: Path) -> None:
    message = csv_error(tmp_path, [*rows(), "img/gone.png,ant"], FRACTION, images=False)
    assert re.search(r"index\.csv:2: image .*img[/\\]ant_0\.png not found", message)


def test_a_non_utf8_index_names_the_line(tmp_path: Path) -> None:
    root = make_csv(tmp_path / "d", rows())
    (root / "index.csv").write_bytes(b"path,label\nimg/ant_0.png,\xff\n")
    with pytest.raises(DataError, match=r"index\.csv:2: not UTF-8"):
        index_entries(root, FRACTION)


def test_image_folder_errors_name_the_folder(tmp_path: Path) -> None:
    root = make_folder(tmp_path / "d")
    png(root / "gnu" / "only.png", 1)
    with pytest.raises(DataError, match=r"gnu: test class 'gnu' has 1 image"):
        index_entries(root, SplitSpec(test_classes=("gnu",)))
    with pytest.raises(DataError, match=r"split\.column: .*no index\.csv.* has no split column"):
        index_entries(root, SplitSpec(column=True))
    (root / "gnu" / "only.png").unlink()
    with pytest.raises(DataError, match=r"gnu: class folder holds no image"):
        index_entries(root, FRACTION)
    with pytest.raises(DataError, match=r"no index\.csv and no class folders"):
        (tmp_path / "empty").mkdir()
        index_entries(tmp_path / "empty", FRACTION)


def test_images_without_one_square_size_need_a_crop(tmp_path: Path) -> None:
    root = make_folder(tmp_path / "d")
    png(root / "ant" / "wide.png", 1)
    Image.new("RGB", (12, 8)).save(root / "ant" / "wide.png")
    protocol = load_protocol(write_protocol(tmp_path, root))
    with pytest.raises(DataError, match=r"images\.train: .*ant[/\\]wide\.png is 48x32"):
        load_data(protocol)


def test_a_corrupt_image_is_named_before_anything_is_cached(tmp_path: Path) -> None:
    root = make_folder(tmp_path / "d")
    (root / "bee" / "1.png").write_bytes(b"not a png")
    with pytest.raises(DataError, match=r"bee[/\\]1\.png: not a readable image"):
        load_data(load_protocol(write_protocol(tmp_path, root)))


def test_hidden_folders_are_skipped_and_a_root_too_high_is_named(tmp_path: Path) -> None:
    root = make_folder(tmp_path / "top" / "d")
    png(root / "ant" / ".ipynb_checkpoints" / "0-checkpoint.png", 1)
    png(root / ".git" / "x.png", 1)
    assert len(index_entries(root, FRACTION)) == 18
    with pytest.raises(DataError, match=r"one class folder \(d\).*did you mean --data-root .*d\?"):
        index_entries(tmp_path / "top", FRACTION)
    with pytest.raises(DataError, match=r"data\.params\.index: path '\.\./x\.csv' is outside"):
        index_entries(root, FRACTION, index="../x.csv")


# --- fingerprint, protocol hash, a run end to end ----------------------------------------

PROTOCOL = """\
name: my-images
version: 1
description: a tiny folder of 8x8 images
data:
  dataset: images
  root: {root}
  params: {{split: {split}}}
images:
  train: {{resize: 32}}
  test: {{resize: 32}}
model: {{backbone: small-cnn, pretrained: null, embedding_size: 16, normalize: true}}
batch: {{size: 8, samples_per_class: 2}}
optim: {{name: adam, lr: 1.0e-3, epochs: 1}}
metrics: {{recall_at: [1, 2], nmi: true, map_at_r: true, r_precision: true}}
search: {{trials: 0}}
seeds: [0]
methods: [contrastive]
"""
EIGHT = (*CLASSES, "gnu", "hen")


def write_protocol(
    tmp_path: Path, root: Path, split: str = "{test_fraction: 0.5, seed: 0}", name: str = "p"
) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(PROTOCOL.format(root=root, split=split), encoding="utf-8")
    return path


def test_fingerprint_is_the_manifest_and_ignores_the_root(tmp_path: Path) -> None:
    root = make_folder(tmp_path / "a" / "d")
    moved = make_folder(tmp_path / "b" / "d")
    split = SplitSpec(test_fraction=0.5)
    here = manifest(root, index_entries(root, split), "images")[1]
    assert manifest(moved, index_entries(moved, split), "images")[1] == here
    other = manifest(root, index_entries(root, SplitSpec(test_classes=("ant", "bee"))), "images")
    assert other[1] != here  # roles are in the manifest

    def protocol_hash(root: Path, split: str) -> str:
        return load_protocol(write_protocol(tmp_path, root, split)).hash

    base = protocol_hash(root, "{test_fraction: 0.5}")
    assert protocol_hash(moved, "{test_fraction: 0.5}") == base
    assert protocol_hash(root, "{test_fraction: 0.5, seed: 1}") != base


def test_validate_and_run_through_the_cli(tmp_path: Path) -> None:
    root = make_folder(tmp_path / "d", classes=EIGHT, per_class=3)
    protocol = write_protocol(tmp_path, root)
    assert main(["validate", str(protocol)]) == 0
    results = tmp_path / "results"
    argv = ["run", "--protocol", str(protocol), "--results-dir", str(results)]
    assert main([*argv, "--reports-dir", str(tmp_path / "reports"), "--no-progress"]) == 0
    records = [json.loads(p.read_text()) for p in results.rglob("contrastive-seed0*.json")]
    assert len(records) == 1
    entries = index_entries(root, SplitSpec(test_fraction=0.5))
    assert records[0]["data_fingerprint"] == manifest(root, entries, "images")[1]
    assert records[0]["metrics"]["queries"] == 4 * 3  # half of the 8 classes, 3 images each


def test_bad_split_is_one_line_from_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    root = make_folder(tmp_path / "d")
    protocol = write_protocol(tmp_path, root, "{test_fraction: 0.5, column: true}")
    assert main(["validate", str(protocol)]) == 2
    err = capsys.readouterr().err.strip()
    assert re.fullmatch(r"error: .*p\.yaml: data\.params\.split: .*exactly one split rule.*", err)


# --- the example of docs/protocols.md, as written -----------------------------------------

DOCS = Path(__file__).resolve().parents[2] / "docs" / "protocols.md"


def doc_section() -> str:
    text = DOCS.read_text(encoding="utf-8")
    start = text.index("\n## Your own data set\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def fenced(section: str, lang: str) -> str:
    match = re.search(rf"^```{lang}\n(.*?)^```", section, re.M | re.S)
    assert match, f"no ```{lang} block in the section"
    return match.group(1)


def test_the_docs_example_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    section = doc_section()
    spec = yaml.safe_load(fenced(section, "yaml"))
    classes = re.findall(r"(\w+)/", fenced(section, "text"))[1:]  # after the root folder
    assert len(set(classes)) == 8
    monkeypatch.chdir(tmp_path)
    for c, name in enumerate(dict.fromkeys(classes)):
        for i in range(3):
            png(tmp_path / spec["data"]["root"] / name / f"{i:04d}.png", 30 * c + 7 * i, size=16)
    (tmp_path / f"{spec['name']}.yaml").write_text(fenced(section, "yaml"), encoding="utf-8")
    commands = [shlex.split(line) for line in fenced(section, "bash").splitlines()]
    assert [c[:2] for c in commands] == [["dmlbench", "validate"], ["dmlbench", "run"]]
    for command in commands:
        assert main(command[1:]) == 0, command
    records = list((tmp_path / "results" / spec["name"]).rglob("*-seed0*.json"))
    assert {json.loads(p.read_text())["method"] for p in records} >= set(spec["methods"])
