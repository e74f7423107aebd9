"""A hostile user against the "What happens when…" table (docs/failures.md), from the shell.

Every case runs the ``dmlbench`` command line as a user would (in this process, which a new
one would behave like: :mod:`tests.cli.runner`; as another user in a new one), and checks what the
table promises: exit status 2 with ONE ``error: …`` line naming the file, key or path and no
traceback, or the documented recovery (a warning naming the file, then a normal run) — and
that nothing already on disk was lost.

The glyphs cases use a tiny generated protocol (8 classes of 16 px glyphs, 2 steps); the
real-image cases the CUB-200-2011 fixture of :mod:`tests.reliability.test_bad_input`.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tests.cli.runner import run_cli
from tests.reliability.test_bad_input import BANNER, Setup, fixture_protocol

TINY = """\
name: glyphs-tiny
version: 1
data: {dataset: glyphs, params: {image_size: 16, num_classes: 8, instances_per_font: 1}}
model: {backbone: small-cnn, pretrained: null, embedding_size: 8}
batch: {size: 16, samples_per_class: 4}
optim: {lr: 1.0e-3, epochs: 1}
metrics: {recall_at: [1, 2], nmi: false}
search: {trials: 0}
seeds: [0]
methods: [contrastive]
"""
QUICK = ["--max-steps", "2", "--no-progress"]


NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


@functools.cache
def readable_package() -> Path:
    """A copy of the dmlbench package that ``nobody`` can import.

    The editable install points into the checkout, which may sit in a folder only root can
    enter (CI clones into one); the copy lies in a world-readable temporary folder, first on
    ``PYTHONPATH``. When ``nobody`` cannot start the interpreter or import its libraries at
    all, the read-only cases are skipped with that reason.
    """
    site = Path(tempfile.mkdtemp(prefix="dmlbench-site-"))
    atexit.register(shutil.rmtree, site, ignore_errors=True)
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name, sub in [("dmlbench", ""), ("dmlbench.methods", "methods"),
                      ("dmlbench.protocols", "protocols")]:  # fmt: skip
        source = Path(importlib.import_module(name).__file__ or "").parent
        shutil.copytree(source, site / "dmlbench" / sub, ignore=skip, dirs_exist_ok=True)
    for p in [site, *site.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    probe = subprocess.run(
        [*NOBODY, sys.executable, "-c", "import torch, dmlbench.cli.main"],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(site)},
    )  # fmt: skip
    if probe.returncode != 0:
        pytest.skip(f"user nobody cannot run this interpreter: {probe.stderr.strip()[-200:]}")
    return site


def dmlbench(
    *argv: str | Path, cache: Path, cwd: Path | None = None, as_nobody: bool = False
) -> subprocess.CompletedProcess[str]:
    """``dmlbench ARGV`` with its own cache folder: in this process (:mod:`tests.cli.runner`),
    or as ``nobody`` in a new one when asked (root ignores file permissions, so a read-only
    folder is only read-only to another user)."""
    env = {"DMLBENCH_CACHE": str(cache)}
    if not (as_nobody and os.geteuid() == 0):
        return run_cli(*argv, env=env, cwd=cwd)
    env = {**os.environ, **env, "PYTHONWARNINGS": "ignore", "HOME": str(cache),
           "PYTHONPATH": str(readable_package())}  # fmt: skip
    return subprocess.run(
        [*NOBODY, sys.executable, "-m", "dmlbench", *map(str, argv)],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=600,
    )


# Lines allowed next to the error, like the run banner: a search's progress, the notice that
# --backbone-override (the CUB fixture's small CNN) trains from random weights, and the one
# line per finished or reused run (progress off a terminal).
PROGRESS = ("searching ", "trial ", "warning: backbone ", "reusing ")
RUN_LINE = re.compile(r"^\S+ seed \d+: .*\(took .*ETA")


def lines_of(proc: subprocess.CompletedProcess[str]) -> list[str]:
    """Lines on stderr, the run banner and progress aside; never a traceback."""
    assert "Traceback" not in proc.stderr, proc.stderr
    return [
        ln
        for ln in proc.stderr.splitlines()
        if ln.strip()
        and not BANNER.match(ln)
        and not ln.startswith(PROGRESS)
        and not RUN_LINE.match(ln)
    ]


def one_error(proc: subprocess.CompletedProcess[str], *fragments: str | Path) -> str:
    """Exit status 2 and exactly one ``error:`` line on stderr containing every fragment."""
    lines = lines_of(proc)
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    for fragment in fragments:
        assert str(fragment) in lines[0], lines[0]
    return lines[0]


def warnings(proc: subprocess.CompletedProcess[str]) -> list[str]:
    """A successful run's stderr lines: only warnings (and progress lines of a search)."""
    assert proc.returncode == 0, proc.stderr
    lines = lines_of(proc)
    assert all(ln.startswith(("WARNING", "warning")) for ln in lines), proc.stderr
    return lines


