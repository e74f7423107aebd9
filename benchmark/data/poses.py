"""poses: rendered stick figures with continuous pose labels, standing in for MPII.

A figure has 14 joints (head, neck, shoulders, elbows, wrists, hips, knees, ankles) on a
kinematic tree driven by 10 angles (torso lean, head tilt, upper arms, forearms, thighs, shins).
``train_poses + test_poses`` base poses are drawn at random; an image draws every angle from a
Gaussian around its base pose (``angle_noise`` degrees), then jitters the figure's scale (by up
to ``scale``, a fraction of its height) and position (by up to ``shift`` of the image size).
With the small defaults the figures stay centred and nearest neighbours on the raw pixels
already retrieve poses well; larger ones make position and size nuisances a network must
learn to ignore, as a person's placement in an MPII photograph is. Limbs are thick
anti-aliased strokes (rendered at 4× and box-downsampled);
right limbs are bright, left limbs dimmer and the torso in between, so left and right can be
told apart; the background is cluttered with random faint strokes and pixel noise.

The label is the joint coordinates relative to the neck divided by the image size (14 × 2
values, joint by joint); the label distance is ``pose``: the sum of Euclidean distances between
corresponding joints, the pose distance Kim et al. use on MPII (Kim et al. §4.3). The test split
uses base poses training never sees; every ``query_every``-th test image is a query and the
rest the database, so each base pose has queries and database images.

Every image depends only on (seed, base pose, instance); arrays are cached keyed by a hash of
the parameters and fingerprinted like glyphs.
"""

from __future__ import annotations

import hashlib
import logging
import math
from pathlib import Path

import numpy as np
from pydantic import Field

from dmlbench.data.about import About
from dmlbench.data.base import (
    DATASETS,
    ArrayImages,
    DatasetSource,
    DataSplits,
    Split,
    fingerprint_arrays,
)
from dmlbench.data.npz_cache import load_or_rebuild
from dmlbench.protocol import MAX_SEED, Float, FrozenModel, Int

log = logging.getLogger(__name__)

GENERATOR_VERSION = 1
SUPERSAMPLE = 4
JOINTS = (
    "head",
    "neck",
    "r_shoulder",
    "r_elbow",
    "r_wrist",
    "l_shoulder",
    "l_elbow",
    "l_wrist",
    "r_hip",
    "r_knee",
    "r_ankle",
    "l_hip",
    "l_knee",
    "l_ankle",
)
# Segment lengths in units of the figure's height.
HEAD, TORSO, SHOULDER, UPPER_ARM, FOREARM, HIP, THIGH, SHIN = (
    0.13,
    0.33,
    0.10,
    0.16,
    0.15,
    0.06,
    0.22,
    0.21,
)
# Base-pose angle ranges (degrees): torso lean, head tilt, then per side upper arm and
# forearm bend, thigh and shin bend. Limb angles are measured from "hanging down".
ANGLE_RANGES = np.array(
    [
        (-25, 25),
        (-25, 25),
        (-170, 170),
        (0, 140),
        (-170, 170),
        (0, 140),
        (-70, 70),
        (0, 110),
        (-70, 70),
        (0, 110),
    ],
    dtype=np.float64,
)
BRIGHT, MID, DIM = 255, 200, 130  # right limbs, torso/head, left limbs


class PosesParams(FrozenModel):
    image_size: Int = Field(64, ge=24, le=256)
    # Upper bounds: one line at validation instead of an hour of generating (or an
    # allocation error) for a mistyped count.
    train_poses: Int = Field(40, ge=2, le=100_000)
    test_poses: Int = Field(20, ge=1, le=100_000)
    images_per_pose: Int = Field(40, ge=2, le=10_000)
    angle_noise: Float = Field(12.0, ge=0.0, le=60.0, description="degrees, every angle")
    query_every: Int = Field(8, ge=2, le=10_000, description="every n-th test image is a query")
    shift: Float = Field(0.05, ge=0.0, le=0.3, description="largest shift, fraction of the size")
    scale: Float = Field(0.1, ge=0.0, le=0.5, description="largest relative change of height")
    seed: Int = Field(0, ge=0, le=MAX_SEED)


