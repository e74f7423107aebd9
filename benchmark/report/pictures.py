"""Retrieval grids and embedding maps of a board, from kept test embeddings.

A table says a method retrieves 46% of first neighbours right; a grid of queries and what came
back says which mistakes it makes, and a map of the test split says which classes it mixes.
Both are drawn from seed 0's test embeddings (:mod:`dmlbench.report.kept`) and the protocol's
test images, loaded again from the data (its fingerprint must equal the record's):

- **grid** (``grid.png``): :data:`QUERIES` test queries, chosen by a seeded rule that does not
  look at any method (:func:`choose_queries`): the test classes in the order of a
  ``numpy.random.default_rng(0)`` permutation, the first :data:`QUERIES` of them, and of each
  the image with the lowest index in the split (split queries only, where the split has a
  query set). Each row shows the query and its top-:data:`K` neighbours (cosine similarity on
  the normalised embeddings, ties broken by index; the query itself excluded, neighbours from
  the gallery where the split has one) for the board's best method and for the baseline
  (``untrained`` unless another baseline is named), same queries for both. A neighbour of the
  query's class has a green frame (hit), any other a red one (miss); continuous labels have
  no hit or miss, and their frames stay grey.
- **map** (``map.png``): scikit-learn's t-SNE (seeded, PCA initialisation) of the best
  method's test embeddings, at most :data:`MAP_POINTS` of them (a seeded sample), coloured by
  class group (:func:`class_groups`: the Unicode script of a glyph, the Unicode group of an
  emoji, the freedesktop context of an icon) or, for continuous labels, by the first principal
  component of the label vectors.
"""

from __future__ import annotations

import csv
import logging
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from dmlbench.report.figures import save_small_png
from dmlbench.report.kept import KeptEmbeddings

QUERIES = 8
K = 5
MAP_POINTS = 1500
RULE_SEED = 0
CELL = 40  # pixels per image in the grid (nearest-neighbour upscaling of 16-px images)
FRAME = 3
HIT, MISS, NEUTRAL = (0, 150, 60), (210, 30, 30), (150, 150, 150)
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SplitImages:
    """The test split's images (as the network saw them) and labels, and its class groups."""

    images: Any  # indexable: item -> (C, H, W) tensor in [0, 1]
    labels: np.ndarray
    queries: np.ndarray | None
    gallery: np.ndarray | None
    continuous: bool
    groups: np.ndarray | None  # a group name per item
    group_words: str  # what the groups are, for the caption
    licences: list[str]  # the data's sources' licences (emoji, icons), for the caption


def load_test_images(kept: KeptEmbeddings) -> SplitImages | None:
    """The protocol's test split, or None (with a warning) when it cannot be loaded here or
    differs from the one the embeddings were computed on."""
    from dmlbench.data import load_data
    from dmlbench.errors import DmlbenchError
    from dmlbench.protocol import validate_protocol

    try:
        protocol = validate_protocol(dict(kept.protocol), source=str(kept.source))
        data = load_data(protocol)
    except DmlbenchError as err:
        log.warning("%s: no pictures, the test images cannot be loaded (%s)", kept.source, err)
        return None
    test = data.test
    if data.fingerprint != kept.data_fingerprint or len(test) != len(kept.embeddings):
        log.warning("%s: no pictures, the data differ from the embeddings'", kept.source)
        return None
    groups, words = class_groups(protocol.data.dataset, data.info, test.labels, protocol)
    return SplitImages(
        test.images, test.labels, test.queries, test.gallery,
        test.label_kind == "continuous", groups, words, _licences(data.info),
    )  # fmt: skip


