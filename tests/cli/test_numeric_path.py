"""``--channels-last`` and ``--compile`` make derived protocols, and a protocol's memory format
reaches every network it builds.

Both options were run options said to leave numbers alone; on the CPU they do not (an NHWC
small CNN's losses differ from the NCHW one's from the first step), and the record did not
say they were used, so such a run was averaged with the protocol's own runs. Now they are
protocol keys (``model.channels_last``, ``model.compile``) and the flags derive
``<name>@channels_last`` / ``<name>@compile``, which never share a table with the protocol.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
import torch

from dmlbench.cli.main import main
from dmlbench.cli.run import _override_numeric_path
from dmlbench.engine.train import init_model
from dmlbench.protocol import load_protocol
from tests.test_protocol import BASE


def _args(channels_last: bool = False, compile_: bool = False) -> argparse.Namespace:
    return argparse.Namespace(channels_last=channels_last, compile=compile_)


@pytest.mark.parametrize(
    ("flags", "name", "changes"),
    [
        ((True, False), "glyphs@channels_last", {"channels_last": True}),
        ((False, True), "glyphs@compile", {"compile": True}),
        (
            (True, True),
            "glyphs@channels_last@compile",
            {"channels_last": True, "compile": True},
        ),
    ],
)
def test_the_flags_derive_a_protocol_with_its_own_hash(
    flags: tuple[bool, bool], name: str, changes: dict[str, bool]
) -> None:
    base = load_protocol("glyphs")
    overrides: dict[str, object] = {}
    derived = _override_numeric_path(base, _args(*flags), overrides)
    assert derived.name == name and derived.hash != base.hash
    assert overrides == changes
    for key, value in changes.items():
        assert getattr(derived.model, key) is value


def test_without_the_flags_or_when_the_protocol_asks_already_nothing_changes() -> None:
    base = load_protocol("glyphs")
    overrides: dict[str, object] = {}
    assert _override_numeric_path(base, _args(), overrides) is base
    nhwc = base.with_overrides({"model.channels_last": True})
    assert _override_numeric_path(nhwc, _args(channels_last=True), overrides) is nhwc
    assert overrides == {}


def test_every_network_of_a_channels_last_protocol_is_nhwc() -> None:
    """Training, the untrained row and a kept model rebuilt all go through ``init_model``
    (glyphs asks for neither flag; glyphs-mini starts from a trunk in channels-last memory)."""
    base = load_protocol("glyphs")
    for protocol, fmt in [
        (base, torch.contiguous_format),
        (base.with_overrides({"model.channels_last": True}), torch.channels_last),
        (load_protocol("glyphs-mini"), torch.channels_last),  # loaded from a trunk, then NHWC
    ]:
        model = init_model(protocol, None, 1, seed=0)
        convs = [m.weight for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
        assert convs and all(w.is_contiguous(memory_format=fmt) for w in convs)


def test_a_channels_last_run_is_recorded_apart_from_the_protocols_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    proto = tmp_path / "p.yaml"
    proto.write_text(BASE)
    argv = ["run", "--protocol", str(proto), "--method", "contrastive", "--seed", "0"]
    argv += ["--max-steps", "2", "--no-search", "--no-progress", "--no-keep"]
    argv += ["--results-dir", str(tmp_path / "res"), "--reports-dir", str(tmp_path / "r")]
    assert main(argv) == 0
    assert main([*argv, "--channels-last"]) == 0
    capsys.readouterr()
    by_name: dict[str, list[dict]] = {}
    for f in sorted((tmp_path / "res").rglob("contrastive-seed0-final*.json")):
        record = json.loads(f.read_text())
        by_name.setdefault(record["protocol"]["name"], []).append(record)
    assert sorted(by_name) == ["mine@defaults", "mine@defaults@channels_last"]
    [plain], [nhwc] = by_name["mine@defaults"], by_name["mine@defaults@channels_last"]
    assert plain["protocol"]["hash"] != nhwc["protocol"]["hash"]
    assert nhwc["overrides"]["channels_last"] is True and "channels_last" not in plain["overrides"]