def base_poses(params: PosesParams) -> np.ndarray:
    """(train_poses + test_poses, 10) base angles in degrees; train first."""
    rng = np.random.default_rng([params.seed, 7919, GENERATOR_VERSION])
    n = params.train_poses + params.test_poses
    return rng.uniform(ANGLE_RANGES[:, 0], ANGLE_RANGES[:, 1], size=(n, len(ANGLE_RANGES)))


def skeleton(angles: np.ndarray) -> np.ndarray:
    """Joint positions (14, 2) in figure-height units, image axes (y down), neck at the origin."""
    lean, tilt, rua, rfa, lua, lfa, rth, rsh, lth, lsh = np.radians(angles)
    down = np.array([math.sin(lean), math.cos(lean)])  # torso direction, neck → pelvis
    side = np.array([down[1], -down[0]])  # the figure's right, as seen in the image (left side)

    def towards(angle: float) -> np.ndarray:  # unit vector rotated ``angle`` from ``down``
        c, s = math.cos(angle), math.sin(angle)
        return np.array([c * down[0] - s * down[1], s * down[0] + c * down[1]])

    neck = np.zeros(2)
    head = neck - HEAD * towards(tilt)
    pelvis = neck + TORSO * down
    joints = {"head": head, "neck": neck}
    for prefix, sign, ua, fa, th, sh in (
        ("r", 1.0, rua, rfa, rth, rsh),
        ("l", -1.0, -lua, -lfa, -lth, -lsh),
    ):
        shoulder = neck + sign * SHOULDER * side
        elbow = shoulder + UPPER_ARM * towards(ua)
        wrist = elbow + FOREARM * towards(ua + sign * fa)
        hip = pelvis + sign * HIP * side
        knee = hip + THIGH * towards(th)
        ankle = knee + SHIN * towards(th - sign * sh)
        joints.update(
            {
                f"{prefix}_shoulder": shoulder,
                f"{prefix}_elbow": elbow,
                f"{prefix}_wrist": wrist,
                f"{prefix}_hip": hip,
                f"{prefix}_knee": knee,
                f"{prefix}_ankle": ankle,
            }
        )
    return np.stack([joints[name] for name in JOINTS])


LIMBS = (  # (joint a, joint b, intensity)
    ("neck", "head", MID),
    ("r_shoulder", "l_shoulder", MID),
    ("r_hip", "l_hip", MID),
    ("r_shoulder", "r_elbow", BRIGHT),
    ("r_elbow", "r_wrist", BRIGHT),
    ("r_hip", "r_knee", BRIGHT),
    ("r_knee", "r_ankle", BRIGHT),
    ("l_shoulder", "l_elbow", DIM),
    ("l_elbow", "l_wrist", DIM),
    ("l_hip", "l_knee", DIM),
    ("l_knee", "l_ankle", DIM),
)


def render(
    angles: np.ndarray,
    size: int,
    rng: np.random.Generator,
    shift: float = 0.05,
    scale: float = 0.1,
) -> tuple[np.ndarray, np.ndarray]:
    """One image (size, size) uint8 and its joints (14, 2) in pixels."""
    from PIL import Image, ImageDraw

    canvas = size * SUPERSAMPLE
    body = skeleton(angles)
    height = size * 0.6 * rng.uniform(1.0 - scale, 1.0 + scale)
    lo, hi = body.min(axis=0), body.max(axis=0)
    centre = size / 2 + rng.uniform(-shift, shift, size=2) * size
    pixels = (body - (lo + hi) / 2) * height + centre

    img = Image.new("L", (canvas, canvas), 0)
    draw = ImageDraw.Draw(img)
    for _ in range(int(rng.integers(6, 14))):  # clutter: faint random strokes
        a, b = rng.uniform(0, canvas, size=(2, 2))
        width = int(rng.integers(1, 3)) * SUPERSAMPLE
        draw.line([tuple(a), tuple(b)], fill=int(rng.integers(25, 80)), width=width)
    s = pixels * SUPERSAMPLE
    width = max(SUPERSAMPLE, round(size * 0.05 * SUPERSAMPLE))
    index = {name: i for i, name in enumerate(JOINTS)}
    torso_mid = (s[index["r_hip"]] + s[index["l_hip"]]) / 2
    draw.line([tuple(s[index["neck"]]), tuple(torso_mid)], fill=MID, width=width)
    for a, b, shade in LIMBS:
        pa, pb = s[index[a]], s[index[b]]
        draw.line([tuple(pa), tuple(pb)], fill=shade, width=width)
        for p in (pa, pb):
            r = width / 2
            draw.ellipse([p[0] - r, p[1] - r, p[0] + r, p[1] + r], fill=shade)
    r = HEAD * 0.45 * height * SUPERSAMPLE
    h = s[index["head"]]
    draw.ellipse([h[0] - r, h[1] - r, h[0] + r, h[1] + r], fill=MID)
    img = img.resize((size, size), resample=Image.Resampling.BOX)
    arr = np.asarray(img, dtype=np.float32) + rng.normal(0.0, rng.uniform(2.0, 10.0), (size, size))
    return np.clip(arr, 0, 255).astype(np.uint8), pixels