def class_groups(
    dataset: str, info: dict[str, Any], labels: np.ndarray, protocol: Any
) -> tuple[np.ndarray | None, str]:
    """A group name per test item and what the groups are; (None, why) without groups."""
    if labels.ndim > 1:
        return None, "continuous labels: coloured by the first principal component of the labels"
    if dataset == "glyphs":
        from dmlbench.data.glyphs import select_classes

        params = protocol.data.params
        n = int(params["num_classes"])
        distinct_at = int(params["image_size"]) if params.get("distinct") else None
        letters = select_classes(n, distinct_at)[n // 2 :]  # the test classes (ids from 0)
        scripts = [unicodedata.name(ch, "OTHER").split()[0].capitalize() for ch in letters]
        counts = {s: scripts.count(s) for s in scripts}
        scripts = [s if counts[s] >= 5 else "Other" for s in scripts]
        return np.asarray([scripts[int(c)] for c in labels]), "the letter's Unicode script"
    root = info.get("root")
    index = Path(root) / "index.csv" if root else None
    if index is not None and index.is_file():
        with open(index, encoding="utf-8", newline="") as f:
            rows = list(csv.DictReader(f))
        if rows and "group" in rows[0]:
            group = {r["label"]: r["group"] for r in rows}
            names = sorted(group)
            words = {"emoji": "the Unicode emoji group", "icons": "the freedesktop context"}
            return (
                np.asarray([group[names[int(c)]] for c in labels]),
                words.get(dataset, "the index's group column"),
            )
    return None, "no class grouping in the data: coloured by class"


def _licences(info: dict[str, Any]) -> list[str]:
    """The licences of the art or fonts the data set's images are drawn from (its sources'
    in ``licences.yaml``, or the fonts' of a rendered set such as glyphs)."""
    import yaml

    fonts = [str(f["licence"]) for f in info.get("fonts", []) if f.get("licence")]
    if fonts:
        return sorted(set(fonts))
    path = info.get("licences")
    if not path or not Path(path).is_file():
        return []
    sources = (yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}).get("sources", [])
    return sorted({str(s["licence"]) for s in sources if s.get("licence")})


def choose_queries(labels: np.ndarray, queries: np.ndarray | None, n: int = QUERIES) -> np.ndarray:
    """The seeded query rule of the module docstring (indices into the split)."""
    rng = np.random.default_rng(RULE_SEED)
    pool = np.arange(len(labels)) if queries is None else np.asarray(queries)
    if labels.ndim > 1:  # continuous labels: a seeded sample of the query set, in index order
        return np.sort(rng.choice(pool, size=min(n, len(pool)), replace=False))
    classes = np.unique(labels[pool])
    order = rng.permutation(classes)[:n]
    return np.asarray([pool[labels[pool] == c].min() for c in order])


def neighbours(
    embeddings: np.ndarray, queries: np.ndarray, gallery: np.ndarray | None, k: int = K
) -> np.ndarray:
    """(len(queries), k) indices of the nearest items by cosine similarity, ties by index."""
    e = embeddings / np.maximum(np.linalg.norm(embeddings, axis=1, keepdims=True), 1e-12)
    pool = np.arange(len(e)) if gallery is None else np.asarray(gallery)
    out = []
    for q in queries:
        candidates = pool[pool != q]
        sim = e[candidates] @ e[q]
        out.append(candidates[np.argsort(-sim, kind="stable")[:k]])
    return np.asarray(out)