def snapshot(folder: Path) -> dict[str, str]:
    """SHA-256 of every file under ``folder``: what must not be lost or changed."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.name.endswith(".lock")
    }


class Tiny:
    """The tiny glyphs protocol in a folder, with its results, reports and cache folders."""

    def __init__(self, folder: Path) -> None:
        self.dir = folder
        self.protocol = folder / "tiny.yaml"
        if not self.protocol.exists():
            self.protocol.write_text(TINY)
        self.results, self.reports, self.cache = (
            folder / n for n in ("results", "reports", "cache")
        )

    def run(self, *extra: str | Path, as_nobody: bool = False) -> subprocess.CompletedProcess[str]:
        return dmlbench(
            "run", "--protocol", self.protocol, "--results-dir", self.results,
            "--reports-dir", self.reports, "--no-search", *QUICK, *extra,
            cache=self.cache, as_nobody=as_nobody,
        )  # fmt: skip

    def records(self) -> list[Path]:
        return sorted(self.results.rglob("*.json"))


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder where the tiny protocol ran once: records, reports and the glyphs cache."""
    tiny = Tiny(tmp_path_factory.mktemp("finished"))
    proc = tiny.run()
    assert proc.returncode == 0, proc.stderr
    assert len(tiny.records()) == 3  # contrastive + the rows that need no learning
    return tiny.dir


