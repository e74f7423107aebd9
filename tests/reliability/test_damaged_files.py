"""Damaged files, property-based (issue #16): every file dmlbench reads, truncated or flipped.

For each kind of file — protocol YAML, record JSON, the generated data caches (glyphs, poses),
the image cache, the dense-neighbour cache, checkpoints, ``optuna.db`` and published YAML —
hypothesis damages a valid file at random (a truncation, or one to eight byte flips) and calls
the loader in-process (a subprocess per example would take an hour). The outcome must be the
documented one: caches come back with exactly the original content (rebuilt, with a warning),
records are skipped with a one-line warning naming the file, and everything else either loads
or raises one :class:`DmlbenchError` line — never another exception, never a traceback.

Each kind runs at least :data:`EXAMPLES` examples; the counts are printed at the end (``-s``).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dmlbench.errors import DmlbenchError

pytestmark = [pytest.mark.slow, pytest.mark.heavy]  # about a minute and a half on 2 busy cores
EXAMPLES = 200
PER_KIND = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,  # the same damages on every run: a failure is reproducible
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
COUNTS: Counter[str] = Counter()
REPO = Path(__file__).resolve().parents[2]

flips = st.lists(
    st.tuples(st.floats(0.0, 1.0, exclude_max=True), st.integers(1, 255)), min_size=1, max_size=8
)
damages = st.one_of(
    st.tuples(st.just("truncate"), st.floats(0.0, 1.0, exclude_max=True)),
    st.tuples(st.just("flip"), flips),
)


def damage(data: bytes, how: tuple[str, Any]) -> bytes:
    """``data`` truncated at a fraction of its length, or with bytes XOR-ed at fractions."""
    kind, arg = how
    if kind == "truncate":
        return data[: int(arg * len(data))]
    out = bytearray(data)
    for where, xor in arg:
        out[int(where * len(out))] ^= xor
    return bytes(out)


def one_line(err: DmlbenchError, name: str | Path) -> None:
    text = str(err)
    assert "\n" not in text and text.strip(), repr(text)
    assert str(name) in text, text


@pytest.fixture(scope="module", autouse=True)
def print_counts() -> Iterator[None]:
    yield
    for kind, n in sorted(COUNTS.items()):
        print(f"damaged {kind}: {n} examples")


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("damaged")


def run_examples(kind: str, original: Path, check: Callable[[], None]) -> None:
    """Damage ``original`` in place per example (restored afterwards) and run ``check``."""
    good = original.read_bytes()

    @PER_KIND
    @given(damages)
    def examples(how: tuple[str, Any]) -> None:
        COUNTS[kind] += 1
        original.write_bytes(damage(good, how))
        try:
            check()
        finally:
            original.write_bytes(good)

    examples()
    assert COUNTS[kind] >= EXAMPLES


# --------------------------------------------------------------------------- protocol YAML


def test_damaged_protocol_yaml(work: Path) -> None:
    from dmlbench.protocol import load_protocol

    path = work / "protocol.yaml"
    path.write_bytes((REPO / "protocols" / "glyphs-mini.yaml").read_bytes())

    def check() -> None:
        try:
            load_protocol(path)
        except DmlbenchError as err:
            one_line(err, path)

    run_examples("protocol YAML", path, check)


# --------------------------------------------------------------------------- records


def test_damaged_record_json(work: Path) -> None:
    from dmlbench.records import ProtocolRef, Record, Timings, load_records, save_record

    folder = work / "results"
    record = Record(
        protocol=ProtocolRef(name="glyphs-mini", version=1, hash="0" * 64),
        data_fingerprint="f" * 64,
        method="contrastive",
        seed=0,
        metrics={"recall@1": 0.5, "nmi": 0.25},
        curve=[{"epoch": 1.0, "loss": 0.7}],
        timings=Timings(wall_seconds=1.0),
    )
    path = save_record(record, folder / "glyphs-mini" / "000000000000" / record.filename())

    def check() -> None:
        records, problems = load_records(folder)
        assert len(records) + len(problems) == 1
        for p in problems:
            assert "\n" not in p and p.startswith(f"{path}: damaged record skipped"), p

    run_examples("record JSON", path, check)


# --------------------------------------------------------------------------- data caches


def cache_file(folder: Path) -> Path:
    (path,) = folder.rglob("*.npz")
    return path


def test_damaged_glyphs_cache(work: Path) -> None:
    from dmlbench.data.glyphs import GlyphsParams, load_or_generate

    params = GlyphsParams(image_size=16, num_classes=4)
    want = load_or_generate(params, work / "glyphs")

    def check() -> None:
        images, labels, classes = load_or_generate(params, work / "glyphs")
        np.testing.assert_array_equal(images, want[0])
        np.testing.assert_array_equal(labels, want[1])
        assert classes == want[2]

    run_examples("glyphs cache", cache_file(work / "glyphs"), check)


def test_damaged_poses_cache(work: Path) -> None:
    from dmlbench.data.poses import PosesParams, load_or_generate

    params = PosesParams(image_size=24, train_poses=2, test_poses=1, images_per_pose=2)
    want = load_or_generate(params, work / "poses")

    def check() -> None:
        for got, expected in zip(load_or_generate(params, work / "poses"), want, strict=True):
            np.testing.assert_array_equal(got, expected)

    run_examples("poses cache", cache_file(work / "poses"), check)


def test_damaged_neighbour_cache(work: Path) -> None:
    from dmlbench.data.dense import PoseDistance, neighbour_lists

    labels = np.random.default_rng(0).normal(size=(40, 28)).astype(np.float32)
    want = neighbour_lists(labels, PoseDistance(), 5, work / "nn")

    def check() -> None:
        for got, expected in zip(
            neighbour_lists(labels, PoseDistance(), 5, work / "nn"), want, strict=True
        ):
            np.testing.assert_array_equal(got, expected)

    run_examples("neighbour cache", cache_file(work / "nn"), check)


@pytest.mark.parametrize("name", ["pixels.npy", "index.npy", "meta.json"])
def test_damaged_image_cache(work: Path, name: str) -> None:
    from dmlbench.data.cache import open_or_build
    from tests.data.fixtures import make_cub

    root = make_cub(work / f"cub-{name}", train=2, test=2, per_class=2)
    files = sorted((root / "images").rglob("*.jpg"))
    cache_root = work / f"cache-{name}"
    want = open_or_build(cache_root, "f" * 64, files, 24)
    images = [want.get(i) for i in range(len(files))]

    def check() -> None:
        cache = open_or_build(cache_root, "f" * 64, files, 24)
        for i, image in enumerate(images):
            assert torch.equal(cache.get(i), image)

    logging.getLogger("dmlbench").setLevel(logging.ERROR)  # one warning per example
    try:
        run_examples(f"image cache {name}", want.path / name, check)
    finally:
        logging.getLogger("dmlbench").setLevel(logging.NOTSET)


# --------------------------------------------------------------------------- checkpoints


def test_damaged_checkpoint(work: Path) -> None:
    from dmlbench.engine.checkpoint import Progress, load_checkpoint, save_checkpoint

    def parts() -> tuple[torch.nn.Module, torch.nn.Module, torch.optim.Optimizer]:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.BatchNorm1d(4))
        loss = torch.nn.Linear(4, 3)  # a loss with its own parameters (proxies)
        return model, loss, torch.optim.Adam([*model.parameters(), *loss.parameters()])

    path = work / "run.pt"
    save_checkpoint(path, Progress(epoch=2, steps=10, curve=[{"loss": 0.5}]), *parts(), None)

    def check() -> None:
        try:
            load_checkpoint(path, *parts(), None)
        except DmlbenchError as err:
            one_line(err, path)

    run_examples("checkpoint", path, check)


# --------------------------------------------------------------------------- optuna.db


def test_damaged_optuna_db(work: Path) -> None:
    import optuna

    from dmlbench.options import SearchOptions
    from dmlbench.search.storage import open_storage, storage_errors, storage_url

    folder = work / "search"
    options = SearchOptions()
    storage = open_storage(storage_url(options, folder), options)
    study = optuna.create_study(storage=storage, study_name="glyphs-mini-0-contrastive")
    study.optimize(lambda t: t.suggest_float("margin", 0.0, 1.0), n_trials=3)
    storage.engine.dispose()
    path = folder / "optuna.db"
    for extra in folder.glob("optuna.db-*"):  # checkpoint the WAL into the file
        extra.unlink()

    def check() -> None:  # what `tune` does: open the storage, then read the study
        try:
            url = storage_url(options, folder)
            with storage_errors(url):
                s = open_storage(url, options)
                try:
                    for summary in optuna.get_all_study_summaries(s):  # none: an empty file
                        study = optuna.load_study(study_name=summary.study_name, storage=s)
                        assert len(study.trials) <= 3
                finally:
                    s.engine.dispose()
        except DmlbenchError as err:
            one_line(err, path)
        finally:
            for extra in folder.glob("optuna.db-*"):
                extra.unlink()

    run_examples("optuna.db", path, check)


# --------------------------------------------------------------------------- published YAML


def test_damaged_published_yaml(work: Path) -> None:
    from dmlbench.report.published import load_published_file

    (source,) = sorted((REPO / "results" / "published").glob("*.yaml"))[:1]
    path = work / "published.yaml"
    path.write_bytes(source.read_bytes())

    def check() -> None:
        try:
            load_published_file(path)
        except DmlbenchError as err:
            one_line(err, path)

    run_examples("published YAML", path, check)
