"""Published numbers for the later methods of the catalogue: the transcribed files load, name
registered methods and one setting per entry, keep their spot values as printed, and are paired
with no shipped protocol whose setting they do not share."""

from __future__ import annotations

import pytest

from dmlbench.methods import METHODS
from dmlbench.report.published import PUBLISHED_PROTOCOLS, load_published_file, matching
from tests.report.test_build import PUBLISHED

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
    for protocol in PUBLISHED_PROTOCOLS:
        assert matching(entries, protocol) == [], protocol
