"""``dmlbench list KIND NAME`` with a NAME that matches nothing: one line, exit 2, the closest name.

Before, ``dmlbench list methods multisimilarity`` printed an empty table and exited 0, which
reads as "dmlbench has no such method".
"""

from __future__ import annotations

import pytest

from dmlbench.cli.main import main
from tests.cli.runner import run_cli


@pytest.mark.parametrize(
    ("argv", "suggestion"),
    [
        (["methods", "multisimilarity"], "multi-similarity"),
        (["methods", "pml:CircleLos"], "pml:CircleLoss"),
        (["protocols", "glyph-mini"], "glyphs-mini"),
        (["datasets", "cub"], "cub200"),
    ],
    ids=["method", "pml-method", "protocol", "dataset"],
)
def test_unknown_name_is_one_line_exit_2_with_did_you_mean(
    argv: list[str], suggestion: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["list", *argv]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and captured.out == ""
    assert f"'{argv[1]}'" in lines[0] and f"did you mean '{suggestion}'?" in lines[0]


def test_the_command_line_prints_no_traceback() -> None:
    proc = run_cli("list", "methods", "multisimilarity")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip() == (
        "error: no method matches 'multisimilarity' (did you mean 'multi-similarity'?); "
        "`dmlbench list methods` lists all"
    )


def test_a_pattern_that_matches_still_lists(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "methods", "multi-similarity"]) == 0
    assert "multi-similarity" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["methods", "*Proxy*"], ["proxy-anchor", "proxy-nca", "proxy-softmax"]),
        (["methods", "pml:*circle*"], ["pml:CircleLoss"]),
        (["protocols", "GLYPHS-*"], ["glyphs-mini"]),
        (["backbones", "Small-*"], ["small-cnn", "small-resnet"]),
        (["datasets", "CUB*"], ["cub200"]),
    ],
    ids=["method", "pml-method", "protocol", "backbone", "dataset"],
)
def test_patterns_match_regardless_of_case(
    argv: list[str], expected: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Users type the papers' class names (``ProxyNCA``): ``'*Proxy*'`` found nothing before."""
    assert main(["list", *argv]) == 0
    listed = {line.split()[0] for line in capsys.readouterr().out.splitlines() if line.strip()}
    assert set(expected) <= listed
