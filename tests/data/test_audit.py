"""The data audit finds look-alike classes (within and across splits, identical and nearly
so) and near-blank images, ignores copies within one class, and fails on today's glyphs-mini,
whose Greek, Cyrillic and Latin capitals share drawings."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from dmlbench.cli.main import main
from dmlbench.data.audit import NEAR_RMS, audit, lookalikes
from dmlbench.data.base import DataSplits, Split
from dmlbench.protocol import load_protocol


def _splits(
    train: np.ndarray, y_train: list[int], test: np.ndarray, y_test: list[int]
) -> DataSplits:
    def split(x: np.ndarray, y: list[int]) -> Split:
        images = [torch.tensor(row) for row in x]  # indexable like the real image datasets
        return Split(images, np.array(y))

    return DataSplits(train=split(train, y_train), test=split(test, y_test), fingerprint="x")


def _distinct(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0, 1, size=(n, 1, 4, 4)).astype(np.float32)


def test_clean_data_passes_and_copies_within_a_class_are_fine() -> None:
    train, test = _distinct(4, 0), _distinct(4, 1)
    test[1] = test[0]  # two images of class 0 drawn alike (two fonts agreeing): fine
    found = audit("toy", _splits(train, [0, 0, 1, 1], test, [0, 0, 1, 1]))
    assert found.ok and "audit passed" in found.summary()


def test_lookalikes_within_and_across_splits_are_counted() -> None:
    train, test = _distinct(4, 0), _distinct(4, 1)
    test[2] = test[0]  # an identical drawing in another test class
    test[3] = np.clip(train[1] + 0.004, 0, 1)  # nearly a training image (another class)
    train[3] = train[0]  # two training classes alike
    found = audit("toy", _splits(train, [0, 1, 2, 3], test, [0, 1, 2, 3]))
    assert not found.ok
    assert found.images_with_a_lookalike("test") == 2  # both ends of the pair are queries
    assert found.class_pairs("test", identical_only=True) == {(0, 2)}
    assert found.images_with_a_lookalike("test~train") == 1
    assert found.images_with_a_lookalike("test~train", identical_only=True) == 0
    assert found.class_pairs("train") == {(0, 3)}
    assert "audit FAILED" in found.summary()


def test_near_blank_images_are_named() -> None:
    train, test = _distinct(3, 0), _distinct(3, 1)
    test[1] = 0.97  # white on white
    found = audit("toy", _splits(train, [0, 1, 2], test, [0, 1, 2]))
    assert found.blank == {"train": [], "test": [1]} and not found.ok


def test_near_means_within_the_rms_limit_and_not_beyond() -> None:
    a = _distinct(1, 0).reshape(1, -1)
    just_in = np.clip(a + NEAR_RMS * 0.9, 0, 1)
    beyond = np.clip(a + NEAR_RMS * 3, 0, 1)
    b = np.concatenate([just_in, beyond])
    assert [(i, j) for i, j, _ in lookalikes(a, b, same_split=False)] == [(0, 0)]


def test_glyphs_mini_fails_the_audit(capsys: pytest.CaptureFixture[str]) -> None:
    """Today's glyphs-mini: Β/В/B and the like share drawings (the audit's reason to exist)."""
    assert main(["data", "audit", "--protocol", "glyphs-mini"]) == 1
    out = capsys.readouterr().out
    assert "audit FAILED" in out
    line = next(x for x in out.splitlines() if "look-alike in a training class" in x)
    assert int(line.split(":")[1].split()[0]) > 100  # e.g. Greek Β drawn as Latin B


def test_glyphs_drawn_distinct_pass_the_audit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """glyphs-mini with ``distinct: true``: no look-alike within or across splits."""
    protocol = load_protocol("glyphs-mini").with_overrides({"data.params.distinct": True})
    path = tmp_path / "glyphs-distinct.yaml"
    path.write_text(yaml.safe_dump(protocol.model_dump(mode="json")), encoding="utf-8")
    assert main(["data", "audit", "--protocol", str(path)]) == 0
    assert "audit passed" in capsys.readouterr().out


def test_a_continuous_label_set_has_no_classes_to_confuse(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["data", "audit", "--protocol", "poses-mini"]) == 0
    assert "audit passed" in capsys.readouterr().out


def test_the_help_states_the_modules_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    """The parser must not import torch (so it cannot import the audit): its help repeats the
    defaults, and this keeps the two in step."""
    from dmlbench.data import audit as audit_mod

    with pytest.raises(SystemExit):
        main(["data", "audit", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"default {audit_mod.NEAR_RMS:g}:" in text
    assert f"default {audit_mod.BLANK_STD:g};" in text
