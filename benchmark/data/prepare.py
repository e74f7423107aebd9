"""``dmlbench data prepare NAME --root DIR``: get a real data set into place and write its manifest.

For each data set:

1. If ``DIR`` already holds the official files (checked with the data set's own loader: index
   files parse, every listed image exists), write ``DIR/dmlbench-manifest.json`` and stop.
2. Else, where the data set has a usable public URL (CUB-200-2011), download it (streamed to a
   ``.part`` file), verify its SHA-256 *before* extracting, extract safely (only regular files
   and folders; a member with an absolute path, ``..``, a link or a device is refused before
   anything is written), check the layout and write the manifest. ``--url`` points at a mirror
   (or a ``file://`` copy); the official SHA-256 is still required unless ``--sha256`` is given.
3. Else (Cars196, SOP, In-shop: official URLs gone, or behind Google Drive) print exactly which
   files to place where, and exit with status 2; run the command again once they are there.

The manifest lists every image (relative path, size, class, role) with the fingerprint that
records carry, so a copy of the data can be compared with the one that produced a number.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tarfile
import urllib.request
import zipfile
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath

from dmlbench.data.about import Archive, Spec
from dmlbench.errors import DataError, DmlbenchError

MANIFEST = "dmlbench-manifest.json"


def specs() -> dict[str, Spec]:
    """Each data set that ``prepare`` fetches or explains, with its :class:`Spec`: read from the
    sources' descriptions (``About.prepare``), so a new data set needs no entry here."""
    from dmlbench.data import DATASETS

    found = {name: DATASETS.get(name).about.prepare for name in DATASETS.list()}
    return {name: spec for name, spec in found.items() if isinstance(spec, Spec)}


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def download(url: str, dest: Path, sha256: str) -> Path:
    """Stream ``url`` to ``dest`` (via ``dest.part``); the SHA-256 must match or nothing is kept."""
    from tqdm.auto import tqdm

    if dest.is_file() and sha256_of(dest) == sha256:
        return dest
    part = dest.with_name(dest.name + ".part")
    h = hashlib.sha256()
    try:
        with urllib.request.urlopen(url, timeout=60) as resp, part.open("wb") as out:
            total = int(resp.headers.get("Content-Length") or 0) or None
            with tqdm(total=total, unit="B", unit_scale=True, desc=dest.name, disable=None) as bar:
                for chunk in iter(lambda: resp.read(1 << 20), b""):
                    out.write(chunk)
                    h.update(chunk)
                    bar.update(len(chunk))
    except OSError as err:  # URLError, timeouts, disk full
        part.unlink(missing_ok=True)
        raise DataError(f"{url}: download failed ({err})") from None
    if h.hexdigest() != sha256:
        part.unlink(missing_ok=True)
        raise DataError(
            f"{url}: SHA-256 {h.hexdigest()} differs from the expected {sha256}; "
            "the file was deleted, nothing was extracted"
        )
    os.replace(part, dest)
    return dest


def _member_target(root: Path, name: str, strip: str, archive: Path) -> Path | None:
    """Where a member goes under ``root`` (``None``: outside ``strip``); refuses escapes."""
    if name.startswith("/") or "\\" in name or (len(name) > 1 and name[1] == ":"):
        raise DataError(f"{archive}: member {name!r} has an absolute path; refusing to extract")
    pure = PurePosixPath(name)
    if ".." in pure.parts:
        raise DataError(f"{archive}: member {name!r} escapes the root; refusing to extract")
    rel = pure.as_posix()
    if strip:
        if not (rel + "/").startswith(strip):
            return None
        rel = rel[len(strip) :]
    if not rel or rel == ".":
        return None
    target = (root / rel).resolve()
    if not target.is_relative_to(root.resolve()):
        raise DataError(f"{archive}: member {name!r} escapes the root; refusing to extract")
    return target