def generate(params: PosesParams) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Images (N, 1, S, S) uint8, labels (N, 28) float32 and base-pose ids (N,); train first."""
    bases = base_poses(params)
    n = len(bases) * params.images_per_pose
    size = params.image_size
    images = np.empty((n, 1, size, size), dtype=np.uint8)
    labels = np.empty((n, 2 * len(JOINTS)), dtype=np.float32)
    pose_ids = np.repeat(np.arange(len(bases)), params.images_per_pose)
    for i, b in enumerate(pose_ids):
        rng = np.random.default_rng(
            [params.seed, int(b), i % params.images_per_pose, GENERATOR_VERSION]
        )
        angles = bases[b] + rng.normal(0.0, params.angle_noise, size=bases.shape[1])
        images[i, 0], joints = render(angles, size, rng, params.shift, params.scale)
        labels[i] = ((joints - joints[JOINTS.index("neck")]) / size).reshape(-1)
    return images, labels, pose_ids


def _cache_key(params: PosesParams) -> str:
    import PIL

    text = f"{params.model_dump_json()}|v{GENERATOR_VERSION}|pil{PIL.__version__}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def load_or_generate(params: PosesParams, cache: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Generated arrays, from ``cache`` when present (a damaged cache file is regenerated)."""
    path = cache / "poses" / f"poses-{_cache_key(params)}.npz"
    size = params.image_size

    def plausible(arrays: tuple[np.ndarray, ...]) -> bool:
        images, labels, pose_ids = arrays
        poses = params.train_poses + params.test_poses
        n = poses * params.images_per_pose
        return (
            images.dtype == np.uint8
            and images.shape == (n, 1, size, size)
            and labels.dtype == np.float32
            and labels.shape == (n, 2 * len(JOINTS))
            and bool(np.isfinite(labels).all())
            and pose_ids.shape == (n,)
            and pose_ids.dtype.kind == "i"
            and bool(((pose_ids >= 0) & (pose_ids < poses)).all())
        )

    images, labels, pose_ids = load_or_rebuild(
        path, ("images", "labels", "pose_ids"), lambda: generate(params), plausible, "poses cache"
    )
    return images, labels, pose_ids


@DATASETS.register("poses")
class Poses(DatasetSource):
    Params = PosesParams
    reads_root = False
    label_kind = "continuous"
    description = "stick figures with continuous pose labels (embedded, generated)"
    about = About(
        source="stick figures generated in memory",
        licence="generated by dmlbench (its licence)",
        splits="by base pose; every n-th test image queries the rest",
    )

    def load(self, params: PosesParams, root: Path | None, cache_dir: Path) -> DataSplits:
        images, labels, pose_ids = load_or_generate(params, cache_dir)
        train = pose_ids < params.train_poses
        n_test = int((~train).sum())
        queries = np.arange(0, n_test, params.query_every)
        gallery = np.setdiff1d(np.arange(n_test), queries)
        extras = {"label_distance": "pose", "joint_dims": 2}
        return DataSplits(
            train=Split(
                ArrayImages(images[train]),
                labels[train],
                label_kind="continuous",
                extras={**extras, "groups": pose_ids[train]},  # validation holds out poses
            ),
            test=Split(
                ArrayImages(images[~train]),
                labels[~train],
                label_kind="continuous",
                queries=queries,
                gallery=gallery,
                extras=dict(extras),
            ),
            fingerprint=fingerprint_arrays(images, labels, extra="poses"),
            info={
                "train_poses": params.train_poses,
                "test_poses": params.test_poses,
                "queries": len(queries),
                "database": len(gallery),
            },
        )
