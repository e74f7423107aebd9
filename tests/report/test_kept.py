"""Kept test embeddings for the pictures: written, found and read back."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dmlbench.errors import DmlbenchError
from dmlbench.report.kept import (
    find_kept,
    load_kept,
    picture_path,
    pictured_methods,
    save_picture_file,
)
from tests.report.test_build import rec


def test_a_picture_file_round_trips_in_half_precision(tmp_path: Path) -> None:
    e = np.random.default_rng(0).normal(size=(6, 4)).astype(np.float32)
    path = picture_path(tmp_path, "p", "ab" * 32, "margin")
    save_picture_file(path, e, np.arange(6), {"name": "p"}, "fp", "margin", {"recall@1": 0.5})
    kept = load_kept(path)
    assert kept.embeddings.dtype == np.float32
    assert np.allclose(kept.embeddings, e, atol=1e-2)
    assert kept.protocol == {"name": "p"} and kept.metrics == {"recall@1": 0.5}
    assert kept.method == "margin" and kept.data_fingerprint == "fp"
    assert find_kept(tmp_path) == {("abababababab", "margin"): path}


def test_a_runs_own_kept_file_is_found_with_its_model_card(tmp_path: Path) -> None:
    folder = tmp_path / "p" / "abababababab"
    (folder / "artifacts").mkdir(parents=True)
    np.savez(folder / "artifacts" / "npairs-seed0-final-embeddings.npz",
             embeddings=np.ones((2, 3), np.float32), labels=np.array([0, 1]))  # fmt: skip
    (folder / "artifacts" / "npairs-seed0-final-model.yaml").write_text(
        "protocol: {name: p}\nmethod: npairs\n", encoding="utf-8"
    )
    (folder / "npairs-seed0-final.json").write_text('{"data_fingerprint": "fp"}', encoding="utf-8")
    np.savez(folder / "artifacts" / "npairs-seed1-final-embeddings.npz", embeddings=np.ones(1))
    found = find_kept(tmp_path)
    assert list(found) == [("abababababab", "npairs")]  # seed 0 only
    kept = load_kept(found["abababababab", "npairs"])
    assert kept.protocol == {"name": "p"} and kept.data_fingerprint == "fp"


def test_an_unreadable_file_is_one_line_naming_it(tmp_path: Path) -> None:
    bad = tmp_path / "x.npz"
    bad.write_bytes(b"not a zip")
    with pytest.raises(DmlbenchError, match=r"x\.npz"):
        load_kept(bad)


def test_the_pictured_entries_are_the_best_method_and_the_baseline() -> None:
    finals = (
        [rec("a", s, m={"recall@1": 0.5}) for s in range(2)]
        + [rec("b", s, m={"recall@1": 0.6}) for s in range(2)]
        + [rec("untrained", s, m={"recall@1": 0.9}) for s in range(2)]
    )
    assert pictured_methods(finals) == ["b", "untrained"]
    assert pictured_methods(finals, baseline="a") == ["b", "a"]