@pytest.fixture
def tiny(finished: Path, tmp_path: Path) -> Tiny:
    """A private copy of :func:`finished`."""
    shutil.copytree(finished, tmp_path / "t")
    return Tiny(tmp_path / "t")


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A folder another user can enter (pytest's own tmp folders are private to root)."""
    folder = Path(tempfile.mkdtemp(prefix="dmlbench-hostile-"))
    folder.chmod(0o755)
    yield folder
    for p in [folder, *folder.rglob("*")]:
        if p.is_dir():
            p.chmod(0o755)
    shutil.rmtree(folder)


# --------------------------------------------------------------------------- 1: data caches


def test_1_a_truncated_glyphs_cache_is_regenerated_with_a_warning(tiny: Tiny) -> None:
    (cache_file,) = (tiny.cache / "glyphs").glob("*.npz")
    good = np.load(cache_file)["images"]
    cache_file.write_bytes(cache_file.read_bytes()[:5000])
    before = snapshot(tiny.results)
    proc = tiny.run("--force")
    (line,) = warnings(proc)
    assert str(cache_file) in line and "damaged" in line and "rebuilding" in line
    np.testing.assert_array_equal(np.load(cache_file)["images"], good)  # regenerated
    assert set(snapshot(tiny.results)) == set(before)
    assert warnings(tiny.run()) == []  # and read again without a word


@pytest.mark.parametrize("module", ["poses", "neighbours"])
def test_1_the_poses_and_neighbour_caches_use_the_same_recovery(
    module: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from dmlbench.data.dense import PoseDistance, neighbour_lists
    from dmlbench.data.poses import PosesParams, load_or_generate

    params = PosesParams(image_size=24, train_poses=2, test_poses=1, images_per_pose=2)
    labels = np.random.default_rng(0).normal(size=(30, 28)).astype(np.float32)

    def load() -> tuple[np.ndarray, ...]:
        if module == "poses":
            return load_or_generate(params, tmp_path)
        return neighbour_lists(labels, PoseDistance(), 4, tmp_path)

    first = load()
    (path,) = tmp_path.rglob("*.npz")
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    again = load()
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a, b)
    assert str(path) in caplog.text and "rebuilding" in caplog.text


# --------------------------------------------------------------------------- 2: records


def test_2_report_skips_records_that_are_json_but_not_objects(tiny: Tiny) -> None:
    folder = tiny.records()[0].parent
    bad = [folder / f"zz{i}-seed0-final.json" for i in range(4)]
    for path, content in zip(bad, ["[1, 2, 3]", "null", "42", '"text"'], strict=True):
        path.write_text(content)
    before = snapshot(tiny.results)
    proc = dmlbench(
        "report", "--results-dir", tiny.results, "--reports-dir", tiny.reports, cache=tiny.cache
    )
    lines = warnings(proc)
    assert [ln.split(": damaged record skipped")[0] for ln in lines] == [
        f"warning: {p}" for p in bad
    ]
    assert "contrastive" in proc.stdout  # the table of the other records
    assert snapshot(tiny.results) == before
    assert warnings(tiny.run()) == []  # `run` does not trip over them either


# --------------------------------------------------------------------------- 4: optuna.db


def test_4_a_damaged_optuna_db_is_one_line_naming_it(tiny: Tiny) -> None:
    tiny.results.mkdir(exist_ok=True)
    db = tiny.results / "optuna.db"
    db.write_bytes(np.random.default_rng(0).bytes(20_000))
    before = snapshot(tiny.results)
    proc = dmlbench(
        "run", "--protocol", tiny.protocol, "--results-dir", tiny.results,
        "--reports-dir", tiny.reports, "--trials", "1", *QUICK, cache=tiny.cache,
    )  # fmt: skip
    one_error(proc, db.resolve(), "damaged study database", "move it aside", "trial records")
    assert snapshot(tiny.results) == before


# --------------------------------------------------------------------------- 5: read-only


def test_5_finished_records_are_reused_and_reported_from_a_read_only_folder(
    finished: Path, shared_tmp: Path
) -> None:
    shutil.copytree(finished, shared_tmp / "t")
    tiny = Tiny(shared_tmp / "t")
    tiny.dir.chmod(0o755)
    tiny.protocol.chmod(0o644)
    shutil.rmtree(tiny.cache)  # the other user gets a cache of its own
    tiny.cache.mkdir()
    tiny.cache.chmod(0o777)
    tiny.reports.chmod(0o777)
    for p in tiny.reports.iterdir():
        p.chmod(0o666)
    for p in [tiny.results, *tiny.results.rglob("*")]:
        p.chmod(0o555 if p.is_dir() else 0o444)
    before = snapshot(tiny.results)

    assert warnings(tiny.run(as_nobody=True)) == []  # every record finished: reused
    assert snapshot(tiny.results) == before
    proc = dmlbench(
        "report", "--results-dir", tiny.results, "--reports-dir", tiny.reports,
        cache=tiny.cache, as_nobody=True,
    )  # fmt: skip
    assert warnings(proc) == [] and "contrastive" in proc.stdout

    proc = tiny.run("--seed", "1", as_nobody=True)  # seed 1 must be computed: one line
    one_error(proc, tiny.results, "cannot be written", "pixels-seed1")
    assert snapshot(tiny.results) == before


def test_25_a_results_dir_that_is_a_file_is_one_line_before_any_work(tiny: Tiny) -> None:
    target = tiny.dir / "results.txt"
    target.write_text("my notes\n")
    proc = tiny.run("--results-dir", target)
    one_error(proc, target, "must be a folder")
    assert target.read_text() == "my notes\n"


def test_25_a_reports_dir_that_is_a_file_is_one_line_before_any_work(tiny: Tiny) -> None:
    """It was found out after all training (FileExistsError, exit 1): seed 1 must train."""
    target = tiny.dir / "reports.txt"
    target.write_text("my notes\n")
    before = snapshot(tiny.results)
    proc = tiny.run("--seed", "1", "--reports-dir", target)
    one_error(proc, target, "--reports-dir must be a folder, and this is a file")
    assert target.read_text() == "my notes\n"
    assert snapshot(tiny.results) == before  # nothing trained, nothing written


def test_25_a_read_only_reports_dir_is_one_line_before_any_work(
    finished: Path, shared_tmp: Path
) -> None:
    shutil.copytree(finished, shared_tmp / "t")
    tiny = Tiny(shared_tmp / "t")
    for p in [tiny.dir, tiny.results, tiny.cache, *tiny.results.rglob("*"), *tiny.cache.rglob("*")]:
        p.chmod(0o777 if p.is_dir() else 0o666)  # the other user may train and cache
    tiny.protocol.chmod(0o644)
    for p in [tiny.reports, *tiny.reports.rglob("*")]:
        p.chmod(0o555 if p.is_dir() else 0o444)
    before, reports = snapshot(tiny.results), snapshot(tiny.reports)
    proc = tiny.run("--seed", "1", as_nobody=True)
    one_error(proc, tiny.reports, "(--reports-dir) cannot be written", "the tables are written")
    assert snapshot(tiny.results) == before and snapshot(tiny.reports) == reports


# --------------------------------------------------------------------------- 6, 25: schema


@pytest.mark.parametrize(
    ("line", "fragments"),
    [
        ("model: {backbone: small-cnn, pretrained: null, embedding_size: true}",
         ["model.embedding_size", "valid integer", "True"]),
        ("batch: {size: 16, samples_per_class: 2.5}",
         ["batch.samples_per_class", "valid integer", "2.5"]),
        ("optim: {lr: 1e400, epochs: 1}", ["optim.lr", "finite number", "1e400"]),
        ("optim: {lr: .inf, epochs: 1}", ["optim.lr", "finite number"]),
        ("optim: {lr: 1.0e-3, epochs: true}", ["optim.epochs", "valid integer"]),
        ("metrics: {recall_at: [1, true], nmi: false}", ["metrics.recall_at", "valid integer"]),
        ("metrics: {recall_at: [1, 2], nmi: 1}", ["metrics.nmi", "valid boolean"]),
    ],
)  # fmt: skip
def test_6_25_wrong_scalar_types_are_refused_by_validate_and_run(
    tiny: Tiny, line: str, fragments: list[str]
) -> None:
    key = line.split(":")[0]
    text = "\n".join(line if ln.startswith(f"{key}:") else ln for ln in TINY.splitlines())
    tiny.protocol.write_text(text + "\n")
    one_error(dmlbench("validate", tiny.protocol, cache=tiny.cache), tiny.protocol, *fragments)


def test_6_a_boolean_embedding_size_stops_run_before_any_work(tiny: Tiny) -> None:
    tiny.protocol.write_text(TINY.replace("embedding_size: 8", "embedding_size: true"))
    before = snapshot(tiny.results)
    one_error(tiny.run("--force"), tiny.protocol, "model.embedding_size", "valid integer")
    assert snapshot(tiny.results) == before


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        ("name: glyphs-other\n" + TINY, ["line 2", "duplicate key 'name'", "(first on line 1)"]),
        (TINY.replace("embedding_size: 8}", "embedding_size: 8, embedding_size: 16}"),
         ["line 4", "duplicate key 'embedding_size'"]),
    ],
    ids=["top-level", "nested"],
)  # fmt: skip
def test_6_a_key_given_twice_is_one_line_naming_file_key_and_line(
    tiny: Tiny, text: str, fragments: list[str]
) -> None:
    """PyYAML keeps the last of two keys silently: the protocol that ran was not the one read."""
    tiny.protocol.write_text(text)
    before = snapshot(tiny.results)
    one_error(dmlbench("validate", tiny.protocol, cache=tiny.cache), tiny.protocol, *fragments)
    one_error(tiny.run("--force"), tiny.protocol, *fragments)
    assert snapshot(tiny.results) == before


