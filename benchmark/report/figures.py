"""Saving a report figure so that re-rendering the same records rewrites the same bytes.

Every figure is cropped to what it draws (``bbox_inches="tight"``): a legend placed outside
the axes was cut off at the figure's edge before.

Matplotlib stamps the render date into an SVG and its version into both files, and names SVG
elements from a random salt: every ``dmlbench check --render`` would then change every
committed figure, and a reviewer could not tell a moved number from a new timestamp.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib
from matplotlib.figure import Figure


def save_png_svg(fig: Figure, png: Path, svg: Path) -> None:
    """Write ``fig`` to ``png`` (120 dpi) and ``svg`` without dates or software versions and
    with a fixed SVG id salt."""
    with matplotlib.rc_context({"svg.hashsalt": "dmlbench"}):
        fig.savefig(png, dpi=120, metadata={"Software": None}, bbox_inches="tight")
        fig.savefig(svg, metadata={"Date": None, "Creator": None}, bbox_inches="tight")


def save_small_png(fig: Figure, png: Path, dpi: int = 100, colours: int = 256) -> None:
    """Write ``fig`` to ``png`` only, quantised to a palette of ``colours``: the pictures of
    every method of every board are committed, and a palette PNG of a line plot or an image
    grid is about a third of the bytes of a true-colour one, with no visible change."""
    import io

    from PIL import Image

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, metadata={"Software": None}, bbox_inches="tight")
    buffer.seek(0)
    with Image.open(buffer) as image:
        small = image.convert("RGB").quantize(colors=colours, method=Image.Quantize.MEDIANCUT)
    png.parent.mkdir(parents=True, exist_ok=True)
    small.save(png, optimize=True)
