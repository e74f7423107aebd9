"""dmlbench sweep: derived protocols with their own hashes, records, tables and the plot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dmlbench.cli.main import main
from dmlbench.errors import DmlbenchError, ProtocolError
from dmlbench.protocol import load_protocol
from dmlbench.run import parse_over, sweep_protocols


def test_parse_over() -> None:
    key, values = parse_over("model.embedding_size=16, 32,64")
    assert key == "model.embedding_size"
    assert values == [("16", 16), ("32", 32), ("64", 64)]
    assert parse_over("optim.lr=1e-3")[1] == [("1e-3", 1e-3)]
    for bad in ("model.embedding_size", "=1,2", "k=", "k=1,1"):
        with pytest.raises(DmlbenchError):
            parse_over(bad)


def test_derived_protocols_are_validated_and_hashed() -> None:
    base = load_protocol("poses-mini")
    derived = sweep_protocols(base, "model.embedding_size", [("16", 16), ("32", 32)])
    assert [p.name for p in derived] == [
        "poses-mini@model.embedding_size=16",
        "poses-mini@model.embedding_size=32",
    ]
    assert [p.model.embedding_size for p in derived] == [16, 32]
    assert len({base.hash, *(p.hash for p in derived)}) == 3
    with pytest.raises(ProtocolError):
        sweep_protocols(base, "model.embedding_sise", [("16", 16)])
    with pytest.raises(ProtocolError):
        sweep_protocols(base, "model.embedding_size", [("-1", -1)])


def test_sweep_command_writes_records_tables_and_plot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    proto = tmp_path / "tiny.yaml"
    text = (
        load_protocol("poses-mini")
        .with_overrides(
            {
                "data.params.train_poses": 4,
                "data.params.test_poses": 2,
                "data.params.images_per_pose": 16,
                "data.params.image_size": 32,
                "model.pretrained": None,  # the sweep's machinery, not the trunk's path
                "search.trials": 0,
            },
            name="poses-tiny",
        )
        .model_dump(mode="json")
    )
    import yaml

    proto.write_text(yaml.safe_dump(text))
    results, reports = tmp_path / "results", tmp_path / "reports"
    code = main(
        [
            "sweep",
            "--protocol",
            str(proto),
            "--over",
            "model.embedding_size=8,16",
            "--method",
            "log-ratio",
            "--seed",
            "0",
            "--max-steps",
            "2",
            "--results-dir",
            str(results),
            "--reports-dir",
            str(reports),
            "--no-progress",
        ]
    )
    assert code == 0
    files = sorted(results.rglob("*.json"))
    assert len(files) == 6  # 2 values × (pixels + untrained + log-ratio)
    names = {json.loads(f.read_text())["protocol"]["name"] for f in files}
    assert names == {"poses-tiny@model.embedding_size=8", "poses-tiny@model.embedding_size=16"}
    hashes = {json.loads(f.read_text())["protocol"]["hash"] for f in files}
    assert len(hashes) == 2
    assert (reports / "sweep-poses-tiny-model.embedding_size.png").is_file()
    assert (reports / "sweep-poses-tiny-model.embedding_size.svg").is_file()
    assert len(list(reports.glob("poses-tiny@*.md"))) == 2
    out = capsys.readouterr().out
    assert "ndcg@10" in out and "mld@1" in out
