"""Kept weights and embeddings: named in the record, the record's numbers follow from them,
the kept network reproduces them, and keeping changes no number."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import dmlbench
from dmlbench.data.base import Split
from dmlbench.engine.artifacts import EMBEDDINGS, WEIGHTS, file_sha256, read_embeddings
from dmlbench.engine.evaluation import evaluate
from dmlbench.engine.inference import kept_split, open_kept
from dmlbench.engine.train import embed
from dmlbench.errors import DmlbenchError
from dmlbench.metrics.retrieval import embedding_metrics
from dmlbench.options import RunOptions
from dmlbench.protocol import Protocol, load_protocol
from dmlbench.records import Record, load_record
from dmlbench.run import run_protocol


def tiny() -> Protocol:
    """``tiny_glyphs_protocol`` of tests/conftest.py (a module-scoped fixture cannot use it)."""
    return load_protocol("glyphs-mini").with_overrides(
        {"data.params.num_classes": 40, "optim.epochs": 1, "batch.size": 40, "search.trials": 0},
        name="glyphs-tiny",
    )


def run(results: Path, keep: bool = True) -> dict[str, tuple[Record, Path]]:
    options = RunOptions(results_dir=results, max_steps=3, progress=False, keep=keep)
    records = run_protocol(tiny(), ["contrastive"], [0], options)
    paths = {p.name.split("-seed")[0]: p for p in results.rglob("*.json")}
    return {r.method: (r, paths[r.method]) for r in records}


@pytest.fixture(scope="module")
def kept(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Record, Path]]:
    return run(tmp_path_factory.mktemp("kept") / "results")


def test_the_record_names_each_kept_file_with_its_sha256(kept) -> None:
    record, path = kept["contrastive"]
    assert load_record(path).artifacts == record.artifacts
    assert set(record.artifacts) == {"weights", "embeddings", "model"}
    for artifact in record.artifacts.values():
        file = path.parent / artifact.path
        assert file.parent.name == "artifacts" and file.name.startswith(path.stem)
        assert file_sha256(file) == artifact.sha256 and file.stat().st_size == artifact.bytes
    assert not list(path.parent.glob("checkpoints/*.pt"))  # the resume checkpoint is separate
    untrained, _ = kept["untrained"]
    assert set(untrained.artifacts) == {"embeddings", "model"}  # its weights are its seed's init


@pytest.mark.parametrize("method", ["contrastive", "untrained"])
def test_the_kept_embeddings_reproduce_the_metrics_exactly(kept, method: str) -> None:
    record, path = kept[method]
    arrays = read_embeddings(record, path)
    assert arrays["embeddings"].shape == (320, 64) and arrays["embeddings"].dtype == np.float32
    protocol = tiny()
    metrics = embedding_metrics(
        arrays["embeddings"], arrays["labels"], protocol.metrics, seed=record.seed
    )
    assert metrics == {k: record.metrics[k] for k in metrics}
    split = Split(images=None, labels=arrays["labels"])
    metrics, query_hits = evaluate(
        protocol.metrics, arrays["embeddings"], split, record.seed, query_hits=True
    )
    assert metrics == record.metrics
    assert query_hits == record.query_hits


@pytest.mark.parametrize("method", ["contrastive", "untrained"])
def test_the_record_holds_each_test_querys_hit(kept, method: str) -> None:
    """The record's hits are the queries Recall@1 counts: their mean is the metric, and each
    query's class is its label (the class bootstrap's groups)."""
    record, path = kept[method]
    assert record.query_hits is not None
    hits, classes = record.query_hits.decode()
    assert hits.mean() == pytest.approx(record.metrics["recall@1"], abs=1e-12)
    assert len(hits) == record.metrics["queries"]  # the scored ones; lone_queries are not
    labels = read_embeddings(record, path)["labels"]
    assert sorted(np.unique(classes)) == sorted(np.unique(labels))


@pytest.mark.parametrize("method", ["contrastive", "untrained"])
def test_the_loaded_model_reproduces_embeddings_and_metrics(kept, method: str) -> None:
    record, path = kept[method]
    model = dmlbench.load_model(path)
    assert not model.training
    test = kept_split(open_kept(path), "test")
    again = embed(model, test, "cpu")
    np.testing.assert_allclose(again, read_embeddings(record, path)["embeddings"], atol=1e-6)
    assert evaluate(tiny().metrics, again, test, record.seed, query_hits=True)[0] == record.metrics
    by_record = dmlbench.load_model(record, results_dir=path.parents[2])  # a loaded record
    assert all(
        (a == b).all()
        for a, b in zip(by_record.state_dict().values(), model.state_dict().values(), strict=True)
    )


def test_a_tampered_or_missing_file_is_one_line_naming_it(kept, tmp_path: Path) -> None:
    import shutil

    record, path = kept["contrastive"]
    copy = tmp_path / "r" / path.name
    shutil.copytree(path.parent, copy.parent)
    weights = copy.parent / record.artifacts[WEIGHTS].path
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte inside a weight
    weights.write_bytes(bytes(data))
    with pytest.raises(DmlbenchError) as err:
        dmlbench.load_model(copy)
    message = str(err.value)
    assert "\n" not in message and str(weights) in message and "SHA-256" in message
    (copy.parent / record.artifacts[EMBEDDINGS].path).unlink()
    with pytest.raises(DmlbenchError, match="kept embeddings file is missing"):
        read_embeddings(record, copy)


def test_without_keep_nothing_is_written_and_no_number_moves(kept, tmp_path: Path) -> None:
    bare = run(tmp_path / "results", keep=False)
    assert not list((tmp_path / "results").rglob("artifacts"))
    for method, (record, path) in bare.items():
        assert record.artifacts == {} and load_record(path).artifacts == {}
        assert "artifacts" not in json.loads(path.read_text())  # as before the key existed
        assert record.metrics == kept[method][0].metrics
    with pytest.raises(DmlbenchError, match=r"keeps no weights or embeddings.*--no-keep"):
        dmlbench.load_model(bare["contrastive"][1])


def test_a_record_written_before_kept_files_still_loads(kept, tmp_path: Path) -> None:
    _, path = kept["contrastive"]
    data = json.loads(path.read_text())
    del data["artifacts"]
    old = tmp_path / path.name
    old.write_text(json.dumps(data))
    assert load_record(old).artifacts == {}
