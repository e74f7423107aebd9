"""Numbers out of bounds and empty lists, from the command line (docs/failures.md).

Every integer a user writes, in a protocol file or on the command line, has an upper bound as
well as a lower one: an extra zero or a pasted 10**20 is one ``error:`` line naming the key or
flag and its bound, exit status 2, before any data is read or record written, instead of a
traceback from torch or faiss (some only after the untrained row was computed). An empty
``--seed`` or ``--method`` is refused the same way instead of running nothing and exiting 0.

Each case calls ``dmlbench.cli.main.main`` with the command line a user types; nothing trains.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dmlbench.cli.main import main
from dmlbench.protocol import MAX_SEED, load_protocol

TINY = """\
name: glyphs-tiny
version: 1
data: {dataset: glyphs, params: {image_size: 16, num_classes: 8, instances_per_font: 1}}
model: {backbone: small-cnn, pretrained: null, embedding_size: 8}
batch: {size: 16, samples_per_class: 4}
optim: {lr: 1.0e-3, epochs: 1}
metrics: {recall_at: [1, 2], nmi: true}
search: {trials: 0}
seeds: [0]
methods: [contrastive]
"""


def one_error(argv: list[str], capsys: pytest.CaptureFixture[str], *fragments: str) -> str:
    """Exit status 2 and exactly one line on stderr, ``error: …``, holding every fragment."""
    status = main(argv)
    err = capsys.readouterr().err
    assert status == 2, err
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def run_argv(tmp_path: Path, protocol: Path | str, *extra: str) -> list[str]:
    return [
        "run", "--protocol", str(protocol), "--results-dir", str(tmp_path / "results"),
        "--reports-dir", str(tmp_path / "reports"), "--max-steps", "3", "--no-progress", *extra,
    ]  # fmt: skip


def nothing_written(tmp_path: Path) -> bool:
    return not (tmp_path / "results").exists() and not (tmp_path / "reports").exists()


# --------------------------------------------------------------------------- protocol keys


@pytest.mark.parametrize(
    ("old", "new", "fragments"),
    [
        ("embedding_size: 8", "embedding_size: 99999999999999999999999",
         ["model.embedding_size", "less than or equal to 65536"]),
        ("embedding_size: 8", "embedding_size: 2000000000",
         ["model.embedding_size", "less than or equal to 65536"]),
        ("seeds: [0]", "seeds: [99999999999999999999]",
         ["seeds.0", f"less than or equal to {MAX_SEED}"]),
        ("seeds: [0]", "seeds: [0, 2147483648]", ["seeds.1", f"less than or equal to {MAX_SEED}"]),
        ("epochs: 1", "epochs: 10000000", ["optim.epochs", "less than or equal to 100000"]),
        ("epochs: 1}", "epochs: 1, steps_per_epoch: 10000000000}",
         ["optim.steps_per_epoch", "less than or equal to 1000000000"]),
        ("{size: 16,", "{size: 1000000,", ["batch.size", "less than or equal to 65536"]),
        ("recall_at: [1, 2]", "recall_at: [1, 10000000]",
         ["metrics.recall_at.1", "less than or equal to 1000000"]),
        ("trials: 0", "trials: 1000000", ["search.trials", "less than or equal to 100000"]),
        ("data:", "images: {test: {resize: 100000}}\ndata:",
         ["images.test.resize", "less than or equal to 4096"]),
        ("num_classes: 8", "num_classes: 99999999999",
         ["data.params.num_classes", "less than or equal to 100000"]),
        ("instances_per_font: 1}", "instances_per_font: 1, seed: 99999999999999999999}",
         ["data.params.seed", f"less than or equal to {MAX_SEED}"]),
    ],
)  # fmt: skip
def test_an_integer_beyond_its_bound_is_one_line_from_validate_and_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], old: str, new: str, fragments: list[str]
) -> None:
    """``embedding_size: 10**23`` was a TypeError traceback, ``2000000000`` an allocation
    error, a seed >= 2**31 a faiss OverflowError after the untrained row was written."""
    assert TINY.count(old) == 1
    protocol = tmp_path / "tiny.yaml"
    protocol.write_text(TINY.replace(old, new))
    one_error(["validate", str(protocol)], capsys, str(protocol), *fragments)
    one_error(run_argv(tmp_path, protocol), capsys, str(protocol), *fragments)
    assert nothing_written(tmp_path)


def test_the_bounds_leave_every_shipped_protocol_and_its_hash_alone(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Bounds are part of the schema, not of the canonical form that is hashed."""
    assert main(["validate"]) == 0  # the shipped protocols against protocols.lock
    assert load_protocol("glyphs-mini").hash.startswith("319b3ae60807")  # the board's
    capsys.readouterr()