def test_25_a_non_utf8_protocol_is_one_line_naming_it(tiny: Tiny) -> None:
    tiny.protocol.write_bytes(TINY.replace("glyphs-tiny", "glyphs-tin\xe9").encode("latin-1"))
    one_error(dmlbench("validate", tiny.protocol, cache=tiny.cache), tiny.protocol, "UTF-8")
    one_error(tiny.run(), tiny.protocol, "line 1", "not UTF-8")


# --------------------------------------------------------------------------- 19: names, paths


@pytest.mark.parametrize("name", ["../../elsewhere", "/tmp/elsewhere"])
def test_19_a_protocol_name_cannot_write_outside_the_results_folder(tiny: Tiny, name: str) -> None:
    tiny.protocol.write_text(TINY.replace("name: glyphs-tiny", f"name: {json.dumps(name)}"))
    outside = {p for p in tiny.dir.parent.rglob("*")}
    proc = tiny.run("--force")
    one_error(proc, tiny.protocol, "name:", "must be a slug")
    assert {p for p in tiny.dir.parent.rglob("*")} == outside


@pytest.mark.parametrize("name", [".hidden", "a/b", "a b", "x" * 129, "élan\n"])
def test_19_names_that_are_not_slugs_fail_validate(tiny: Tiny, name: str) -> None:
    tiny.protocol.write_text(TINY.replace("name: glyphs-tiny", f"name: {json.dumps(name)}"))
    one_error(dmlbench("validate", tiny.protocol, cache=tiny.cache), "name:", "must be a slug")


