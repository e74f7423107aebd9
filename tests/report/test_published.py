"""Published numbers: the strict schema, the matcher and the comparison table, and every
transcribed file (the papers' tables, repository READMEs, the later papers' own claims and the
later catalogue methods' baselines): it loads, names registered methods and one setting per
entry, keeps its spot values as printed, and is paired only with the shipped protocols whose
setting it shares."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from pydantic import ValidationError

from dmlbench.errors import DmlbenchError
from dmlbench.methods import METHODS
from dmlbench.report.published import (
    PublishedEntry,
    PublishedFile,
    differences,
    load_published,
    load_published_file,
    matching,
    published_protocols,
    reported_vs_reproduced,
    setting_for,
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
    registered = set(METHODS.list())
    for e in entries:
        assert e.method in registered
        present = {k: v for k, v in e.values.items() if v is not None}
        assert present and all(0.0 <= v <= 100.0 for v in present.values())
        # a transposed cell shows up as a recall that falls as K grows
        recalls = sorted((int(k.split("@")[1]), v) for k, v in present.items() if "recall@" in k)
        assert [v for _, v in recalls] == sorted(v for _, v in recalls), (e.method, e.source)
        assert re.search(r"Tables? \d|\S+ table", e.source), e.source  # where exactly


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


TABLE = pd.DataFrame({"recall@1": [0.53], "recall@1_std": [0.01], "seeds": [3]}, index=["npairs"])


@pytest.mark.parametrize(
    ("published", "words"),
    [
        ({"normalized": False}, "normalisation: ours L2-normalised, published not normalised"),
        ({"image_size": 227}, "image size: ours 224, published 227"),
        ({"batch_size": 80}, "batch size: ours 120, published 80"),
        ({"pretrained": "places365"}, "pretraining: ours imagenet, published places365"),
    ],
)
def test_each_differing_setting_is_marked_and_named(published: dict[str, Any], words: str) -> None:
    from dmlbench.report.build import display_comparison

    entry = PublishedEntry.model_validate({**ENTRY, **published})
    comp = reported_vs_reproduced([entry], "cub200@defaults", TABLE)
    assert comp["settings_differ"].tolist() == [words]
    shown = display_comparison(comp)
    assert shown["published"].tolist() == ["50 †1"]
    assert shown.attrs["footnotes"] == [f"†1: settings differ: {words}."]


def test_like_with_like_carries_no_mark() -> None:
    from dmlbench.report.build import display_comparison

    same = {"normalized": True, "image_size": 224, "batch_size": 120, "pretrained": "imagenet"}
    entry = PublishedEntry.model_validate({**ENTRY, **same})
    shown = display_comparison(reported_vs_reproduced([entry], "cub200", TABLE))
    assert shown["published"].tolist() == ["50"] and shown.attrs["footnotes"] == []


def test_a_sweep_of_a_published_protocol_is_not_paired() -> None:
    """cub200@model.embedding_size=512 is not cub200's setting; only budget derivations are."""
    entry = PublishedEntry.model_validate(ENTRY)
    assert reported_vs_reproduced([entry], "cub200@model.embedding_size=512", TABLE).empty
    assert not reported_vs_reproduced([entry], "cub200@trials=4", TABLE).empty


def test_fehervari_unnormalised_rows_are_marked_on_cub200() -> None:
    """Their triplet-semihard, lifted, N-pairs, angular, prototypical ran without normalisation."""
    entries = load_published(PUBLISHED)
    table = pd.DataFrame({"recall@1": [0.5], "recall@1_std": [0.0], "seeds": [1]}, index=["lifted"])
    comp = reported_vs_reproduced(entries, "cub200", table)
    reproduced = comp[comp["kind"] == "reproduced"]
    assert len(reproduced) and all("normalisation" in d for d in reproduced["settings_differ"])


