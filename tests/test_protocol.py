"""Protocols: strict validation with errors that name file and key, include, hash, lock."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from dmlbench.errors import ProtocolError
from dmlbench.protocol import builtin_dir, builtin_names, load_protocol, protocol_hash
from dmlbench.protocols import check_lock, write_lock

BASE = """\
name: mine
version: 1
data: {dataset: glyphs, params: {num_classes: 40}}
model: {backbone: small-cnn, embedding_size: 32}
batch: {size: 32}
optim: {lr: 0.001, epochs: 1}
seeds: [0]
"""


def test_every_shipped_protocol_loads_and_is_locked() -> None:
    assert {"glyphs-mini", "glyphs"} <= set(builtin_names())
    for name in builtin_names():
        assert load_protocol(name).name == name
    assert check_lock() == []


def test_unknown_key_names_file_key_and_suggestion(write_yaml) -> None:
    path = write_yaml("p.yaml", BASE.replace("model: {", "model: {embeding_size: 3, "))
    with pytest.raises(ProtocolError) as err:
        load_protocol(path)
    msg = str(err.value)
    assert str(path) in msg and "model.embeding_size: unknown key" in msg
    assert "did you mean 'embedding_size'" in msg
    assert "\n" not in msg


def test_wrong_type_and_bad_range(write_yaml) -> None:
    with pytest.raises(ProtocolError, match=r"batch\.size: .*integer"):
        load_protocol(write_yaml("a.yaml", BASE.replace("size: 32", "size: many")))
    with pytest.raises(ProtocolError, match=r"optim\.lr: .*greater than 0"):
        load_protocol(write_yaml("b.yaml", BASE.replace("lr: 0.001", "lr: -1")))


def test_missing_required_field(write_yaml) -> None:
    with pytest.raises(ProtocolError, match=r"seeds: required key is missing"):
        load_protocol(write_yaml("p.yaml", BASE.replace("seeds: [0]\n", "")))


def test_data_params_are_validated_by_the_data_set(write_yaml) -> None:
    path = write_yaml("p.yaml", BASE.replace("num_classes: 40", "num_clases: 40"))
    with pytest.raises(ProtocolError, match=r"data\.params\.num_clases: unknown key.*num_classes"):
        load_protocol(path)


def test_unknown_components_suggest_names(write_yaml) -> None:
    with pytest.raises(ProtocolError, match="did you mean 'glyphs'"):
        load_protocol(write_yaml("a.yaml", BASE.replace("dataset: glyphs", "dataset: glyph")))
    with pytest.raises(ProtocolError, match="did you mean 'small-cnn'"):
        load_protocol(write_yaml("b.yaml", BASE.replace("small-cnn", "small_cnn")))
    with pytest.raises(ProtocolError, match="did you mean 'contrastive'"):
        load_protocol(write_yaml("c.yaml", BASE + "methods: [contrastiv]\n"))


def test_yaml_syntax_error_names_line(write_yaml) -> None:
    with pytest.raises(ProtocolError, match=r"p\.yaml: line \d+"):
        load_protocol(write_yaml("p.yaml", BASE + "optim: {lr: [\n"))


def test_include_overrides_keys(write_yaml) -> None:
    write_yaml("base.yaml", BASE)
    child = write_yaml(
        "child.yaml", "include: base.yaml\nname: child\nmodel: {embedding_size: 128}\n"
    )
    p = load_protocol(child)
    assert p.name == "child" and p.model.embedding_size == 128
    assert p.model.backbone == "small-cnn"  # kept from the base (deep merge)


def test_include_cycle_is_an_error(write_yaml) -> None:
    write_yaml("a.yaml", "include: b.yaml\n")
    b = write_yaml("b.yaml", "include: a.yaml\n")
    with pytest.raises(ProtocolError, match="include cycle"):
        load_protocol(b)


def test_hash_covers_numbers_not_free_text(write_yaml) -> None:
    p = load_protocol(write_yaml("a.yaml", BASE))
    same = load_protocol(write_yaml("b.yaml", BASE + "description: words\n"))
    rooted = p.model_copy(update={"data": p.data.model_copy(update={"root": "/data"})})
    assert protocol_hash(p) == protocol_hash(same) == protocol_hash(rooted)
    assert p.with_overrides({"model.embedding_size": 64}).hash != p.hash
    assert len(p.hash) == 64


def test_lock_detects_change_without_version_bump(tmp_path: Path) -> None:
    folder = tmp_path / "protocols"
    folder.mkdir()
    shutil.copy(builtin_dir() / "glyphs-mini.yaml", folder / "glyphs-mini.yaml")
    write_lock(folder)
    assert check_lock(folder) == []
    path = folder / "glyphs-mini.yaml"
    raw = yaml.safe_load(path.read_text())
    raw["optim"]["epochs"] = 99
    path.write_text(yaml.safe_dump(raw))
    problems = check_lock(folder)
    assert len(problems) == 1 and "bump" in problems[0]
    with pytest.raises(ProtocolError, match="bump"):
        write_lock(folder)
    raw["version"] += 1
    path.write_text(yaml.safe_dump(raw))
    write_lock(folder)
    assert check_lock(folder) == []


def test_every_shipped_protocol_states_its_search_explicitly() -> None:
    """No protocol inherits an implicit budget, validation or pruner from the schema."""
    from dmlbench.protocol import _load_raw

    for name in builtin_names():
        raw = _load_raw(builtin_dir() / f"{name}.yaml", seen=())
        search = raw.get("search", {})
        missing = {"trials", "pruner", "validation"} - set(search)
        assert not missing, f"{name}.yaml: search.{sorted(missing)} not stated"
        assert {"folds", "fraction"} <= set(search["validation"]), name


def test_derived_protocols_have_derived_names() -> None:
    base = load_protocol("glyphs-mini")
    assert base.without_search().name == "glyphs-mini@defaults"
    assert base.with_trials(8).name == "glyphs-mini@trials=8"
    assert base.with_trials(base.search.trials) is base
    assert base.without_search().hash != base.hash != base.with_trials(8).hash


@pytest.mark.parametrize(("key", "value"), [("steps_per_epoch", 3), ("backbone_lr", 3e-4)])
def test_optional_optim_keys_left_out_of_the_hash_at_their_default(key: str, value: float) -> None:
    """Adding an option did not change the identity of protocols that do not use it."""
    base = load_protocol("glyphs-mini")
    assert getattr(base.optim, key) is None
    assert base.with_overrides({f"optim.{key}": value}).hash != base.hash
    assert base.hash == protocol_hash(base.with_overrides({f"optim.{key}": None}))


@pytest.mark.parametrize("key", ["model.channels_last", "model.compile"])
def test_numeric_path_keys_are_hashed_only_when_asked_for(key: str) -> None:
    """NHWC and torch.compile round differently, so asking for them is a new protocol; the
    protocols that do not (glyphs, asking for neither) keep their identity."""
    base = load_protocol("glyphs")
    assert base.hash == protocol_hash(base.with_overrides({key: False}))
    assert base.with_overrides({key: True}).hash != base.hash


def test_a_batch_a_listed_method_cannot_fill_is_refused_by_validate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Batches of 64 and multi-similarity's 5 images per class: 60 or 65 images, never the
    protocol's 64. ``validate`` refuses with one line naming the key, the method, both numbers."""
    from dmlbench.cli.main import main

    path = tmp_path / "odd-batch.yaml"
    path.write_text(
        "include: glyphs-mini\nname: odd-batch\nbatch: {size: 64}\n"
        "methods: [contrastive, multi-similarity]\n"
    )
    assert main(["validate", str(path)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert str(path) in lines[0] and "batch.size" in lines[0]
    assert "multi-similarity" in lines[0] and "64" in lines[0] and "samples_per_class 5" in lines[0]
    # Fixing the samples per class for every method makes the same batch exact.
    path.write_text(
        "include: glyphs-mini\nname: odd-batch\nbatch: {size: 64, samples_per_class: 4}\n"
        "methods: [contrastive, multi-similarity]\n"
    )
    assert main(["validate", str(path)]) == 0
    assert "odd-batch" in capsys.readouterr().out