def test_19_a_record_path_is_checked_to_stay_inside_its_folder(tmp_path: Path) -> None:
    from dmlbench.errors import DmlbenchError
    from dmlbench.records import record_path

    with pytest.raises(DmlbenchError, match="outside the results folder"):
        record_path(tmp_path / "results", "../../x", "0" * 64, "contrastive", 0)


@pytest.fixture
def cub(tmp_path: Path) -> Setup:
    return Setup(tmp_path)


def cub_run(s: Setup, *extra: str) -> subprocess.CompletedProcess[str]:
    return dmlbench(*s.argv(*extra), cache=s.tmp / "cache")


def test_19_an_index_entry_escaping_the_data_root_is_refused(cub: Setup) -> None:
    secret = cub.tmp / "secret.jpg"
    shutil.copy(cub.image(1), secret)
    index = cub.root / "images.txt"
    rows = index.read_text().splitlines()
    rows[0] = "1 ../../secret.jpg"
    index.write_text("\n".join(rows) + "\n")
    one_error(cub_run(cub), cub.root, "'images/../../secret.jpg'", "outside the data root")
    assert not (cub.tmp / "cache").exists() or not list((cub.tmp / "cache").rglob("*.npy"))


def test_19_a_link_inside_the_data_root_is_followed_wherever_it_points(cub: Setup) -> None:
    """Linking images from shared storage is how data sets are assembled: the root's owner
    placed the link, so it is followed (only index entries are checked to stay inside)."""
    image = cub.image(4)
    shared = cub.tmp / "shared-storage" / image.name
    shared.parent.mkdir()
    shutil.move(image, shared)
    image.symlink_to(shared)
    proc = cub_run(cub)
    assert cub_warnings(proc) == []
    assert len(list(cub.results.rglob("contrastive-seed0-final*.json"))) == 1
    assert image.is_symlink() and shared.is_file()  # nothing moved or copied over the link


def test_25_a_non_utf8_index_file_is_one_line_naming_it(cub: Setup) -> None:
    index = cub.root / "images.txt"
    data = index.read_bytes().splitlines(keepends=True)
    data[2] = data[2].replace(b".jpg", b"\xe9.jpg")
    index.write_bytes(b"".join(data))
    one_error(cub_run(cub), f"{index}:3", "not UTF-8")


# --------------------------------------------------------------------------- 21: image cache


def cub_warnings(proc: subprocess.CompletedProcess[str]) -> list[str]:
    """Warnings of a CUB fixture run, less the one every run of a 36-image fixture gets."""
    return [ln for ln in warnings(proc) if "differ from the official" not in ln]


def image_cache(s: Setup) -> list[Path]:
    return sorted(p for p in (s.tmp / "cache" / "images").iterdir() if not p.name.startswith("."))