# ---- files transcribed from repository READMEs (see each file's header for the exact table) ----
#: file -> (number of entries, {(dataset, method, backbone, embedding size): {metric: value}}):
#: spot values as printed in the source, so a slip in a later edit of a file fails here.
README_FILES: dict[str, tuple[int, dict[tuple[str, str, str, int], dict[str, float]]]] = {
    "roth2019_baselines.yaml": (
        28,
        {
            ("cub200", "margin", "resnet50", 128): {
                "recall@1": 63.4,
                "recall@8": 90.4,
                "nmi": 68.2,
            },
            ("cub200", "npairs", "googlenet", 512): {"recall@1": 50.6, "recall@4": 74.5},
            ("cars196", "proxy-nca", "resnet50", 128): {"recall@1": 80.0, "nmi": 66.3},
            ("sop", "triplet-semihard", "googlenet", 512): {"recall@1": 66.1, "recall@1000": 97.5},
            ("inshop", "margin", "resnet50", 128): {"recall@1": 84.5, "recall@50": 98.5},
            ("inshop", "npairs", "googlenet", 512): {"recall@1": 75.7, "recall@30": 96.2},
        },
    ),
    "tschernezki2020_proxynca.yaml": (
        3,
        {
            ("cub200", "proxy-nca", "bn-inception", 64): {"recall@1": 52.63, "nmi": 60.64},
            ("cars196", "proxy-nca", "bn-inception", 64): {"recall@1": 72.19, "recall@8": 92.54},
            ("sop", "proxy-nca", "bn-inception", 64): {"recall@1": 74.07, "recall@8": 86.66},
        },
    ),
    "wang2019_ms_readme.yaml": (
        2,
        {
            ("cub200", "multi-similarity", "bn-inception", 64): {
                "recall@1": 57.4,
                "recall@32": 96.4,
            },
            ("cub200", "multi-similarity", "bn-inception", 512): {
                "recall@1": 65.7,
                "recall@16": 95.0,
            },
        },
    ),
}


@pytest.mark.parametrize("name", sorted(README_FILES))
def test_readme_transcriptions_load_with_registered_methods_and_spot_values(name: str) -> None:
    n_entries, spots = README_FILES[name]
    entries = load_published_file(PUBLISHED / name).entries
    assert len(entries) == n_entries
    registered = set(METHODS.list())
    assert {e.method for e in entries} <= registered
    by_setting = {(e.dataset, e.method, e.backbone, e.embedding_size): e for e in entries}
    assert len(by_setting) == len(entries), "two entries share a data set, method and setting"
    for key, values in spots.items():
        entry = by_setting[key]
        for metric, value in values.items():
            assert entry.values[metric] == pytest.approx(value, abs=1e-9), (name, key, metric)
        assert "README" in entry.source and entry.pretrained == "imagenet"


def test_readme_settings_are_recorded() -> None:
    """Each entry names the setting it was obtained under (what the report compares)."""
    for name in README_FILES:
        for e in load_published_file(PUBLISHED / name).entries:
            assert e.image_size in (224, 227) and e.normalized is not None, (name, e.source)
    roth = load_published_file(PUBLISHED / "roth2019_baselines.yaml").entries
    assert {(e.backbone, e.embedding_size, e.image_size) for e in roth} == {
        ("resnet50", 128, 224),
        ("googlenet", 512, 227),
    }
    assert all(e.normalized is (e.method != "npairs") for e in roth)  # N-pair: no L2 norm
    assert all(e.kind == "reproduced" and e.batch_size == 112 for e in roth)
    assert {e.dataset for e in roth if e.method == "proxy-nca"} == {"cub200", "cars196"}


def test_readme_numbers_pair_with_the_shipped_protocols() -> None:
    """BN-Inception 64-d rows meet cub200, the 512-d MS row meets cub200-ms512; others nothing."""
    entries = load_published(PUBLISHED)
    cub = {(e.method, e.kind, e.source) for e in matching(entries, "cub200")}
    assert ("proxy-nca", "reproduced") in {(m, k) for m, k, s in cub if "Tschernezki" in s}
    assert ("multi-similarity", "reported") in {(m, k) for m, k, s in cub if "CVPR 2019" in s}
    ms512 = [
        e for e in matching(entries, "cub200-ms512") if e.source.startswith("Wang et al. CVPR")
    ]
    assert [e.values["recall@1"] for e in ms512] == [65.7]
    # Roth & Brattoli ran ResNet50 / GoogLeNet: no shipped protocol is their setting
    assert not [e for e in matching(entries, "cub200") if e.source.startswith("Roth & Brattoli")]


# ---- the later papers' own claims (kind ``reported``): recalls rise with K (a shifted column
# breaks that), each names the table or quoted row it was read from, and says when a value rests
# on a single secondary source ----
#: file -> (registered methods it names, number of entries,
#: {(dataset, method, backbone, embedding size): {metric: value as printed in the source}}).
PAPER_FILES: dict[str, tuple[set[str], int, dict[tuple[str, str, str, int], dict[str, float]]]] = {
    "qian2019_softtriple.yaml": (
        {"soft-triple"},
        3,
        {
            ("cub200", "soft-triple", "bn-inception", 512): {
                "recall@1": 65.4,
                "recall@2": 76.4,
                "recall@4": 84.5,
                "recall@8": 90.4,
            },
            ("cars196", "soft-triple", "bn-inception", 512): {
                "recall@1": 84.5,
                "recall@2": 90.7,
                "recall@4": 94.5,
            },
            ("sop", "soft-triple", "bn-inception", 512): {
                "recall@1": 78.6,
                "recall@10": 86.6,
                "recall@100": 91.8,
            },
        },
    ),
}

