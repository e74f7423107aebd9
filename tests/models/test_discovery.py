"""A backbone is its module: discovery needs no entry anywhere else (as methods and data sets).

The toy module is written to a temporary folder put on the models package's ``__path__`` (what
placing it in ``benchmark/models/`` does), in a fresh interpreter, so nothing of it stays
registered here.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import dmlbench.models
from dmlbench.models import BACKBONES, backbone_modules

TINY = """
from __future__ import annotations

from torch import nn

from dmlbench.models.backbones import BACKBONES


@BACKBONES.register("tiny")
def tiny(pretrained: str | None, in_channels: int) -> tuple[nn.Module, int]:
    return nn.Sequential(nn.Conv2d(in_channels, 4, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten()), 4
"""


def test_every_registering_module_is_discovered() -> None:
    """The names registered are exactly those the package's modules register (read from the
    files, not from a list)."""
    folder = Path(dmlbench.models.__file__).parent
    declared = {
        name
        for module in backbone_modules()
        for name in re.findall(
            r'@BACKBONES\.register\("([^"]+)"\)', (folder / f"{module}.py").read_text()
        )
    }
    assert declared == set(BACKBONES.list())
    assert {"small-cnn", "small-resnet", "bn-inception", "googlenet", "resnet50"} <= declared


def test_a_new_backbone_is_its_module(tmp_path: Path) -> None:
    (tmp_path / "tiny.py").write_text(TINY)
    (tmp_path / "_private.py").write_text("raise SystemExit('a private module is not imported')")
    code = textwrap.dedent(f"""
        import torch
        import dmlbench.models as models
        assert "tiny" not in models.BACKBONES.list()
        models.__path__.append({str(tmp_path)!r})
        models.discover()
        net, dim = models.create_backbone("tiny", None, 3)
        print(dim, tuple(net(torch.zeros(2, 3, 8, 8)).shape), "tiny" in models.backbone_modules())
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["4", "(2,", "4)", "True"]
