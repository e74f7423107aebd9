"""``dmlbench evaluate``: a kept run's test embeddings, re-embedded by ``dmlbench embed`` and
scored as an external model, give its record's metrics to the last bit (the untrained network
and a trained one); a file of the wrong split, order, length or protocol is one line, exit 2;
the report shows external models apart, unranked."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from dmlbench.cli.main import main
from dmlbench.protocol import load_protocol
from dmlbench.records import load_record

TINY = {"data.params.num_classes": 40, "optim.epochs": 1, "batch.size": 40, "search.trials": 0}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny run of contrastive (3 steps) and the untrained row, both kept, and each one's
    test split re-embedded by ``dmlbench embed``."""
    folder = tmp_path_factory.mktemp("evaluate")
    tiny = load_protocol("glyphs-mini").with_overrides(TINY, name="glyphs-tiny")
    (folder / "tiny.yaml").write_text(yaml.safe_dump(tiny.model_dump(mode="json")))
    argv = ["run", "--protocol", str(folder / "tiny.yaml"), "--method", "contrastive"]
    argv += ["--seed", "0", "--max-steps", "3", "--no-progress"]
    argv += ["--results-dir", str(folder / "results"), "--reports-dir", str(folder / "reports")]
    assert main(argv) == 0
    for method in ("contrastive", "untrained"):
        (record,) = (folder / "results").rglob(f"{method}-seed0-final-override-*.json")
        out = str(folder / f"{method}.npz")
        assert main(["embed", "--record", str(record), "--images", "test", "--out", out]) == 0
    return folder


def evaluate(folder: Path, npz: Path, *extra: str) -> int:
    argv = ["evaluate", "--protocol", str(folder / "tiny.yaml"), "--embeddings", str(npz)]
    return main([*argv, "--results-dir", str(folder / "results"), *extra])


@pytest.mark.parametrize("method", ["contrastive", "untrained"])
def test_a_kept_runs_embeddings_score_its_metrics_bit_for_bit(folder: Path, method: str) -> None:
    assert evaluate(folder, folder / f"{method}.npz") == 0
    (run,) = (folder / "results").rglob(f"{method}-seed0-final-override-*.json")
    (ext,) = (folder / "results").rglob(f"{method}-seed0-external.json")
    run_record, record = load_record(run), load_record(ext)
    assert record.metrics == run_record.metrics  # == on floats: every bit
    assert record.query_hits == run_record.query_hits
    assert record.stage == "external" and record.external is not None
    assert record.external.trained_by == "dmlbench" and record.external.embedding_size == 64
    assert record.protocol == run_record.protocol and not record.leaderboard_eligible


def shuffled(folder: Path, tmp_path: Path, **change: object) -> Path:
    with np.load(folder / "contrastive.npz") as npz:
        arrays = {k: npz[k] for k in npz.files}
    arrays.update(change)
    out = tmp_path / "changed.npz"
    np.savez(out, **{k: v for k, v in arrays.items() if v is not None})
    return out


def one_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


def test_a_shuffled_file_is_refused(
    folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with np.load(folder / "contrastive.npz") as npz:
        order = np.random.default_rng(0).permutation(len(npz["index"]))
        rows = {k: npz[k][order] for k in ("embeddings", "labels", "index")}
    assert evaluate(folder, shuffled(folder, tmp_path, **rows)) == 2
    assert "rows are not in the test split's order (row 0 holds image" in one_error(capsys)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"index": None}, "no array 'index' (it has: "),
        ({"embeddings": None}, "no array 'embeddings'"),
        ({"split": np.asarray("train")}, "embeds the train split of glyphs-tiny"),
        ({"protocol": np.asarray("other"), "split_fingerprint": np.asarray("0" * 64)},
         "embeds the test split of protocol other, not glyphs-tiny's"),
        ({"embeddings": np.zeros((5, 64), np.float32)}, "5 embeddings and 320 index rows"),
        ({"embeddings": np.full((320, 64), np.nan, np.float32)}, "row 0 of embeddings"),
        ({"model_name": None}, "--model-name is required"),
        ({"model_name": np.asarray("no spaces")}, "must be a slug"),
    ],
)  # fmt: skip
def test_a_wrong_file_is_one_line(
    folder: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    change: dict[str, object],
    message: str,
) -> None:
    before = sorted((folder / "results").rglob("*.json"))
    assert evaluate(folder, shuffled(folder, tmp_path, **change)) == 2
    assert message in one_error(capsys)
    assert sorted((folder / "results").rglob("*.json")) == before


def test_flags_name_the_model_and_the_report_shows_it_apart(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    who = ["--model-name", "my-net", "--trained-by", "me", "--trained-on", "ImageNet-1k"]
    assert evaluate(folder, folder / "untrained.npz", *who, "--seed", "3") == 0
    (ext,) = (folder / "results").rglob("my-net-seed3-external.json")
    assert load_record(ext).external.trained_on == "ImageNet-1k"
    reports = folder / "report"
    argv = ["report", "--results-dir", str(folder / "results"), "--reports-dir", str(reports)]
    assert main(argv) == 0
    (board,) = reports.glob("glyphs-tiny-????????????-overrides.md")  # the smoke runs' board
    assert "my-net" not in board.read_text() and "External" not in board.read_text()
    for other in ("budget", "confidence"):
        assert "my-net" not in (reports / f"{board.stem}-{other}.csv").read_text()
    assert not list(reports.glob("cross-dataset*"))  # smoke runs are compared with nothing
    stem = board.stem.removesuffix("-overrides")
    assert "| my-net " in (reports / f"{stem}-external.md").read_text()
    numbers = pd.read_csv(reports / f"{stem}-external.csv", index_col="model")
    assert numbers.loc["my-net", "trained_on"] == "ImageNet-1k"
    assert numbers.loc["my-net", "n_seeds"] == 1 and numbers.loc["my-net", "embedding_size"] == 64


def test_a_callable_scores_through_the_python_api(folder: Path) -> None:
    """dmlbench.evaluate_external with the kept network as the callable: its record's metrics;
    an array-returning callable is taken too, and nothing is written without results_dir."""
    import dmlbench

    (run,) = (folder / "results").rglob("contrastive-seed0-final-override-*.json")
    protocol = load_protocol(str(folder / "tiny.yaml"))
    network = dmlbench.load_model(run)
    who = {"trained_by": "dmlbench", "trained_on": "glyphs-tiny"}
    record = dmlbench.evaluate_external(
        protocol, network, name="kept", **who, results_dir=folder / "api"
    )
    assert record.metrics == load_record(run).metrics and record.external is not None
    assert len(list((folder / "api").rglob("kept-seed0-external.json"))) == 1
    as_array = dmlbench.evaluate_external(
        protocol, lambda x: network(x).numpy(), name="kept", **who, results_dir=None
    )
    assert as_array.metrics == record.metrics