def test_21_overwritten_pixels_and_a_damaged_index_are_rebuilt_with_a_warning(cub: Setup) -> None:
    assert cub_run(cub).returncode == 0
    first = {p.name: (p / "pixels.npy").read_bytes() for p in image_cache(cub)}
    records = snapshot(cub.results)
    for folder in image_cache(cub):
        with open(folder / "pixels.npy", "r+b") as fh:  # same size: only the checksum can tell
            fh.seek(200)
            fh.write(b"\xff" * 64)
    proc = cub_run(cub, "--force")
    lines = cub_warnings(proc)
    assert len(lines) == len(first)
    for line, folder in zip(lines, image_cache(cub), strict=True):
        assert str(folder) in line and "pixels.npy differs from its checksum" in line
    assert {p.name: (p / "pixels.npy").read_bytes() for p in image_cache(cub)} == first
    assert set(snapshot(cub.results)) == set(records)

    index = image_cache(cub)[0] / "index.npy"
    index.write_bytes(index.read_bytes()[:100])
    (line,) = cub_warnings(cub_run(cub))
    assert str(index.parent) in line and "index.npy" in line
    assert cub_warnings(cub_run(cub)) == []


def test_21_temp_folders_of_a_killed_cache_build_are_removed(cub: Setup) -> None:
    assert cub_run(cub).returncode == 0
    stale = cub.tmp / "cache" / "images" / ".abc-r36-v1.tmp-killed"
    stale.mkdir()
    (stale / "pixels.npy").write_bytes(b"\0" * 1000)
    (stale / ".building").touch()  # its lock died with the killed process
    os.utime(stale, (1e9, 1e9))  # long ago (a folder under a minute old may be starting)
    (line,) = cub_warnings(cub_run(cub))
    assert str(stale) in line and "interrupted" in line
    assert not stale.exists() and image_cache(cub)


# --------------------------------------------------------------------------- 22: SQLite URL


