"""The training precision is recorded (``env.precision``) and a table never mixes two.

``--amp auto`` trains in bf16 on CUDA, and the protocol hash does not cover it (a run option,
not the protocol), so before, a bf16 GPU run and an fp32 CPU run of one hash were averaged
into one row. Records made before the field existed (every committed one, made on the CPU)
read as fp32 and are not rewritten: their SHA-256 is committed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dmlbench.cli.main import main
from dmlbench.options import Accel
from dmlbench.records import Record, record_path, record_precision, save_record
from tests.report.test_build import rec
from tests.test_protocol import BASE


@pytest.mark.parametrize(
    ("device", "amp", "precision"),
    [
        ("cpu", "auto", "fp32"),
        ("cpu", "fp16", "fp32"),  # autocast is enabled on CUDA only
        ("cuda", "auto", "bf16"),
        ("cuda:1", "bf16", "bf16"),
        ("cuda", "fp16", "fp16"),
        ("cuda", "off", "fp32"),
    ],
)
def test_precision_from_the_device_and_the_amp_option(
    device: str, amp: str, precision: str
) -> None:
    assert Accel(amp=amp).precision(device) == precision


def test_a_run_records_its_precision(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    proto = tmp_path / "p.yaml"
    proto.write_text(BASE)
    argv = ["run", "--protocol", str(proto), "--method", "contrastive", "--seed", "0"]
    argv += ["--max-steps", "2", "--no-search", "--no-progress", "--amp", "fp16", "--device"]
    argv += ["cpu", "--results-dir", str(tmp_path / "res"), "--reports-dir", str(tmp_path / "r")]
    assert main(argv) == 0
    capsys.readouterr()
    files = sorted((tmp_path / "res").rglob("*-final*.json"))
    assert len(files) == 3  # the method and the no-learning rows: all carry the run's
    for f in files:
        assert json.loads(f.read_text())["env"]["precision"] == "fp32"


def test_a_record_without_the_field_reads_as_fp32() -> None:
    assert record_precision(rec("a")) == "fp32"
    assert record_precision(rec("a").model_copy(update={"env": {"precision": "bf16"}})) == "bf16"


def _save(results: Path, r: Record) -> None:
    save_record(r, record_path(results, r.protocol.name, r.protocol.hash, r.method, r.seed))


@pytest.mark.parametrize("fmt", ["all", "json"])
def test_a_report_over_two_precisions_is_one_line_exit_2(
    fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "results"
    _save(results, rec("a", 0))  # an old record: no env.precision, fp32
    _save(results, rec("a", 1).model_copy(update={"env": {"precision": "bf16"}}))
    argv = ["report", "--results-dir", str(results), "--reports-dir", str(tmp_path / "r")]
    assert main([*argv, "--format", fmt]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line == (
        f"error: p ({'a' * 12}): records trained in different precisions (bf16, fp32); "
        "report them from separate results folders (`--amp off` trains in fp32 on CUDA too)"
    )


def test_one_precision_per_hash_is_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "results"
    bf16 = {"env": {"precision": "bf16"}}
    _save(results, rec("a", 0, h="b" * 64, name="q").model_copy(update=bf16))
    _save(results, rec("a", 0))  # another hash in fp32: its own table
    argv = ["report", "--results-dir", str(results), "--reports-dir", str(tmp_path / "r")]
    assert main(argv) == 0
    capsys.readouterr()
