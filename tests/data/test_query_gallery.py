"""The ``images`` source with an index in Open Metric Learning's format (is_query/is_gallery):
roles, evaluation of queries against the gallery, and one line naming the file and line (or
column) for each kind of bad CSV."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dmlbench.data import load_data
from dmlbench.data.custom import SplitSpec, index_entries
from dmlbench.errors import DataError
from dmlbench.metrics.retrieval import embedding_metrics
from dmlbench.protocol import MetricsSpec, load_protocol
from tests.data.test_custom import png

HEADER = "label,path,split,is_query,is_gallery"
COLUMN = SplitSpec(column=True)


def shop(root: Path, both: bool = False, header: str = HEADER, extra: tuple[str, ...] = ()) -> Path:
    """4 train classes of 3 images; 3 test classes of 3: image 0 gallery, 1-2 queries (or all
    both)."""
    lines = [header]
    for label in range(7):
        for i in range(3):
            path = f"img/{label}_{i}.png"
            png(root / path, 30 * label + i)
            if label < 4:
                lines.append(f"{label},{path},train,,")
            else:
                q, g = (True, True) if both else (i > 0, i == 0)
                lines.append(f"{label},{path},validation,{q},{g}")
    (root / "oml.csv").write_text("\n".join([*lines, *extra]) + "\n", encoding="utf-8")
    return root


def test_one_role_rows_become_queries_and_a_gallery(tmp_path: Path) -> None:
    entries = index_entries(shop(tmp_path), COLUMN, "oml.csv")
    roles = [e.role for e in entries]
    assert roles.count("train") == 12 and roles.count("query") == 6 and roles.count("gallery") == 3
    assert [e.label for e in entries[12:15]] == [4, 4, 4]


def test_both_role_rows_are_a_test_split_where_each_image_queries_the_others(
    tmp_path: Path,
) -> None:
    entries = index_entries(shop(tmp_path, both=True), COLUMN, "oml.csv")
    assert [e.role for e in entries].count("test") == 9


def test_the_run_scores_queries_against_the_gallery(tmp_path: Path) -> None:
    protocol = load_protocol("glyphs-mini").model_validate(
        {
            **load_protocol("glyphs-mini").model_dump(mode="json"),
            "data": {
                "dataset": "images",
                "root": str(shop(tmp_path)),
                "params": {"index": "oml.csv", "split": {"column": True}},
            },
            "images": {"train": {"resize": 8}, "test": {"resize": 8}},
        }
    )
    test = load_data(protocol, cache=tmp_path / "cache").test
    assert test.queries is not None and test.gallery is not None
    assert len(test.queries) == 6 and len(test.gallery) == 3
    labels = np.asarray(test.labels)
    emb = np.eye(3, dtype=np.float32)[labels - 4] + 0.01  # each class its own direction
    out = embedding_metrics(emb, labels, MetricsSpec(nmi=False, recall_at=[1]), test.queries,
                            test.gallery)  # fmt: skip
    assert out["queries"] == 6 and out["recall@1"] == 1.0


BAD: dict[str, tuple[dict[str, Any], str]] = {
    "missing column": (dict(header="label,path,split,is_query"), r"oml\.csv:1: no column 'is_gallery'"),
    "unknown column": (dict(header=HEADER + ",x_1"), r"oml\.csv:1: column 'x_1' is unknown"),
    "unknown path": (dict(extra=("5,img/none.png,validation,True,False",)), r"oml\.csv:23: image .*none\.png not found"),
    "listed twice": (dict(extra=("9,img/0_0.png,validation,True,False",)), r"oml\.csv:23: .*listed twice"),
    "bad boolean": (dict(extra=("5,img/x.png,validation,maybe,False",)), r"oml\.csv:23: column is_query: 'maybe'"),
    "train query": (dict(extra=("1,img/x.png,train,True,",)), r"oml\.csv:23: column is_query: a train image"),
    "class on both sides": (dict(extra=("1,img/x.png,test,True,False",)), r"oml\.csv:23: class '1' is in test here"),
    "mixed": (dict(extra=("5,img/x.png,test,True,True",)), r"oml\.csv:\d+: (query|gallery) only, but .*oml\.csv:23 is both"),
}  # fmt: skip


@pytest.mark.parametrize("case", BAD)
def test_a_bad_csv_is_one_line_naming_file_and_line(case: str, tmp_path: Path) -> None:
    kwargs, message = BAD[case]
    root = shop(tmp_path, **kwargs)
    if case != "unknown path":
        png(root / "img" / "x.png", 7)
    with pytest.raises(DataError, match=message) as err:
        index_entries(root, COLUMN, "oml.csv")
    assert "\n" not in str(err.value)


def test_a_query_class_without_gallery_and_a_file_without_queries(tmp_path: Path) -> None:
    root = shop(tmp_path / "a", extra=("9,img/x.png,validation,True,False",))
    png(root / "img" / "x.png", 1)
    with pytest.raises(DataError, match=r"oml\.csv:23: query of class '9', which has no gallery"):
        index_entries(root, COLUMN, "oml.csv")
    root = tmp_path / "b"
    lines = [HEADER, "0,a.png,train,,", "1,b.png,validation,False,True"]
    for name in ("a.png", "b.png"):
        png(root / name, 1)
    (root / "oml.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=re.escape(f"{root / 'oml.csv'}: no row has is_query")):
        index_entries(root, COLUMN, "oml.csv")


def test_the_split_must_be_the_files(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"data\.params\.split: .*use split: \{column: true\}"):
        index_entries(shop(tmp_path), SplitSpec(test_fraction=0.5), "oml.csv")