@pytest.mark.heavy  # two searches; the URL building itself is tested in-process below
def test_22_a_results_folder_with_url_characters_keeps_its_own_study(tiny: Tiny) -> None:
    # 8 training classes: a search fold keeps 6, enough for batches of 4 classes
    tiny.protocol.write_text(TINY.replace("num_classes: 8", "num_classes: 16"))
    for name in ("x?1", "x?2"):
        proc = dmlbench(
            "run", "--protocol", tiny.protocol, "--results-dir", tiny.dir / name,
            "--reports-dir", tiny.reports, "--trials", "1", *QUICK, cache=tiny.cache,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert (tiny.dir / name / "optuna.db").is_file()
    assert not (tiny.dir / "x").exists()


def test_22_percent_signs_in_the_folder_name_reach_the_same_file(tmp_path: Path) -> None:
    import optuna

    from dmlbench.options import SearchOptions
    from dmlbench.search.storage import open_storage, sqlite_path, storage_url

    folder = tmp_path / "a%20b c"
    url = storage_url(SearchOptions(), folder)
    assert sqlite_path(url) == str((folder / "optuna.db").resolve())
    optuna.create_study(storage=open_storage(url, SearchOptions()), study_name="s")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a%20b c"]


# --------------------------------------------------------------------------- 7, 13, 14: data


def test_7_data_root_for_a_generated_data_set_is_one_warning(tiny: Tiny) -> None:
    (line,) = warnings(tiny.run("--data-root", tiny.dir / "nowhere"))
    assert f"--data-root {tiny.dir / 'nowhere'} is ignored" in line and "glyphs" in line


def test_13_an_image_without_a_label_is_one_line_naming_it(cub: Setup) -> None:
    labels = cub.root / "image_class_labels.txt"
    labels.write_text(
        "".join(ln + "\n" for ln in labels.read_text().splitlines() if ln[:2] != "2 ")
    )
    name = dict(ln.split() for ln in (cub.root / "images.txt").read_text().splitlines())["2"]
    one_error(cub_run(cub), cub.root / "images.txt", f"image 2 ({name}) has no class", labels)


def test_14_k_larger_than_the_gallery_fails_before_the_image_cache_is_built(cub: Setup) -> None:
    cub.protocol.write_text(
        fixture_protocol(cub.root, metrics="metrics: {recall_at: [1, 64], nmi: false}")
    )
    one_error(cub_run(cub), "metrics.recall_at", "K=64", "gallery (8 items)")
    assert not list((cub.tmp / "cache").rglob("*.npy"))


# --------------------------------------------------------------------------- 8, 11, 12: prepare


def prepare_cli(root: Path, *extra: str | Path) -> subprocess.CompletedProcess[str]:
    return dmlbench("data", "prepare", "cub200", "--root", root, *extra, cache=root.parent / "c")


def test_11_prepare_into_a_root_that_is_a_file_is_one_line(tmp_path: Path) -> None:
    root = tmp_path / "CUB_200_2011"
    root.write_text("my notes\n")
    one_error(prepare_cli(root), root, "--root must be a folder, and this is a file")
    assert root.read_text() == "my notes\n"


def test_11_prepare_into_a_read_only_root_is_one_line_before_decoding(shared_tmp: Path) -> None:
    """The files are in place but the manifest cannot be written: said before every image is
    decoded (or anything downloaded), not after."""
    cub = Setup(shared_tmp)
    (shared_tmp / "c").mkdir(mode=0o777)
    (shared_tmp / "c").chmod(0o777)
    for p in [cub.root, *cub.root.rglob("*")]:
        p.chmod(0o555 if p.is_dir() else 0o444)
    before = snapshot(cub.root)
    proc = dmlbench(
        "data", "prepare", "cub200", "--root", cub.root, cache=shared_tmp / "c", as_nobody=True
    )
    one_error(proc, cub.root, "(--root) cannot be written", "manifest")
    assert snapshot(cub.root) == before


def test_8_a_refused_archive_is_not_left_in_the_root(tmp_path: Path) -> None:
    import tarfile

    evil = tmp_path / "CUB_200_2011.tgz"
    payload = tmp_path / "payload.txt"
    payload.write_text("x")
    with tarfile.open(evil, "w:gz") as tf:
        tf.add(payload, arcname="CUB_200_2011/../../escape.txt")
    digest = hashlib.sha256(evil.read_bytes()).hexdigest()
    root = tmp_path / "data" / "CUB_200_2011"
    proc = prepare_cli(root, "--url", evil.as_uri(), "--sha256", digest)
    one_error(proc, "escapes the root", "refusing to extract")
    assert list(root.iterdir()) == [] and not (tmp_path / "escape.txt").exists()
    assert evil.is_file()  # the user's own copy is untouched


def test_11_prepare_never_downloads_over_a_folder_with_a_problem(cub: Setup) -> None:
    missing = cub.image(4)
    missing.unlink()
    before = snapshot(cub.root)
    proc = prepare_cli(cub.root, "--url", (cub.tmp / "nothing-here.tgz").as_uri(), "--sha256", "0")
    one_error(proc, missing, "image file is missing", "nothing was downloaded", "--force")
    assert snapshot(cub.root) == before


def test_12_prepare_decodes_every_image_and_names_each_bad_one(cub: Setup) -> None:
    truncated, text = cub.image(4), cub.image(7)
    truncated.write_bytes(truncated.read_bytes()[:300])
    text.write_text("<html>404</html>\n")
    before = snapshot(cub.root)
    line = one_error(prepare_cli(cub.root), "2 of 18 images do not decode", truncated, text)
    assert "dmlbench-manifest.json" not in line
    assert snapshot(cub.root) == before  # no manifest written
    truncated.write_bytes(b"")  # ... and a good folder still passes (control)
    shutil.copy(cub.image(1), truncated)
    shutil.copy(cub.image(1), text)
    proc = prepare_cli(cub.root)
    assert proc.returncode == 0 and "written:" in proc.stdout, proc.stderr


# --------------------------------------------------------------------------- 25: disk full

FULL_DISK = """\
set -e
mount -t tmpfs -o size=16m tmpfs "$D"
cp -r "$SRC/." "$D/"
head -c 17000000 /dev/zero > "$D/filler" 2>/dev/null || true
set +e
"$@"
rc=$?
cd "$D/results" && find . -name '*.json' -exec sha256sum {} + | sort
exit $rc
"""


def test_25_a_full_disk_is_one_line_saying_so(tiny: Tiny, tmp_path: Path) -> None:
    """The results folder on a full 16 MB tmpfs (in a private mount namespace; the finished
    runs' kept weights and embeddings are copied in first, then a filler takes the rest)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root to mount a small tmpfs in a private namespace")
    mount = tmp_path / "full"
    mount.mkdir()
    before = sorted(
        f"{hashlib.sha256(p.read_bytes()).hexdigest()}  ./{p.relative_to(tiny.results)}"
        for p in tiny.records()
    )
    argv = [
        sys.executable, "-m", "dmlbench", "run", "--protocol", str(tiny.protocol),
        "--results-dir", str(mount / "results"), "--reports-dir", str(tiny.reports),
        "--no-search", *QUICK, "--seed", "1",
    ]  # fmt: skip
    env = {**os.environ, "D": str(mount), "SRC": str(tiny.dir), "DMLBENCH_CACHE": str(tiny.cache)}
    proc = subprocess.run(
        ["unshare", "-m", "sh", "-c", FULL_DISK, "sh", *argv],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    if "mount:" in proc.stderr:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    one_error(proc, mount / "results", "pixels-seed1", "No space left on device")
    assert proc.stdout.splitlines() == before  # the finished records are intact


def test_a_search_trial_record_given_to_embed_says_trials_keep_nothing(tiny: Tiny) -> None:
    """It suggested `dmlbench run --force`, which never makes a trial keep weights."""
    (final,) = tiny.results.rglob("contrastive-seed0-final*.json")
    data = json.loads(final.read_text())
    data.update(stage="search-trial", trial=3, artifacts={})  # as a search trial writes it
    trial = final.with_name("contrastive-trial0003-search-trial.json")
    trial.write_text(json.dumps(data))
    out = tiny.dir / "x.npz"
    proc = dmlbench("embed", "--record", trial, "--images", "test", "--out", out, cache=tiny.cache)
    line = one_error(proc, trial, "search trials never keep weights", "seed<N>-final.json")
    assert "--force" not in line and not out.exists()


def test_14_the_cache_can_be_listed_and_cleaned(tiny: Tiny) -> None:
    (npz,) = (tiny.cache / "glyphs").glob("*.npz")
    listing = dmlbench("cache", "list", cache=tiny.cache)
    assert (
        listing.returncode == 0
        and str(npz) in listing.stdout
        and "total in 1 entries" in (listing.stdout)
    )
    one_error(dmlbench("cache", "clean", cache=tiny.cache), "--older-than DAYS or --all")
    assert dmlbench("cache", "clean", "--older-than", "1", cache=tiny.cache).returncode == 0
    assert npz.is_file()  # just used: kept
    proc = dmlbench("cache", "clean", "--all", cache=tiny.cache)
    assert proc.returncode == 0 and f"removed {npz}" in proc.stdout and not npz.exists()
    assert warnings(tiny.run()) == [] and npz.is_file()  # rebuilt when next needed


# --------------------------------------------------------------------------- 17: input size


@pytest.mark.parametrize(
    "size", [56, pytest.param(112, marks=pytest.mark.heavy)]
)  # one size in the default run
def test_17_bn_inception_at_a_size_it_cannot_take_fails_validate(cub: Setup, size: int) -> None:
    images = (
        f"images: {{train: {{resize: 128, random_crop: {size}}}, "
        f"test: {{resize: 128, center_crop: {size}}}}}"
    )
    cub.protocol.write_text(fixture_protocol(cub.root, images=images))
    proc = dmlbench("validate", cub.protocol, cache=cub.tmp / "cache")
    one_error(proc, cub.protocol, "images.train", f"bn-inception cannot take {size} px")


# --------------------------------------------------------------------------- 18: timm offline


def test_18_timm_weights_offline_are_one_line_naming_what_to_fetch(
    tiny: Tiny, monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket

    try:
        socket.create_connection(("huggingface.co", 443), timeout=5).close()
        pytest.skip("huggingface.co is reachable from here: not offline")
    except OSError:
        pass
    tiny.protocol.write_text(
        TINY.replace("backbone: small-cnn, pretrained: null", "backbone: 'timm:resnet18', "
                     "pretrained: imagenet")
    )  # fmt: skip
    monkeypatch.setenv("HF_HOME", str(tiny.dir / "hf"))  # an empty Hugging Face cache
    proc = tiny.run("--force")
    one_error(proc, "timm:resnet18", "https://huggingface.co/timm/resnet18", "model.safetensors")
    assert "Retrying" not in proc.stderr
