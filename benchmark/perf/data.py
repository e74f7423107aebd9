"""Images/s of the cached image pipeline against a plain torchvision ImageFolder + PIL pipeline.

``python -m dmlbench.perf.data`` writes a fixture of generated JPEGs (default 500 images of
400×300 in 10 class folders) to a temporary folder, then times ``--epochs`` (≥ 3) epochs of
each pipeline, taking turns, on the same files, batch size, number of DataLoader workers and
augmentation, and prints the median images/s with min and max, and the load average at the
start and the end (it writes no report file):

- ``torchvision ImageFolder + PIL``: decode the JPEG, ``Resize(256)``, ``RandomResizedCrop(224)``,
  ``RandomHorizontalFlip``, ``ToTensor`` on every item (the usual DML training pipeline);
- ``dmlbench cached``: images decoded and resized once into the on-disk uint8 cache (its build
  time is reported separately), then per item a memory-mapped read, the same random-resized
  crop and flip on the uint8 tensor, and the conversion to float.

Both produce float (3, 224, 224) batches in [0, 1]. Torch uses one thread per process (as it
does in DataLoader workers), so both pipelines get the same cores.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import torch

from dmlbench.perf._common import Spread, load_averages, rounds_option


def make_fixture(root: Path, n: int, width: int, height: int, classes: int = 10) -> list[Path]:
    """``n`` JPEGs with photo-like content (smooth gradients, blobs, noise) in class folders."""
    from PIL import Image, ImageDraw, ImageFilter

    files = []
    for i in range(n):
        rng = np.random.default_rng(i)
        yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
        base = rng.uniform(0, 255, size=3)
        slope = rng.uniform(-0.4, 0.4, size=(3, 2))
        arr = base + xx[..., None] * slope[:, 0] + yy[..., None] * slope[:, 1]
        img = Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8))
        draw = ImageDraw.Draw(img)
        for _ in range(12):
            x0, y0 = int(rng.integers(0, width)), int(rng.integers(0, height))
            r = int(rng.integers(8, max(9, min(width, height) // 3)))
            colour = tuple(int(c) for c in rng.integers(0, 256, size=3))
            draw.ellipse((x0 - r, y0 - r, x0 + r, y0 + r), fill=colour)
        img = img.filter(ImageFilter.GaussianBlur(1.5))
        noisy = np.asarray(img, dtype=np.float32) + rng.normal(0, 6, size=(height, width, 3))
        path = root / f"class_{i % classes:02d}" / f"img_{i:05d}.jpg"
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8)).save(path, quality=90)
        files.append(path)
    return files


def _epoch(loader: Iterable[torch.Tensor]) -> tuple[int, float]:
    start, count = time.perf_counter(), 0
    for x in loader:
        count += int(x.shape[0])
    return count, time.perf_counter() - start


def _batches(n: int, batch_size: int, seed: int) -> list[list[int]]:
    order = np.random.default_rng(seed).permutation(n)
    return [order[i : i + batch_size].tolist() for i in range(0, n, batch_size)]


def run(
    images: int = 500,
    width: int = 400,
    height: int = 300,
    resize: int = 256,
    crop: int = 224,
    batch_size: int = 50,
    workers: int = 2,
    epochs: int = 3,
    workdir: Path | None = None,
) -> dict[str, float]:
    """Time both pipelines; returns images/s of each, the ratio and the cache build time."""
    import torchvision
    from torchvision import transforms as T

    from dmlbench.data.cache import CachedImages, open_or_build
    from dmlbench.data.files import Entry, manifest
    from dmlbench.data.transforms import build_pipeline
    from dmlbench.protocol import TransformSpec

    tmp = Path(tempfile.mkdtemp(prefix="dmlbench-perf-", dir=workdir))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        root = tmp / "images"
        files = make_fixture(root, images, width, height)
        entries = [Entry(p.relative_to(root).as_posix(), 0, "train") for p in files]
        _, fingerprint = manifest(root, entries, "perf")
        start = time.perf_counter()
        cache = open_or_build(tmp / "cache", fingerprint, files, resize, workers=max(1, workers))
        build_s = time.perf_counter() - start

        spec = TransformSpec(resize=resize, random_resized_crop=crop, hflip=0.5)
        ours = CachedImages(cache, np.arange(len(files)), build_pipeline(spec, resized=True), True)
        plain = torchvision.datasets.ImageFolder(
            str(root),
            transform=T.Compose(
                [
                    T.Resize(resize),
                    T.RandomResizedCrop(crop, scale=spec.crop_scale),
                    T.RandomHorizontalFlip(0.5),
                    T.ToTensor(),
                ]
            ),
        )

        def stack(batch: object) -> torch.Tensor:
            return batch if isinstance(batch, torch.Tensor) else torch.stack([b[0] for b in batch])  # type: ignore[attr-defined]

        rates: dict[str, list[float]] = {"cached": [], "imagefolder": []}
        for epoch in range(epochs):
            ours.set_epoch(epoch, seed=0)
            batches = _batches(len(files), batch_size, epoch)
            for name, ds in (("imagefolder", plain), ("cached", ours)):
                loader = torch.utils.data.DataLoader(
                    ds, batch_sampler=batches, collate_fn=stack, num_workers=workers
                )
                n, seconds = _epoch(loader)
                rates[name].append(n / seconds)
        spread = {name: Spread.of(v) for name, v in rates.items()}
        return {
            **{f"{k}_images_per_s": v.median for k, v in spread.items()},
            **{f"{k}_images_per_s_min": v.low for k, v in spread.items()},
            **{f"{k}_images_per_s_max": v.high for k, v in spread.items()},
            "speedup": spread["cached"].median / spread["imagefolder"].median,
            "cache_build_s": build_s,
            "cache_build_images_per_s": len(files) / build_s,
            "images": float(len(files)),
        }
    finally:
        torch.set_num_threads(threads)
        shutil.rmtree(tmp, ignore_errors=True)


def format_table(r: dict[str, float], args: argparse.Namespace, loads: tuple[str, str]) -> str:
    def rate(key: str) -> str:
        low, high = r[f"{key}_images_per_s_min"], r[f"{key}_images_per_s_max"]
        return f"{r[f'{key}_images_per_s']:10.1f}   {low:.1f} – {high:.1f}"

    lines = [
        f"{int(r['images'])} JPEGs {args.width}x{args.height}, resize {args.resize}, "
        f"random-resized crop {args.crop} + flip, batch {args.batch_size}, "
        f"{args.workers} DataLoader worker(s), median of {args.epochs} interleaved epochs",
        f"load average (1, 5, 15 min) at start: {loads[0]}; at the end: {loads[1]}",
        "",
        f"{'pipeline':34} {'images/s':>10}   min – max",
        f"{'torchvision ImageFolder + PIL':34} {rate('imagefolder')}",
        f"{'dmlbench cached uint8':34} {rate('cached')}",
        f"{'speed-up':34} {r['speedup']:9.2f}x",
        "",
        f"one-time cache build: {r['cache_build_s']:.2f} s "
        f"({r['cache_build_images_per_s']:.1f} images/s)",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m dmlbench.perf.data",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--images", type=int, default=500)
    parser.add_argument("--width", type=int, default=400)
    parser.add_argument("--height", type=int, default=300)
    parser.add_argument("--resize", type=int, default=256)
    parser.add_argument("--crop", type=int, default=224)
    parser.add_argument("--batch-size", type=int, default=50)
    parser.add_argument(
        "--workers",
        type=int,
        default=min(2, os.cpu_count() or 1),
        help="DataLoader workers for both pipelines (default: min(2, cores))",
    )
    rounds_option(parser, "--epochs", 3, "epochs timed per pipeline, ≥ 3 (median, min, max)")
    parser.add_argument("--workdir", type=Path, default=None, help="where the fixture goes")
    args = parser.parse_args(argv)
    start_load = load_averages()
    result = run(
        args.images,
        args.width,
        args.height,
        args.resize,
        args.crop,
        args.batch_size,
        args.workers,
        args.epochs,
        args.workdir,
    )
    print(format_table(result, args, (start_load, load_averages())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
