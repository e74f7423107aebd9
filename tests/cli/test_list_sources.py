"""``dmlbench list methods --sources``: every default, learning-rate multipliers included, is
shown with where it comes from, so a reader can check a number without opening the code."""

from __future__ import annotations

import pytest

from dmlbench.cli.main import main
from dmlbench.methods import METHODS


def _rows(out: str) -> dict[str, list[str]]:
    """Each method's line and the lines printed under it, keyed by method name."""
    rows: dict[str, list[str]] = {}
    current = None
    for line in out.splitlines()[1:]:  # the header
        if line.strip() and not line[0].isspace():
            current = line.split()[0]
            rows[current] = [line]
        elif current is not None:
            rows[current].append(line)
    return rows


def test_sources_name_the_origin_of_every_default(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "methods", "--sources"]) == 0
    rows = _rows(capsys.readouterr().out)
    for name in METHODS.list():
        assert name in rows, name
        source = METHODS.get(name).defaults_source
        assert source, f"{name}: no defaults source"
        assert any(f"defaults: {source}" in line for line in rows[name][1:]), name


def test_a_learnable_parameters_multiplier_is_shown_with_its_citation(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """proxy-nca's proxies train at 100× the embedding's rate, as Fehervari et al.'s script."""
    assert main(["list", "methods", "proxy-nca", "--sources"]) == 0
    rows = _rows(capsys.readouterr().out)
    assert list(rows) == ["proxy-nca"]
    head, *under = rows["proxy-nca"]
    assert head.split()[2] == "100"  # the lr× column
    text = " ".join(under)
    assert "proxy_lr_mult 100" in text and "--lr-proxynca 1e-3" in text


def test_sources_are_printed_only_when_asked(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "methods", "proxy-nca"]) == 0
    out = capsys.readouterr().out
    assert "proxy-nca" in out and "defaults:" not in out and "--lr-proxynca" not in out