def test_the_highest_seed_is_one_faiss_takes() -> None:
    """The bound is the real limit: NMI's k-means (faiss) takes MAX_SEED, not one more."""
    from dmlbench.metrics.clustering import nmi

    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 4)).astype(np.float32)
    labels = np.repeat(np.arange(4), 10)
    assert 0.0 <= nmi(x, labels, seed=MAX_SEED) <= 1.0
    with pytest.raises(OverflowError):
        nmi(x, labels, seed=MAX_SEED + 1)


def test_an_out_of_memory_preflight_names_the_embedding_size_too() -> None:
    import torch

    from dmlbench.engine.preflight import out_of_memory_message

    protocol = load_protocol("glyphs-mini")
    line = out_of_memory_message(protocol, 60, torch.device("cpu"))
    assert "64-d embeddings" in line and "model.embedding_size" in line and "batch.size" in line


# --------------------------------------------------------------------------- flags


@pytest.mark.parametrize(
    ("flags", "fragments"),
    [
        (["--seed", "2147483648"], ["--seed 2147483648", f"[0, {MAX_SEED}]"]),
        (["--seed", "0,99999999999999999999"], ["--seed 99999999999999999999", f"{MAX_SEED}]"]),
        (["--seed", "-1"], ["--seed -1", "[0, "]),
        (["--threads", "100000000000"], ["--threads 100000000000", "[1, 4096]"]),
        (["--threads", "0"], ["--threads 0", "[1, 4096]"]),
        (["--max-steps", "10000000000"], ["--max-steps 10000000000", "1000000000]"]),
        (["--trials", "1000000"], ["--trials 1000000", "[0, 100000]"]),
        (["--workers", "100000"], ["--workers 100000", "[1, 1024]"]),
        (["--loader-workers", "100000"], ["--loader-workers 100000", "[0, 1024]"]),
        (["--heartbeat", "0"], ["--heartbeat 0", "[1, 86400]"]),
    ],
)  # fmt: skip
def test_a_flag_beyond_its_bound_is_one_line_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], fragments: list[str]
) -> None:
    one_error(run_argv(tmp_path, "glyphs-mini", *flags), capsys, *fragments)
    assert nothing_written(tmp_path)


@pytest.mark.parametrize(
    ("command", "fragments"),
    [
        (["search", "--protocol", "glyphs-mini", "--threads", "100000000000"], ["--threads"]),
        (["sweep", "--protocol", "glyphs-mini", "--over", "model.embedding_size=8",
          "--seed", "4294967295"], ["--seed 4294967295"]),
        (["embed", "--record", "r.json", "--images", "test", "--out", "x.npz",
          "--batch-size", "0"], ["--batch-size 0", "[1, 65536]"]),
        (["check", "--jobs", "-1"], ["--jobs -1", "[0, 4096]"]),
    ],
)  # fmt: skip
def test_every_command_bounds_its_integer_flags(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: list[str],
    fragments: list[str],
) -> None:
    monkeypatch.chdir(tmp_path)  # results/ and reports/ would go here
    one_error(command, capsys, *fragments)
    assert list(tmp_path.iterdir()) == []


def test_the_help_gives_the_seed_range_that_is_checked(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"0 to {MAX_SEED}" in text and "4294967295" not in text


@pytest.mark.parametrize("value", ["", ",", " , "])
@pytest.mark.parametrize("flag", ["--seed", "--method"])
def test_an_empty_list_flag_is_one_line_not_a_run_of_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, value: str
) -> None:
    """``--seed ''`` used to run nothing and exit 0."""
    one_error(run_argv(tmp_path, "glyphs-mini", flag, value), capsys, f"{flag}: empty")
    assert nothing_written(tmp_path)


@pytest.mark.parametrize(
    ("source", "key", "value"),
    [("poses", "train_poses", 99999999999), ("poses", "images_per_pose", 10**6),
     ("poses", "seed", 2**31), ("mpii-pose", "num_queries", 10**12)],
)  # fmt: skip
def test_data_set_counts_are_bounded_too(source: str, key: str, value: int) -> None:
    """A mistyped count of a generated or read data set is a validation error (one line
    through the same path as the glyphs cases above), not an hour of generating."""
    from pydantic import ValidationError

    from dmlbench.data import DATASETS

    with pytest.raises(ValidationError, match="less than or equal to"):
        DATASETS.get(source).Params.model_validate({key: value})
