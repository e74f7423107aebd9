"""``include:`` names a file beside the protocol or, failing that, a shipped protocol."""

from __future__ import annotations

from pathlib import Path

import pytest

from dmlbench.errors import ProtocolError
from dmlbench.protocol import load_protocol


def test_include_a_shipped_protocol_by_name(tmp_path: Path) -> None:
    mine = tmp_path / "mine.yaml"
    mine.write_text("include: glyphs-mini\nname: mine\nmodel: {embedding_size: 32}\n")
    shipped, variant = load_protocol("glyphs-mini"), load_protocol(mine)
    assert variant.name == "mine" and variant.model.embedding_size == 32
    assert variant.optim == shipped.optim and variant.data == shipped.data
    mine.write_text("include: glyphs-mini.yaml\nname: mine\n")  # with its suffix too
    assert load_protocol(mine).batch == shipped.batch


def test_a_file_beside_the_protocol_wins(tmp_path: Path) -> None:
    local = load_protocol("glyphs-mini").model_dump(mode="json")
    local["optim"]["epochs"] = 3
    import yaml

    (tmp_path / "glyphs-mini.yaml").write_text(yaml.safe_dump(local))
    mine = tmp_path / "mine.yaml"
    mine.write_text("include: glyphs-mini\nname: mine\n")
    assert load_protocol(mine).optim.epochs == 3


def test_neither_is_one_line_naming_both_places(tmp_path: Path) -> None:
    mine = tmp_path / "mine.yaml"
    mine.write_text("include: glyphs-mimi\nname: mine\n")
    with pytest.raises(ProtocolError) as err:
        load_protocol(mine)
    text = str(err.value)
    assert "\n" not in text and str(mine) in text
    assert str(tmp_path / "glyphs-mimi.yaml") in text and "shipped protocol" in text
    assert "did you mean 'glyphs-mini'" in text
