"""The data audit finds look-alike classes (within and across splits, identical and nearly
so) and near-blank images, ignores copies within one class, and fails on glyphs-mini v4's letters,
whose Greek, Cyrillic and Latin capitals share drawings."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from dmlbench.cli.main import main
from dmlbench.data.audit import NEAR_RMS, audit, lookalikes, to_drop
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


def _audit_variant(tmp_path: Path, distinct: bool) -> int:
    protocol = load_protocol("glyphs-mini").with_overrides({"data.params.distinct": distinct})
    path = tmp_path / "glyphs-variant.yaml"
    path.write_text(yaml.safe_dump(protocol.model_dump(mode="json")), encoding="utf-8")
    return main(["data", "audit", "--protocol", str(path)])


def test_glyphs_mini_up_to_v4_fails_the_audit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """glyphs-mini's letters as v4 drew them: Β/В/B and the like share drawings (the audit's
    reason to exist)."""
    assert _audit_variant(tmp_path, distinct=False) == 1
    out = capsys.readouterr().out
    assert "audit FAILED" in out
    line = next(x for x in out.splitlines() if "look-alike in a training class" in x)
    assert int(line.split(":")[1].split()[0]) > 100  # e.g. Greek Β drawn as Latin B


def test_glyphs_mini_passes_the_audit(capsys: pytest.CaptureFixture[str]) -> None:
    """The shipped glyphs-mini (``distinct: true`` since v5): no look-alike within or across
    splits."""
    assert load_protocol("glyphs-mini").data.params["distinct"] is True
    assert main(["data", "audit", "--protocol", "glyphs-mini"]) == 0
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


def test_to_drop_removes_what_the_audit_found_and_nothing_else() -> None:
    """Test classes 10 and 11 drawn alike: 11 goes (the later); test class 12 drawn like
    training class 1: 12 goes; a near-blank training image goes, and its class 2 with it (one
    image left); the audit of what remains passes."""
    train, test = _distinct(6, 0), _distinct(8, 1)
    y_train, y_test = [0, 0, 1, 1, 2, 2], [10, 10, 11, 11, 12, 12, 13, 13]
    test[2] = test[0]  # 11 looks like 10
    test[4] = train[2]  # 12 looks like 1
    train[5] = 0.5  # near-blank
    found = audit("x", _splits(train, y_train, test, y_test))
    labels = {"train": np.array(y_train), "test": np.array(y_test)}
    dropped = to_drop(found, labels)
    assert dropped.classes == {11, 12, 2}
    assert dropped.images == {"train": {5}, "test": frozenset()}
    keep = {
        s: [
            i
            for i, c in enumerate(labels[s])
            if c not in dropped.classes and i not in dropped.images[s]
        ]
        for s in labels
    }
    x = {"train": train, "test": test}
    again = audit(
        "x",
        _splits(x["train"][keep["train"]], [y_train[i] for i in keep["train"]],
                x["test"][keep["test"]], [y_test[i] for i in keep["test"]]),
    )  # fmt: skip
    assert again.ok


def test_icons_mini_drawn_distinct_passes_the_audit() -> None:
    """icons-mini with ``distinct: true``: the audit of the protocol passes, and the look-alike
    and near-blank images its v4 data hold are gone from the loaded splits."""
    from dmlbench.data import load_data
    from dmlbench.data.audit import audit_protocol

    plain = load_protocol("icons-mini")
    assert not audit_protocol(plain).ok
    distinct = plain.with_overrides({"data.params.distinct": True})
    assert audit_protocol(distinct).ok
    before, after = load_data(plain), load_data(distinct)
    gone = len(before.train) + len(before.test) - len(after.train) - len(after.test)
    assert gone == after.info["dropped_images"] > 0
    assert after.fingerprint != before.fingerprint
