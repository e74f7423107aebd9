"""Bring-your-own data (dmlbench.data.custom): layouts, split rules, errors, a run end to end."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from pydantic import ValidationError

from dmlbench.data.custom import SplitSpec, index_entries
from dmlbench.errors import DataError

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


def sides(entries: list) -> dict[str, set[int]]:  # type: ignore[type-arg]
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
def test_split_spec_needs_exactly_one_valid_rule(kwargs: dict) -> None:  # type: ignore[type-arg]
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
