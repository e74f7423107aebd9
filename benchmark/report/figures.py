"""Saving a report figure so that re-rendering the same records rewrites the same bytes.

Matplotlib stamps the render date into an SVG and its version into both files, and names SVG
elements from a random salt: every ``dmlbench check --render`` would then change every
committed figure, and a reviewer could not tell a moved number from a new timestamp.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib
from matplotlib.figure import Figure


def save_png_svg(fig: Figure, png: Path, svg: Path, hatch_linewidth: float | None = None) -> None:
    """Write ``fig`` to ``png`` (120 dpi) and ``svg`` without dates or software versions and
    with a fixed SVG id salt; ``hatch_linewidth`` for figures with hatched bars."""
    with matplotlib.rc_context({"svg.hashsalt": "dmlbench"}):
        if hatch_linewidth is not None:  # restored with the context
            matplotlib.rcParams["hatch.linewidth"] = hatch_linewidth
        fig.savefig(png, dpi=120, metadata={"Software": None})
        fig.savefig(svg, metadata={"Date": None, "Creator": None})
