"""Tiny copies of the real data sets, in their exact on-disk formats, with generated JPEGs.

Each builder writes a few classes of small JPEGs (a class-specific colour and stripe pattern
plus noise, so a network can tell classes apart) and the index files with the real column
layout. Class ids come from both sides of the official split (CUB: 1, 2, … and 101, 102, …),
so the shipped protocols' default ``data.params`` apply unchanged.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
from PIL import Image


def write_jpeg(path: Path, label: int, k: int, size: tuple[int, int] = (40, 52)) -> None:
    """A (width, height) JPEG whose look depends on ``label``; ``k`` varies the instance."""
    rng = np.random.default_rng([label, k])
    w, h = size
    colour = np.random.default_rng(label).integers(40, 216, size=3)
    yy, xx = np.mgrid[0:h, 0:w]
    stripes = ((xx * (1 + label % 5) + yy * (label % 3)) // 6) % 2
    img = colour[None, None, :] * (0.6 + 0.4 * stripes[..., None])
    img = img + rng.normal(0, 12, size=img.shape)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(path, quality=90)


def make_cub(root: Path, train: int = 3, test: int = 3, per_class: int = 3) -> Path:
    """``CUB_200_2011``: images.txt, image_class_labels.txt (+ unused files), images/."""
    classes = [*range(1, train + 1), *range(101, 101 + test)]
    lines, labels, boxes, split = [], [], [], []
    image_id = 0
    for c in classes:
        folder = f"{c:03d}.Bird_{c}"
        for k in range(per_class):
            image_id += 1
            rel = f"{folder}/Bird_{c}_{k:04d}_{image_id}.jpg"
            write_jpeg(root / "images" / rel, c, k, size=(40 + k, 52))
            lines.append(f"{image_id} {rel}")
            labels.append(f"{image_id} {c}")
            boxes.append(f"{image_id} 1.0 2.0 30.0 40.0")
            split.append(f"{image_id} {k % 2}")
    (root / "images.txt").write_text("\n".join(lines) + "\n")
    (root / "image_class_labels.txt").write_text("\n".join(labels) + "\n")
    (root / "bounding_boxes.txt").write_text("\n".join(boxes) + "\n")
    (root / "train_test_split.txt").write_text("\n".join(split) + "\n")
    (root / "classes.txt").write_text("".join(f"{c} {c:03d}.Bird_{c}\n" for c in classes))
    return root


def _cars_classes(train: int, test: int) -> list[int]:
    return [*range(1, train + 1), *range(99, 99 + test)]


def make_cars_mat(root: Path, train: int = 3, test: int = 3, per_class: int = 3) -> Path:
    """The original release: cars_annos.mat (struct array ``annotations``) + car_ims/."""
    import scipy.io

    fields = ["relative_im_path", "bbox_x1", "bbox_y1", "bbox_x2", "bbox_y2", "class", "test"]
    records = []
    n = 0
    for c in _cars_classes(train, test):
        for k in range(per_class):
            n += 1
            rel = f"car_ims/{n:06d}.jpg"
            write_jpeg(root / rel, c, k)
            records.append(
                (
                    np.array([rel]),
                    np.array([[3]], dtype=np.uint8),
                    np.array([[4]], dtype=np.uint8),
                    np.array([[30]], dtype=np.uint8),
                    np.array([[40]], dtype=np.uint8),
                    np.array([[c]], dtype=np.uint8),
                    np.array([[k % 2]], dtype=np.uint8),
                )
            )
    annos = np.empty((1, len(records)), dtype=[(f, object) for f in fields])
    for i, rec in enumerate(records):
        annos[0, i] = rec
    names = np.empty((1, 196), dtype=object)
    for i in range(196):
        names[0, i] = np.array([f"Car Model {i + 1} 2012"])
    scipy.io.savemat(str(root / "cars_annos.mat"), {"annotations": annos, "class_names": names})
    return root


def make_cars_csv(root: Path, train: int = 3, test: int = 3, per_class: int = 3) -> Path:
    """The re-pack: anno_{train,test}.csv, names.csv, car_data/car_data/{train,test}/<name>/."""
    names = [f"Car Model {i + 1} 2012" for i in range(196)]
    (root).mkdir(parents=True, exist_ok=True)
    with (root / "names.csv").open("w", newline="") as fh:
        csv.writer(fh).writerows([[n] for n in names])
    rows: dict[str, list[list[object]]] = {"train": [], "test": []}
    counter = {"train": 0, "test": 0}
    for c in _cars_classes(train, test):
        for k in range(per_class):
            split = "train" if k % 2 == 0 else "test"  # the classification split, unrelated
            counter[split] += 1
            file = f"{counter[split]:05d}.jpg"
            write_jpeg(root / "car_data" / "car_data" / split / names[c - 1] / file, c, k)
            rows[split].append([file, 3, 4, 30, 40, c])
    for split, split_rows in rows.items():
        with (root / f"anno_{split}.csv").open("w", newline="") as fh:
            csv.writer(fh).writerows(split_rows)
    return root


def make_sop(root: Path, train: int = 3, test: int = 3, per_class: int = 3) -> Path:
    """Ebay_train.txt / Ebay_test.txt (header + rows) and <super>_final/<id>_<k>.JPG."""
    supers = ["bicycle", "chair"]
    image_id = 0
    for name, classes in (("train", range(1, train + 1)), ("test", range(11319, 11319 + test))):
        lines = ["image_id class_id super_class_id path"]
        for c in classes:
            s = c % 2
            for k in range(per_class):
                image_id += 1
                rel = f"{supers[s]}_final/{100000 + c}_{k}.JPG"
                write_jpeg(root / rel, c, k)
                lines.append(f"{image_id} {c} {s + 1} {rel}")
        (root / f"Ebay_{name}.txt").write_text("\n".join(lines) + "\n")
    return root


def make_inshop(root: Path, train: int = 3, test: int = 3, per_class: int = 4) -> Path:
    """Eval/list_eval_partition.txt (count, header, rows) and img/WOMEN/.../id_XXXXXXXX/."""
    rows = []
    for item in range(1, train + test + 1):
        for k in range(per_class):
            rel = f"img/WOMEN/Dresses/id_{item:08d}/{k + 1:02d}_1_front.jpg"
            write_jpeg(root / rel, item, k)
            status = "train" if item <= train else ("query" if k % 2 == 0 else "gallery")
            rows.append(f"{rel:60s} id_{item:08d}   {status}")
    (root / "Eval").mkdir(parents=True, exist_ok=True)
    text = f"{len(rows)}\nimage_name item_id evaluation_status\n" + "\n".join(rows) + "\n"
    (root / "Eval" / "list_eval_partition.txt").write_text(text)
    return root


def small_images(protocol, size: int = 32):
    """The protocol with its image pipelines shrunk to ``size`` (same kinds of steps)."""
    train = protocol.images.train
    overrides = {
        "images.train.resize": size + 4,
        "images.test.resize": size + 4,
        "images.test.center_crop": size,
    }
    if train.random_resized_crop:
        overrides["images.train.random_resized_crop"] = size
    if train.random_crop:
        overrides["images.train.random_crop"] = size
    return protocol.with_overrides(overrides)
