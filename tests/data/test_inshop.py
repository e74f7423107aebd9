"""In-shop Clothes Retrieval: list_eval_partition.txt, query → gallery, on a fixture."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dmlbench.data.inshop import InShop, InshopParams
from dmlbench.errors import DataError
from dmlbench.metrics.retrieval import embedding_metrics
from dmlbench.protocol import ImagesSpec, MetricsSpec, TransformSpec
from tests.data.fixtures import make_inshop

IMAGES = ImagesSpec(
    train=TransformSpec(resize=36, random_crop=32), test=TransformSpec(resize=36, center_crop=32)
)


def load(root: Path, tmp_path: Path):
    return InShop(IMAGES).load(InshopParams(), root, tmp_path / "cache")


def test_query_and_gallery_index_the_test_split(tmp_path: Path) -> None:
    root = make_inshop(tmp_path / "inshop", train=3, test=2, per_class=4)
    data = load(root, tmp_path)
    assert (len(data.train), len(data.test)) == (12, 8)
    assert sorted(set(data.train.labels.tolist())) == [1, 2, 3]  # id_00000001 → 1
    q, g = data.test.queries, data.test.gallery
    assert q is not None and g is not None
    assert len(q) == len(g) == 4 and not set(q.tolist()) & set(g.tolist())
    assert set(q.tolist()) | set(g.tolist()) == set(range(8))
    assert set(data.test.labels[q].tolist()) == set(data.test.labels[g].tolist()) == {4, 5}
    assert data.info["counts"] == {"train": 12, "query": 4, "gallery": 4}


def test_evaluation_retrieves_queries_from_the_gallery_only(tmp_path: Path) -> None:
    data = load(make_inshop(tmp_path / "inshop", train=2, test=2), tmp_path)
    # Embeddings that put every query next to a *query* of its own class but far from the
    # gallery would score R@1 = 1 in all-vs-all retrieval; query → gallery must not see them.
    labels = data.test.labels
    emb = np.zeros((len(labels), 3), dtype=np.float32)
    q = data.test.queries
    assert q is not None
    emb[:, 0] = (labels == labels[0]).astype(np.float32)
    emb[q, 1] = 1.0  # queries of one class sit together, the gallery elsewhere
    wrong_side = np.ones(len(labels), dtype=bool)
    wrong_side[q] = False
    emb[wrong_side & (labels == labels[0]), 0] = 0.0
    emb[wrong_side & (labels != labels[0]), 0] = 1.0
    spec = MetricsSpec(recall_at=[1], nmi=False, map_at_r=False, r_precision=False, normalize=False)
    all_vs_all = embedding_metrics(emb, labels, spec)
    query_gallery = embedding_metrics(emb, labels, spec, data.test.queries, data.test.gallery)
    assert all_vs_all["recall@1"] == 1.0
    assert query_gallery["recall@1"] == 0.0
    assert query_gallery["queries"] == len(q)


def test_partition_at_the_root_is_accepted(tmp_path: Path) -> None:
    root = make_inshop(tmp_path / "inshop")
    (root / "Eval" / "list_eval_partition.txt").rename(root / "list_eval_partition.txt")
    assert len(load(root, tmp_path).train) == 12


def test_truncated_partition_file_is_an_error(tmp_path: Path) -> None:
    root = make_inshop(tmp_path / "inshop")
    path = root / "Eval" / "list_eval_partition.txt"
    path.write_text("\n".join(path.read_text().splitlines()[:-3]) + "\n")
    with pytest.raises(DataError, match=r"list_eval_partition\.txt: the count line says 24"):
        load(root, tmp_path)


def test_bad_status_and_missing_file_name_the_path(tmp_path: Path) -> None:
    root = make_inshop(tmp_path / "inshop")
    path = root / "Eval" / "list_eval_partition.txt"
    text = path.read_text()
    path.write_text(text.replace("train", "trian", 1))
    with pytest.raises(DataError, match=r"list_eval_partition\.txt: bad row"):
        load(root, tmp_path)
    path.write_text(text)
    (root / "img/WOMEN/Dresses/id_00000005/02_1_front.jpg").unlink()
    with pytest.raises(DataError, match=r"id_00000005/02_1_front\.jpg: image file is missing"):
        load(root, tmp_path)
    path.unlink()
    with pytest.raises(DataError, match=r"Eval/list_eval_partition\.txt: index file not found"):
        load(root, tmp_path)