def _cell(image: Any, colour: tuple[int, int, int]) -> np.ndarray:
    a = np.asarray(image, dtype=np.float32)
    a = np.repeat(a, 3, axis=0) if a.shape[0] == 1 else a[:3]
    rgb = (np.clip(a.transpose(1, 2, 0), 0, 1) * 255).astype(np.uint8)
    inner = CELL - 2 * FRAME
    ys = (np.arange(inner) * rgb.shape[0] // inner).clip(0, rgb.shape[0] - 1)
    xs = (np.arange(inner) * rgb.shape[1] // inner).clip(0, rgb.shape[1] - 1)
    cell = np.empty((CELL, CELL, 3), dtype=np.uint8)
    cell[:] = colour
    cell[FRAME:-FRAME, FRAME:-FRAME] = rgb[ys][:, xs]
    return cell


def grid_canvas(test: SplitImages, rows: dict[str, np.ndarray], queries: np.ndarray) -> np.ndarray:
    """The grid's pixels: per query row, the query (black frame), then per method its
    neighbours framed hit/miss, a white gap between methods."""
    gap = np.full((CELL, CELL // 2, 3), 255, dtype=np.uint8)
    lines = []
    for i, q in enumerate(queries):
        cells = [_cell(test.images[int(q)], (0, 0, 0))]
        for found in rows.values():
            cells.append(gap)
            for j in found[i]:
                if test.continuous:
                    frame = NEUTRAL
                else:
                    frame = HIT if test.labels[int(j)] == test.labels[int(q)] else MISS
                cells.append(_cell(test.images[int(j)], frame))
        lines.append(np.concatenate(cells, axis=1))
    return np.concatenate(lines, axis=0)


def draw_grid(
    test: SplitImages, rows: dict[str, np.ndarray], queries: np.ndarray, title: str
) -> Figure:
    canvas = grid_canvas(test, rows, queries)
    h, w = canvas.shape[:2]
    dpi = 100
    fig = Figure(figsize=(w / dpi + 0.2, h / dpi + 0.75), dpi=dpi)
    ax = fig.add_axes((0.1 / (w / dpi + 0.2), 0.1 / (h / dpi + 0.75), w / dpi / (w / dpi + 0.2),
                       h / dpi / (h / dpi + 0.75)))  # fmt: skip
    ax.imshow(canvas, interpolation="nearest")
    ax.set_axis_off()
    x = CELL / 2
    ax.text(x, -6, "query", ha="center", va="bottom", fontsize=8)
    for name, found in rows.items():
        start = x + CELL / 2 + CELL // 2
        ax.text(start + found.shape[1] * CELL / 2, -6, f"{name}: top {found.shape[1]}",
                ha="center", va="bottom", fontsize=8)  # fmt: skip
        x = start + found.shape[1] * CELL - CELL / 2
    fig.suptitle(title, fontsize=9, y=1.0 - 0.05 / (h / dpi + 0.75), va="top")
    return fig


def write_grid(test: SplitImages, kept: dict[str, KeptEmbeddings], title: str, path: Path) -> Path:
    """``path`` (PNG): the grid of the methods of ``kept`` (best first, then the baseline)."""
    queries = choose_queries(test.labels, test.queries)
    rows = {m: neighbours(k.embeddings, queries, test.gallery) for m, k in kept.items()}
    save_small_png(draw_grid(test, rows, queries, title), path)
    return path


def map_points(embeddings: np.ndarray, n: int = MAP_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """The items mapped (a seeded sample of at most ``n``, in index order) and their 2-D
    t-SNE coordinates."""
    from sklearn.manifold import TSNE

    rng = np.random.default_rng(RULE_SEED)
    items = np.arange(len(embeddings))
    if len(items) > n:
        items = np.sort(rng.choice(items, size=n, replace=False))
    x = embeddings[items].astype(np.float64)
    perplexity = float(min(30.0, (len(items) - 1) / 3))
    tsne = TSNE(n_components=2, perplexity=perplexity, init="pca", random_state=RULE_SEED)
    return items, tsne.fit_transform(x)


def draw_map(test: SplitImages, items: np.ndarray, xy: np.ndarray, title: str) -> Figure:
    from matplotlib import colormaps

    fig = Figure(figsize=(6.4, 4.8), layout="constrained")
    ax = fig.add_subplot()
    if test.groups is not None:
        groups = test.groups[items]
        names = sorted(set(groups.tolist()))
        colours = colormaps["tab10"].colors  # type: ignore[attr-defined]
        for i, g in enumerate(names):
            mask = groups == g
            ax.scatter(xy[mask, 0], xy[mask, 1], s=6, color=colours[i % len(colours)], label=g,
                       linewidths=0)  # fmt: skip
        ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8, markerscale=2,
                  frameon=False, title="class group")  # fmt: skip
    else:
        labels = test.labels[items]
        if labels.ndim > 1:
            centred = labels - labels.mean(axis=0)
            value = centred @ np.linalg.svd(centred, full_matrices=False)[2][0]
        else:
            value = labels.astype(float)
        pts = ax.scatter(xy[:, 0], xy[:, 1], s=6, c=value, cmap="viridis", linewidths=0)
        fig.colorbar(pts, ax=ax, shrink=0.8)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(title, fontsize=9)
    return fig


def write_map(test: SplitImages, kept: KeptEmbeddings, title: str, path: Path) -> Path:
    items, xy = map_points(kept.embeddings)
    save_small_png(draw_map(test, items, xy, title), path)
    return path
