"""Published numbers: strict schema, shipped files load and are sane, matcher, comparison table."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, get_args

import pandas as pd
import pytest
from pydantic import ValidationError

from dmlbench.errors import DmlbenchError
from dmlbench.methods import METHODS
from dmlbench.report.published import (
    MethodName,
    PublishedEntry,
    PublishedFile,
    load_published,
    load_published_file,
    matching,
    reported_vs_reproduced,
)
from tests.report.test_build import PUBLISHED

ENTRY: dict[str, Any] = {
    "dataset": "cub200",
    "method": "npairs",
    "kind": "reproduced",
    "source": "Somebody 2019, Table 9",
    "backbone": "bn-inception",
    "embedding_size": 64,
    "values": {"recall@1": 50.0, "nmi": 60.0},
}
NAMES = {
    "triplet-semihard", "lifted", "npairs", "angular", "structured-clustering", "margin",
    "prototypical", "proxy-triplet", "proxy-nca", "proxy-softmax", "ranked-list", "dreml",
    "multi-similarity", "binomial", "contrastive", "log-ratio", "triplet-dense", "triplet-binary",
}  # fmt: skip


def test_schema_rejects_unknown_keys_methods_metrics_and_ranges(tmp_path: Path) -> None:
    PublishedEntry.model_validate(ENTRY)
    for bad in (
        {**ENTRY, "colour": "red"},
        {**ENTRY, "method": "npair"},
        {**ENTRY, "kind": "guessed"},
        {**ENTRY, "values": {"recall@1": 0.5, "recal@2": 60.0}},
        {**ENTRY, "values": {"recall@1": 101.0}},
        {**ENTRY, "values": {}},
    ):
        with pytest.raises(ValidationError):
            PublishedEntry.model_validate(bad)
    with pytest.raises(ValidationError):
        PublishedFile.model_validate({"paper": "x", "entrys": []})
    typo = tmp_path / "typo.yaml"
    typo.write_text("paper: x\nentries:\n  - {dataset: cub200, methd: npairs}\n")
    with pytest.raises(DmlbenchError, match=r"typo\.yaml: entries\.0\."):
        load_published_file(typo)


def test_null_cells_are_allowed_and_skipped() -> None:
    e = PublishedEntry.model_validate({**ENTRY, "values": {"recall@1": None, "nmi": 60.0}})
    table = pd.DataFrame(
        {"recall@1": [0.5], "recall@1_std": [0.0], "nmi": [0.6], "nmi_std": [0.0], "seeds": [1]},
        index=["npairs"],
    )
    comp = reported_vs_reproduced([e], "cub200", table)
    assert comp["metric"].tolist() == ["nmi"]


def test_shipped_files_load_with_registered_methods_and_percentages() -> None:
    files = sorted(PUBLISHED.glob("*.yaml"))
    assert {f.name for f in files} >= {"fehervari2019.yaml", "wang2019_ms.yaml", "kim2019.yaml"}
    for f in files:
        load_published_file(f)
    entries = load_published(PUBLISHED)
    assert {e.dataset for e in entries} == {"cub200", "cars196", "sop", "inshop"}
    assert set(get_args(MethodName)) == NAMES
    registered = set(METHODS.list())
    for e in entries:
        assert e.method in NAMES and e.method in registered
        present = {k: v for k, v in e.values.items() if v is not None}
        assert present and all(0.0 <= v <= 100.0 for v in present.values())
        # a transposed cell shows up as a recall that falls as K grows
        recalls = sorted((int(k.split("@")[1]), v) for k, v in present.items() if "recall@" in k)
        assert [v for _, v in recalls] == sorted(v for _, v in recalls), (e.method, e.source)
        assert re.search(r"Tables? \d", e.source), e.source


def test_each_fehervari_table_has_its_rows() -> None:
    entries = load_published_file(PUBLISHED / "fehervari2019.yaml").entries
    count = lambda ds, kind, bb: sum(  # noqa: E731
        (e.dataset, e.kind, e.backbone) == (ds, kind, bb) for e in entries
    )
    assert count("cub200", "reproduced", "bn-inception") == 12  # Table 2, first column
    assert count("cub200", "reproduced", "resnet50") == 11  # no ResNet number for one method
    assert count("cars196", "reproduced", "bn-inception") == 12  # Table 3
    assert count("sop", "reproduced", "bn-inception") == 8  # Table 4 (no triplet, lifted)


def test_matcher_finds_cub_inception_64_and_nothing_for_glyphs() -> None:
    entries = load_published(PUBLISHED)
    cub = matching(entries, "cub200")
    assert cub and {(e.dataset, e.backbone, e.embedding_size) for e in cub} == {
        ("cub200", "bn-inception", 64)
    }
    assert {"reported", "reproduced"} == {e.kind for e in cub}
    ms = matching(entries, "cub200-ms512")
    assert "multi-similarity" in {e.method for e in ms}
    assert all(e.embedding_size == 512 for e in ms)
    assert matching(entries, "glyphs-mini") == [] and matching(entries, "glyphs") == []
    assert matching(entries, "my-own-protocol") == []


def test_comparison_table_in_percent_with_difference() -> None:
    a = PublishedEntry.model_validate({**ENTRY, "values": {"recall@1": 50.0, "nmi": 60.0}})
    quoted = PublishedEntry.model_validate({**ENTRY, "source": "Other 2020, Table 1"})
    other = PublishedEntry.model_validate({**ENTRY, "embedding_size": 512})
    table = pd.DataFrame(
        {
            "recall@1": [0.53, 0.4],
            "recall@1_std": [0.01, 0.0],
            "nmi": [0.58, 0.5],
            "nmi_std": [0.02, 0.0],
            "seeds": [3, 3],
        },
        index=["npairs", "contrastive"],
    )
    comp = reported_vs_reproduced([a, quoted, other], "cub200", table)
    assert comp["metric"].tolist() == ["recall@1", "nmi"]
    assert comp["ours"].tolist() == pytest.approx([53.0, 58.0])
    assert comp["ours_std"].tolist() == pytest.approx([1.0, 2.0])
    assert comp["difference"].tolist() == pytest.approx([3.0, -2.0])
    assert comp["source"].iloc[0] == "Somebody 2019, Table 9; Other 2020, Table 1"
    assert reported_vs_reproduced([a], "glyphs-mini", table).empty
