"""Published numbers of the later papers' own claims (kind ``reported``): each transcribed file
loads, names registered methods and one setting per entry, keeps its spot values as printed,
has recalls that rise with K (a shifted column breaks that), names the table or quoted row it
was read from, and says when a value rests on a single secondary source."""

from __future__ import annotations

import re

import pytest

from dmlbench.methods import METHODS
from dmlbench.report.published import (
    PublishedEntry,
    differences,
    load_published_file,
    matching,
    setting_for,
)
from tests.report.test_build import PUBLISHED

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