SINGLE_SOURCE = "single secondary source, not checked against the paper"


def _key(e: PublishedEntry) -> tuple[str, str, str, int]:
    return (e.dataset, e.method, e.backbone, e.embedding_size)


@pytest.mark.parametrize("name", sorted(PAPER_FILES))
def test_paper_file_loads_with_registered_methods_and_one_entry_per_setting(name: str) -> None:
    methods, n_entries, _ = PAPER_FILES[name]
    entries = load_published_file(PUBLISHED / name).entries
    assert len(entries) == n_entries
    assert {e.method for e in entries} == methods
    assert set(METHODS.list()) >= methods
    keys = [_key(e) for e in entries]
    assert len(set(keys)) == len(keys), "two entries share a data set, method and setting"


@pytest.mark.parametrize("name", sorted(PAPER_FILES))
def test_paper_spot_values_as_printed(name: str) -> None:
    _, _, spots = PAPER_FILES[name]
    by_key = {_key(e): e for e in load_published_file(PUBLISHED / name).entries}
    assert set(spots) <= set(by_key)
    for key, values in spots.items():
        for metric, value in values.items():
            assert by_key[key].values[metric] == pytest.approx(value, abs=1e-9), (key, metric)


@pytest.mark.parametrize("name", sorted(PAPER_FILES))
def test_paper_recalls_rise_with_k_and_sources_are_named(name: str) -> None:
    for e in load_published_file(PUBLISHED / name).entries:
        present = {k: v for k, v in e.values.items() if v is not None}
        recalls = sorted((int(k.split("@")[1]), v) for k, v in present.items() if "recall@" in k)
        assert len(recalls) >= 3, e.source
        values = [v for _, v in recalls]
        assert values == sorted(values), ("recall falls as K grows", e.source)
        assert e.kind == "reported", e.source
        # the paper's table, or the quoting table and row
        assert re.search(r"Tables? \d|\S+ table", e.source), e.source
        assert re.search(r"Table \d|\brow\b", e.source), e.source
        assert e.note, e.source  # secondary quotes say how far they were checked


def test_softtriple_single_source_values_are_flagged_and_two_source_ones_are_not() -> None:
    by_key = {
        _key(e): e for e in load_published_file(PUBLISHED / "qian2019_softtriple.yaml").entries
    }
    cub = by_key[("cub200", "soft-triple", "bn-inception", 512)]
    cars = by_key[("cars196", "soft-triple", "bn-inception", 512)]
    sop = by_key[("sop", "soft-triple", "bn-inception", 512)]
    # CUB R@1-R@4 were read in two independent READMEs; the SOP row in one only
    assert "CBML" in cub.source and "SEE" in cub.source and "two independent" in (cub.note or "")
    assert SINGLE_SOURCE in (sop.note or "") and SINGLE_SOURCE in (cars.note or "")
    for e in (cub, cars, sop):
        assert e.source.startswith("Qian et al. ICCV 2019, as quoted in")


def test_softtriple_setting_is_recorded_and_its_source_stated() -> None:
    entries = load_published_file(PUBLISHED / "qian2019_softtriple.yaml").entries
    for e in entries:
        assert (e.backbone, e.embedding_size) == ("bn-inception", 512), e.source
        # from the authors' code (train.py, net/bninception.py); no batch size is tied to the rows
        assert (e.image_size, e.normalized, e.pretrained) == (224, True, "imagenet"), e.source
        assert e.batch_size is None, e.source
    assert {e.dataset for e in entries} == {"cub200", "cars196", "sop"}


def test_softtriple_numbers_meet_the_512d_protocols_with_the_image_size_marked() -> None:
    entries = load_published_file(PUBLISHED / "qian2019_softtriple.yaml").entries
    for dataset in ("cub200", "cars196", "sop"):
        found = matching(entries, f"{dataset}-ms512")
        assert [e.dataset for e in found] == [dataset]
        setting = setting_for(f"{dataset}-ms512")
        assert setting is not None
        diff = differences(found[0], setting)
        # the shipped 512-d protocols crop 227, the authors' code 224: marked, never silent
        assert any("image size" in d for d in diff) == (setting.image_size != 224)
        assert not any("normalisation" in d or "pretraining" in d for d in diff)
    # 64-d protocols are another setting: nothing pairs with them
    for protocol in ("cub200", "cars196", "sop", "inshop"):
        assert matching(entries, protocol) == [], protocol


