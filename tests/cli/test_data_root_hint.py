"""``--data-root`` one folder too high: the one-line error names the child folder that holds
the data set (``did you mean --data-root ROOT/CUB_200_2011?``), for every real data set.

Before, it said only "index file not found" for a file that was right there, one level down.
Each fixture is the data set's exact on-disk layout (:mod:`tests.data.fixtures`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from dmlbench.cli.main import main
from tests.data.fixtures import make_cars_csv, make_cars_mat, make_cub, make_inshop, make_sop
from tests.data.test_mpii import make_bundle

LAYOUTS: dict[str, tuple[str, str, Callable[[Path], object]]] = {
    "cub200": ("cub200", "CUB_200_2011", make_cub),
    "cars196-mat": ("cars196", "CARS196", make_cars_mat),
    "cars196-csv": ("cars196", "CARS196", make_cars_csv),
    "sop": ("sop", "Stanford_Online_Products", make_sop),
    "inshop": ("inshop", "InShop", make_inshop),
    "mpii-pose": ("mpii-pose", "mpii", make_bundle),
}


def _run(protocol: str, data_root: Path, tmp_path: Path) -> int:
    return main(
        [
            "run",
            "--protocol",
            protocol,
            "--data-root",
            str(data_root),
            "--method",
            "log-ratio" if protocol == "mpii-pose" else "contrastive",
            "--seed",
            "0",
            "--no-search",
            "--max-steps",
            "1",
            "--no-progress",
            "--results-dir",
            str(tmp_path / "results"),
            "--reports-dir",
            str(tmp_path / "reports"),
        ]
    )


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_the_parent_folder_names_the_child(
    layout: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    protocol, child, make = LAYOUTS[layout]
    parent = tmp_path / "data"
    (parent / "unrelated").mkdir(parents=True)  # a sibling without the files is not suggested
    make(parent / child)
    assert _run(protocol, parent, tmp_path) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith(f"error: {parent}")
    assert last.endswith(f"not found; did you mean --data-root {parent / child}?") or last.endswith(
        f"for the layout); did you mean --data-root {parent / child}?"
    )


def test_no_child_holding_the_files_means_no_suggestion(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parent = tmp_path / "data"
    (parent / "CUB_200_2011").mkdir(parents=True)  # empty: nothing to point to
    assert _run("cub200", parent, tmp_path) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last == f"error: {parent / 'images.txt'}: index file not found"
