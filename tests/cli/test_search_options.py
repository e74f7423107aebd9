"""``dmlbench search`` offers only the budget flags it can honour.

``search`` runs search trials and nothing else, so ``--no-search`` (a zero budget) could only
fail there ("has no tuning budget"); its ``--help`` offered it all the same. ``run`` and
``sweep`` keep it: there a zero budget means the papers' defaults.
"""

from __future__ import annotations

import pytest

from dmlbench.cli.main import build_parser, main

SEARCH = ["search", "--protocol", "glyphs-mini", "--method", "contrastive"]


def test_search_help_does_not_offer_no_search(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["search", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "--trials" in out and "--no-search" not in out and "0 = the papers'" not in out


def test_search_refuses_no_search_as_an_unknown_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args([*SEARCH, "--no-search"])
    assert exc.value.code == 2
    assert "unrecognized arguments: --no-search" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["run", "sweep"])
def test_run_and_sweep_keep_no_search(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    assert "--no-search" in capsys.readouterr().out