def safe_extract(archive: Path, root: Path, strip: str = "") -> int:
    """Extract regular files and folders of a tar or zip archive into ``root``; returns the
    number of files. Every member is checked before anything is written."""
    root.mkdir(parents=True, exist_ok=True)
    count = 0
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as zf:
            plan = [
                (info, _member_target(root, info.filename, strip, archive))
                for info in zf.infolist()
            ]
            for info, target in plan:
                mode = (info.external_attr >> 16) & 0o170000
                if target is not None and mode and mode not in (0o100000, 0o040000):
                    raise DataError(f"{archive}: member {info.filename!r} is not a regular file")
            for info, target in plan:
                if target is None or info.is_dir():
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(info) as src, target.open("wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)
                count += 1
        return count
    if not tarfile.is_tarfile(archive):
        raise DataError(f"{archive}: not a tar or zip archive")
    with tarfile.open(archive, "r:*") as tf:
        members = [(m, _member_target(root, m.name, strip, archive)) for m in tf.getmembers()]
        for m, target in members:
            if target is not None and not (m.isfile() or m.isdir()):
                raise DataError(f"{archive}: member {m.name!r} is a link or device; refusing")
        for m, target in members:
            if target is None or m.isdir():
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            data = tf.extractfile(m)
            assert data is not None
            with data, target.open("wb") as dst:
                shutil.copyfileobj(data, dst, 1 << 20)
            count += 1
    return count


def check_images(files: list[Path], workers: int | None = None) -> None:
    """Decode every image (threads: PIL releases the GIL), with a progress bar.

    Raises:
        DataError: naming every file that does not decode (one line), so that one pass finds
            all of them instead of one per attempt.
    """
    from concurrent.futures import ThreadPoolExecutor

    from tqdm.auto import tqdm

    from dmlbench.data.cache import decode

    def problem(path: Path) -> str | None:
        try:
            decode(path, None)
        except DataError as err:
            return str(err)
        return None

    bad = []
    with (
        ThreadPoolExecutor(workers or min(8, os.cpu_count() or 1)) as pool,
        tqdm(total=len(files), desc="checking images", unit="img", disable=None) as bar,
    ):
        for found in pool.map(problem, files):
            bar.update(1)
            if found is not None:
                bad.append(found)
    if bad:
        raise DataError(f"{len(bad)} of {len(files)} images do not decode: {'; '.join(bad)}")


def write_manifest(name: str, root: Path, source: dict[str, str] | None) -> dict[str, object]:
    """Check the layout with the data set's loader and write ``root/dmlbench-manifest.json``."""
    from dmlbench import __version__
    from dmlbench.data import DATASETS
    from dmlbench.data.files import manifest
    from dmlbench.records import atomic_write_text

    cls = DATASETS.get(name)
    entries = cls().entries(cls.Params(), root)
    sizes, fingerprint = manifest(root, entries, name)
    check_images([root / e.path for e in entries])
    counts: dict[str, int] = {}
    for e in entries:
        counts[e.role] = counts.get(e.role, 0) + 1
    data: dict[str, object] = {
        "dataset": name,
        "fingerprint": fingerprint,
        "counts": counts,
        "official_counts": dict(getattr(cls, "expected", {})),
        "source": source,
        "created": datetime.now(timezone.utc).isoformat(),
        "dmlbench": __version__,
        "files": [[e.path, int(s), e.label, e.role] for e, s in zip(entries, sizes, strict=True)],
    }
    atomic_write_text(root / MANIFEST, json.dumps(data, indent=0))
    return data


def prepare(
    name: str,
    root: Path,
    url: str | None = None,
    sha256: str | None = None,
    keep_archive: bool = False,
    force: bool = False,
) -> int:
    """The ``prepare`` command; returns the exit status.

    A folder that already holds files is never downloaded over without ``force``: what is
    wrong with it (a missing or damaged file) is reported instead, since extracting an archive
    there could overwrite the user's own files. A root that is a file or cannot be written is
    one line before anything is checked, decoded or downloaded: the manifest goes there.
    """
    from dmlbench.records import folder_problem

    if problem := folder_problem(root, "--root"):
        raise DataError(f"{problem}; {name}'s manifest (and any download) is written there")
    spec = specs()[name]
    try:
        data = write_manifest(name, root, source=None)
    except DataError as err:
        missing = err
        holds_files = root.is_dir() and any(p.name != MANIFEST for p in root.iterdir())
        if holds_files and not force:
            raise DataError(
                f"{err} — {root} already holds files, so nothing was downloaded; fix the file, "
                "or pass --force to download and extract over it"
            ) from None
    else:
        print(f"{name}: files in place under {root}; {data['counts']}")
        print(f"written: {root / MANIFEST} (fingerprint {str(data['fingerprint'])[:12]})")
        return 0
    archive = spec.archive
    if url is not None:
        if archive is None and sha256 is None:
            raise DmlbenchError(f"{name}: --url needs --sha256 (no official archive to check)")
        archive = Archive(url, sha256 or archive.sha256, archive.strip if archive else "")
    elif archive is not None and sha256 is not None:
        archive = Archive(archive.url, sha256, archive.strip)
    if archive is None:
        print(
            f"{name}: the files are not in place ({missing}).\n"
            f"No download URL can be used: {spec.where.format(root=root)}.\n"
            f"These files must exist:\n{spec.layout.format(root=root)}\n"
            f"Then run `dmlbench data prepare {name} --root {root}` again: it checks the "
            f"files and writes {root / MANIFEST}."
        )
        return 2
    root.mkdir(parents=True, exist_ok=True)
    filename = archive.url.split("?")[0].rstrip("/").rsplit("/", 1)[-1] or f"{name}.archive"
    print(f"{name}: downloading {archive.url}")
    path = download(archive.url, root / filename, archive.sha256)
    print(f"{name}: SHA-256 verified; extracting into {root}")
    try:
        n = safe_extract(path, root, archive.strip)
    finally:  # a refused archive is not kept either, unless asked
        if not keep_archive:
            path.unlink(missing_ok=True)
    data = write_manifest(name, root, source={"url": archive.url, "sha256": archive.sha256})
    print(f"{name}: {n} files extracted; {data['counts']}")
    print(f"written: {root / MANIFEST} (fingerprint {str(data['fingerprint'])[:12]})")
    return 0