# ---- the later methods of the catalogue (within-pair mining baselines): paired with no shipped
# protocol whose setting they do not share ----
WPM = "withinpairmining_mlrc_baselines.yaml"

#: README row -> registered method, for the rows transcribed (Pretrained, Triplet, Margin with one
#: global beta, MS without its miner and the repository's "+ Ours" rows are not).
WPM_METHODS = {
    "contrastive", "ntxent", "proxy-nca", "margin", "proxy-softmax", "cosface", "arcface",
    "fast-ap", "snr-contrastive", "multi-similarity", "soft-triple",
}  # fmt: skip

#: (dataset, method, backbone, embedding size) -> spot values as printed in the README tables
#: (P@1 as recall@1, RP as r_precision, MAP@R as map@r).
WPM_SPOTS: dict[tuple[str, str, str, int], dict[str, float]] = {
    ("cub200", "contrastive", "bn-inception-x4", 512): {
        "recall@1": 68.13,
        "r_precision": 37.24,
        "map@r": 26.53,
    },
    ("cub200", "arcface", "bn-inception-x4", 512): {"recall@1": 67.50, "map@r": 26.45},
    ("cub200", "soft-triple", "bn-inception", 128): {"recall@1": 59.94, "r_precision": 32.12},
    ("cub200", "margin", "bn-inception", 128): {"recall@1": 55.56, "map@r": 18.51},
    ("cub200", "multi-similarity", "bn-inception", 128): {"recall@1": 59.41, "map@r": 21.01},
    ("cars196", "fast-ap", "bn-inception-x4", 512): {"recall@1": 78.45, "map@r": 23.14},
    ("cars196", "snr-contrastive", "bn-inception-x4", 512): {"recall@1": 82.02, "map@r": 25.03},
    ("cars196", "proxy-softmax", "bn-inception", 128): {"recall@1": 72.55, "r_precision": 29.35},
    ("cars196", "cosface", "bn-inception", 128): {"recall@1": 74.67, "map@r": 18.80},
}


def test_wpm_file_loads_with_registered_methods_and_one_entry_per_setting() -> None:
    entries = load_published_file(PUBLISHED / WPM).entries
    assert len(entries) == 44  # 11 methods x 2 data sets x (concatenated, separated)
    assert {e.method for e in entries} == WPM_METHODS
    assert set(METHODS.list()) >= WPM_METHODS
    keys = [(e.dataset, e.method, e.backbone, e.embedding_size) for e in entries]
    assert len(set(keys)) == len(keys), "two entries share a data set, method and setting"
    for dataset in ("cub200", "cars196"):
        for setting in (("bn-inception-x4", 512), ("bn-inception", 128)):
            methods = {m for d, m, b, s in keys if (d, (b, s)) == (dataset, setting)}
            assert methods == WPM_METHODS, (dataset, setting)


def test_wpm_spot_values_as_printed() -> None:
    by_key = {
        (e.dataset, e.method, e.backbone, e.embedding_size): e
        for e in load_published_file(PUBLISHED / WPM).entries
    }
    for key, values in WPM_SPOTS.items():
        for metric, value in values.items():
            assert by_key[key].values[metric] == pytest.approx(value, abs=1e-9), (key, metric)


def test_wpm_metrics_and_setting_are_recorded() -> None:
    for e in load_published_file(PUBLISHED / WPM).entries:
        assert set(e.values) == {"recall@1", "r_precision", "map@r"}, e.source
        # MAP@R never exceeds R-precision, and every row here has RP below P@1: a cell
        # moved to the wrong column breaks the order
        assert e.values["map@r"] <= e.values["r_precision"] <= e.values["recall@1"], e.source
        assert e.kind == "reproduced" and "README" in e.source and " table, " in e.source
        assert (e.image_size, e.batch_size, e.normalized, e.pretrained) == (
            227,
            32,
            True,
            "imagenet",
        )
        concatenated = "Concatenated (512-dim)" in e.source
        assert (e.backbone, e.embedding_size) == (
            ("bn-inception-x4", 512) if concatenated else ("bn-inception", 128)
        ), e.source


def test_wpm_entries_are_paired_with_no_shipped_protocol() -> None:
    """Four concatenated 128-d models are not a 512-d model: cub200-ms512 must not meet them."""
    entries = load_published_file(PUBLISHED / WPM).entries
    for protocol in published_protocols():
        assert matching(entries, protocol) == [], protocol
