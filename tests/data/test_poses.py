"""poses: deterministic stick figures, labels = joints relative to the neck, unseen test poses."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dmlbench.data import load_data
from dmlbench.data.dense import PoseDistance
from dmlbench.data.poses import (
    FOREARM,
    JOINTS,
    SHIN,
    THIGH,
    UPPER_ARM,
    PosesParams,
    generate,
    load_or_generate,
    skeleton,
)

SMALL = PosesParams(train_poses=4, test_poses=3, images_per_pose=8, image_size=32)


def test_skeleton_keeps_segment_lengths_whatever_the_angles() -> None:
    j = {name: i for i, name in enumerate(JOINTS)}
    rng = np.random.default_rng(0)
    for _ in range(10):
        s = skeleton(rng.uniform(-180, 180, size=10))
        assert np.allclose(s[j["neck"]], 0.0)
        for side in "rl":
            for a, b, length in (
                ("shoulder", "elbow", UPPER_ARM),
                ("elbow", "wrist", FOREARM),
                ("hip", "knee", THIGH),
                ("knee", "ankle", SHIN),
            ):
                seg = s[j[f"{side}_{a}"]] - s[j[f"{side}_{b}"]]
                assert np.linalg.norm(seg) == pytest.approx(length)


def test_generation_is_deterministic_and_labels_are_neck_relative() -> None:
    a, la, ida = generate(SMALL)
    b, lb, idb = generate(SMALL)
    assert np.array_equal(a, b) and np.array_equal(la, lb) and np.array_equal(ida, idb)
    assert a.shape == (56, 1, 32, 32) and a.dtype == np.uint8
    assert la.shape == (56, 2 * len(JOINTS)) and la.dtype == np.float32
    neck = JOINTS.index("neck")
    assert np.allclose(la[:, 2 * neck : 2 * neck + 2], 0.0)
    assert np.abs(la).max() < 1.0  # divided by the image size: the figure fits the image
    assert len({img.tobytes() for img in a}) == len(a)
    c, _, _ = generate(SMALL.model_copy(update={"seed": 1}))
    assert not np.array_equal(a, c)


def test_images_of_one_base_pose_are_closer_in_label_space() -> None:
    _, labels, ids = generate(SMALL)
    d = PoseDistance().rowwise(labels[:, None], labels[None])
    same = ids[:, None] == ids[None]
    off = ~np.eye(len(ids), dtype=bool)
    assert d[same & off].mean() < 0.6 * d[~same].mean()


def test_left_and_right_limbs_are_drawn_differently() -> None:
    # A figure with arms stretched sideways: the two wrists sit on limbs of distinct shades.
    from dmlbench.data.poses import render

    angles = np.array([0, 0, -90, 0, -90, 0, 0, 0, 0, 0], dtype=float)
    img, joints = render(angles, 64, np.random.default_rng(0))
    r, lft = joints[JOINTS.index("r_wrist")], joints[JOINTS.index("l_wrist")]
    near = lambda p: img[int(p[1]) - 1 : int(p[1]) + 2, int(p[0]) - 1 : int(p[0]) + 2].max()  # noqa: E731
    assert abs(int(near(r)) - int(near(lft))) > 50


def test_cache_round_trip(tmp_path: Path) -> None:
    first = load_or_generate(SMALL, tmp_path)
    files = list((tmp_path / "poses").glob("*.npz"))
    assert len(files) == 1
    files[0].write_bytes(b"broken")
    again = load_or_generate(SMALL, tmp_path)
    assert all(np.array_equal(x, y) for x, y in zip(first, again, strict=True))


def test_poses_mini_protocol_split() -> None:
    from dmlbench.protocol import load_protocol

    protocol = load_protocol("poses-mini").with_overrides(
        {
            "data.params.train_poses": 6,
            "data.params.test_poses": 4,
            "data.params.images_per_pose": 16,
        },
        name="poses-tiny",
    )
    data = load_data(protocol)
    train, test = data.train, data.test
    assert train.label_kind == test.label_kind == "continuous"
    assert len(train) == 96 and len(test) == 64
    assert np.array_equal(test.queries, np.arange(0, 64, 8))
    assert np.array_equal(np.sort(np.concatenate([test.queries, test.gallery])), np.arange(64))
    assert train.extras["label_distance"] == "pose" and test.extras["label_distance"] == "pose"
    assert train.images[0].shape == (1, 40, 40)  # poses-mini renders at 40 px
    # test images show base poses training never sees: their nearest training pose is farther
    # than a training image's nearest other training image
    dist = PoseDistance()
    tr, te = np.asarray(train.labels), np.asarray(test.labels)
    d_tt = dist.rowwise(tr[:, None], tr[None])
    np.fill_diagonal(d_tt, np.inf)
    assert dist.rowwise(te[:, None], tr[None]).min(axis=1).mean() > 1.5 * d_tt.min(axis=1).mean()
    assert data.fingerprint == load_data(protocol).fingerprint


@pytest.mark.slow
def test_run_all_continuous_methods_end_to_end(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`dmlbench run --method all` on poses picks the continuous methods; the table reports
    nDCG@K and mean label distance@K for every K of the protocol."""
    from dmlbench.cli.main import main

    code = main(
        [
            "run",
            "--protocol",
            "poses-mini",
            "--method",
            "all",
            "--seed",
            "0",
            "--no-search",
            "--max-steps",
            "2",
            "--results-dir",
            str(tmp_path / "r"),
            "--reports-dir",
            str(tmp_path / "rep"),
            "--no-progress",
        ]
    )
    assert code == 0
    methods = {p.name.split("-seed")[0] for p in (tmp_path / "r").rglob("*.json")}
    rows = {"pixels", "untrained", "pretrained"}  # poses-mini starts from a trunk
    assert methods == rows | {"log-ratio", "triplet-dense", "triplet-binary"}
    header = next(line for line in capsys.readouterr().out.splitlines() if "ndcg@1" in line)
    for k in (1, 5, 10):
        assert f"ndcg@{k}" in header and f"mld@{k}" in header


def test_shift_and_scale_spread_the_figures_and_keep_the_labels() -> None:
    """Larger ``shift`` and ``scale`` move and resize the figures (the image's bright centre of
    mass spreads several times wider) while the labels, joints relative to the neck in image
    units, keep their base poses: the same angles drawn with the same random numbers."""
    wide = SMALL.model_copy(update={"shift": 0.25, "scale": 0.4})
    narrow_imgs, narrow_labels, _ = generate(SMALL)
    wide_imgs, wide_labels, _ = generate(wide)

    def centres(images: np.ndarray) -> np.ndarray:
        w = images[:, 0].astype(np.float64) ** 2  # the strokes, not the faint clutter
        grid = np.arange(images.shape[-1])
        return (
            np.stack([(w.sum(1) * grid).sum(1), (w.sum(2) * grid).sum(1)], 1)
            / w.sum((1, 2))[:, None]
        )

    assert centres(wide_imgs).std(0).mean() > 2.5 * centres(narrow_imgs).std(0).mean()
    ratio = np.linalg.norm(wide_labels, axis=1) / np.linalg.norm(narrow_labels, axis=1)
    assert ratio.min() > 0.55 and ratio.max() < 1.5  # heights within the wider ±40%
    assert not np.array_equal(wide_imgs, narrow_imgs)
