"""What the rendered sets share: the keyed, locked preparation and the figure of classes by
sources, drawn from a prepared root (``dmlbench data figure``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from dmlbench.cli.main import main
from dmlbench.data import icons
from dmlbench.data.rendered import prepared_under


def fake_root(root: Path, drawn: dict[str, list[str]]) -> Path:
    """A prepared root: ``images/<class>/<source>.png`` and its ``index.csv``."""
    lines = ["path,label,group"]
    for label, sources in drawn.items():
        (root / "images" / label).mkdir(parents=True)
        for k, source in enumerate(sources):
            rgb = np.full((16, 16, 3), 40 * k, np.uint8)
            Image.fromarray(rgb).save(root / "images" / label / f"{source}.png")
            lines.append(f"images/{label}/{source}.png,{label},g-{label}")
    (root / "index.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def test_prepared_under_prepares_once_per_key(tmp_path: Path) -> None:
    calls: list[Path] = []

    def prepare(dest: Path) -> Path:
        calls.append(dest)
        return fake_root(dest, {"a": ["s"]})

    root = prepared_under(tmp_path / "set", "settings v1", prepare)
    assert prepared_under(tmp_path / "set", "settings v1", prepare) == root and calls == [root]
    other = prepared_under(tmp_path / "set", "settings v2", prepare)
    assert other != root and calls == [root, other] and other.parent == root.parent


def test_figure_command_draws_classes_by_sources(tmp_path: Path) -> None:
    themes = icons.FIGURE_SOURCES
    root = fake_root(tmp_path / "prepared", {"a": list(themes[:3]), "b": list(themes[1:])})
    out = tmp_path / "fig" / "icons.png"
    args = ["data", "figure", "icons", "--root", str(root), "--out", str(out)]
    assert main([*args, "--classes", "a,b"]) == 0
    with Image.open(out) as image:  # 1.3 in per source, 1.2 per class, at 100 dpi
        assert image.size == (round(130 * len(themes)), 240)


@pytest.mark.parametrize("problem", ["no index", "unknown class"])
def test_figure_command_refuses_in_one_line(
    problem: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "prepared"
    if problem == "unknown class":
        fake_root(root, {"a": ["adwaita"]})
    else:
        root.mkdir()
    out = tmp_path / "x.png"
    code = main(["data", "figure", "icons", "--root", str(root), "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and not out.exists()
    assert ("no index.csv" if problem == "no index" else "no class 'go-next'") in err
