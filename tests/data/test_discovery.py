"""A data set is its module and its protocol: discovery needs no entry anywhere else.

The toy module is the worked example of docs/development.md ("Add a data set"), read from the
docs as printed. It is written to a temporary folder that is put on the data package's ``__path__`` (what placing it
in ``benchmark/data/`` does), in a fresh interpreter, so nothing of it stays registered here.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from dmlbench.data import DATASETS, source_modules
from dmlbench.data.about import Spec
from dmlbench.data.prepare import specs

DOCS = Path(__file__).resolve().parents[2] / "docs" / "development.md"


def worked_example() -> tuple[str, str]:
    """The module and the protocol of docs/development.md's "Add a data set", as printed."""
    text = DOCS.read_text(encoding="utf-8")
    section = text[text.index("## Add a data set") : text.index("\n## ", text.index("## Add a"))]
    [module] = re.findall(r"```python\n(.*?)```", section, re.S)
    [protocol] = re.findall(r"```yaml\n(.*?)```", section, re.S)
    assert "benchmark/data/squares.py" in section and "protocols/squares-mini.yaml" in section
    return module, protocol


USE = """
import sys
from pathlib import Path

import dmlbench.data

dmlbench.data.__path__.append(sys.argv[1])  # as if squares.py were in benchmark/data/

from dmlbench.cli.main import main
from dmlbench.data import load_data
from dmlbench.protocol import load_protocol
from dmlbench.protocols import check_lock, read_lock, write_lock

protocols = Path(sys.argv[2]).parent  # as if it were protocols/: `dmlbench validate --lock`
write_lock(protocols)
print("lock", read_lock(protocols), check_lock(protocols))
main(["list", "datasets"])
splits = load_data(load_protocol(sys.argv[2]))
print("splits", len(splits.train), len(splits.test), splits.train.num_classes)
status = main(["-q", "run", "--protocol", sys.argv[2], "--no-search", "--max-steps", "2",
               "--results-dir", sys.argv[3], "--reports-dir", sys.argv[4]])
print("run", status)
"""


def test_a_data_set_is_its_module_and_its_protocol(tmp_path: Path) -> None:
    """docs/development.md's worked example, as printed: the module, the protocol and the lock
    (nothing else), then `dmlbench list datasets`, its data and a run on it."""
    module, protocol_text = worked_example()
    folder, protocols = tmp_path / "sources", tmp_path / "protocols"
    folder.mkdir()
    protocols.mkdir()
    (folder / "squares.py").write_text(module)
    protocol = protocols / "squares-mini.yaml"
    protocol.write_text(protocol_text)
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            USE,
            str(folder),
            str(protocol),
            *(str(tmp_path / d) for d in ("results", "reports")),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert any(line.split()[:1] == ["squares"] and "white squares" in line for line in lines)
    assert "glyphs" in done.stdout  # the shipped sources are still all there
    assert "splits 24 24 4" in lines and lines[-1] == "run 0"
    lock = next(line for line in lines if line.startswith("lock"))
    assert lock.startswith("lock {'squares-mini': {'sha256': '") and lock.endswith("} []")
    [record] = (tmp_path / "results").rglob("contrastive-seed0-final-*.json")
    assert '"name": "squares-mini@defaults"' in record.read_text()


def test_every_source_module_is_found_without_a_list() -> None:
    """Each registered source lives in a module discovery finds, and carries a description."""
    modules = set(source_modules())
    for name in DATASETS.list():
        cls = DATASETS.get(name)
        assert cls.__module__.rsplit(".", 1)[-1] in modules, name
        assert cls.description and cls.about.source and cls.about.licence, name


def test_the_lists_read_from_the_descriptions_are_the_ones_they_replaced() -> None:
    """No behaviour change: what the command line, the cross-data-set report and the
    published tables listed by hand before the descriptions existed, they now read."""
    from dmlbench.cli.data import preparable, rendered, with_figure
    from dmlbench.report.crossdata import paper_data
    from dmlbench.report.published import published_protocols

    assert sorted(specs()) == ["cars196", "cub200", "inshop", "sop"]
    assert all(isinstance(s, Spec) for s in specs().values())
    assert specs()["cub200"].archive is not None and specs()["sop"].archive is None
    assert rendered() == {"emoji": "dmlbench.data.emoji", "icons": "dmlbench.data.icons"}
    assert with_figure() == ["emoji", "icons"]
    assert preparable() == ["cars196", "cub200", "emoji", "icons", "inshop", "sop"]
    assert sorted(paper_data()) == ["cars196", "cub200", "inshop", "sop"]
    assert sorted(published_protocols()) == sorted(
        [
            *("cub200", "cars196", "sop", "inshop"),
            *("cub200-ms512", "cars196-ms512", "sop-ms512", "inshop-ms512", "mpii-pose"),
        ]
    )
