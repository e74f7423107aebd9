"""Hostile user, round three (issue 50): outside embeddings and hand-edited records must never
produce a wrong number.

Each defect of the issue runs the exact command (in this process, :mod:`tests.cli.runner`) and
checks the correct number, or exit status 2 with one ``error:`` line naming the file and the
field; a hand-edited record is skipped by ``dmlbench report`` with a warning naming the file
and the field, as a NaN metric already was. The data are a 40-class glyphs-mini (320 test
images) trained for 3 steps and kept.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from dmlbench.metrics.retrieval import embedding_metrics as retrieval
from dmlbench.metrics.retrieval import l2_normalize
from dmlbench.protocol import MetricsSpec, load_protocol
from dmlbench.records import QueryHits, load_record
from tests.cli.runner import run_cli

TINY = {"data.params.num_classes": 40, "optim.epochs": 1, "batch.size": 40, "search.trials": 0}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A kept 3-step contrastive run of a 40-class glyphs-mini, its test split re-embedded."""
    folder = tmp_path_factory.mktemp("hostile3")
    tiny = load_protocol("glyphs-mini").with_overrides(TINY, name="glyphs-tiny")
    (folder / "tiny.yaml").write_text(yaml.safe_dump(tiny.model_dump(mode="json")))
    proc = run_cli(
        "run", "--protocol", folder / "tiny.yaml", "--method", "contrastive", "--seed", "0",
        "--max-steps", "3", "--no-progress", "--results-dir", folder / "results",
        "--reports-dir", folder / "reports",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (record,) = (folder / "results").rglob("contrastive-seed0-final-override-*.json")
    proc = run_cli("embed", "--record", record, "--images", "test", "--out", folder / "c.npz")
    assert proc.returncode == 0, proc.stderr
    return folder


def run_record(folder: Path) -> Path:
    (record,) = (folder / "results").rglob("contrastive-seed0-final-override-*.json")
    return record


def changed(folder: Path, tmp_path: Path, **change: object) -> Path:
    """``c.npz`` with arrays replaced (``None``: removed), as a user would edit it."""
    with np.load(folder / "c.npz") as npz:
        arrays = {k: npz[k] for k in npz.files}
    arrays.update(change)
    out = tmp_path / "changed.npz"
    np.savez(out, **{k: v for k, v in arrays.items() if v is not None})
    return out


def evaluate_cli(folder: Path, npz: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return run_cli(
        "evaluate", "--protocol", folder / "tiny.yaml", "--embeddings", npz,
        "--results-dir", folder / "ext", *extra,
    )  # fmt: skip


def one_error(proc: subprocess.CompletedProcess[str], *fragments: str) -> str:
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: "), lines
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def external_metrics(folder: Path, name: str, seed: int = 0) -> dict[str, float]:
    (path,) = (folder / "ext").rglob(f"{name}-seed{seed}-external.json")
    return load_record(path).metrics


# ----------------------------------------------------------------- 1, 2: scale of embeddings


def uneven(folder: Path) -> np.ndarray:
    """The test embeddings, each row times its own power of two (2**-3 … 2**3): norms unequal,
    as a model without a normalising head writes them, yet normalised to the very same bits
    (a power of two is exact), so every metric must be the file's."""
    with np.load(folder / "c.npz") as npz:
        emb = npz["embeddings"]
    factors = np.random.default_rng(0).integers(-3, 4, size=(len(emb), 1))
    return np.ldexp(emb, factors.astype(np.int32))


@pytest.mark.parametrize(("name", "exponent"), [("huge", 70), ("tiny", -90)])
def test_embeddings_scaled_by_a_power_of_two_score_the_same_bits(
    folder: Path, tmp_path: Path, name: str, exponent: int
) -> None:
    """× 2**70 once overflowed float32's squares (Recall@1 0.005, NMI 0), × 2**-90 underflowed
    (rows divided by the 1e-12 floor kept their unequal norms): under normalize: true a scale
    changes no score, and an exact power of two changes no bit."""
    assert evaluate_cli(folder, folder / "c.npz", "--model-name", "plain").returncode == 0
    scaled = changed(folder, tmp_path, embeddings=np.ldexp(uneven(folder), exponent))
    proc = evaluate_cli(folder, scaled, "--model-name", name)
    assert proc.returncode == 0, proc.stderr
    assert external_metrics(folder, name) == external_metrics(folder, "plain")


@pytest.mark.parametrize("scale", [1e20, 1e-25, 2.0**-135])
def test_embeddings_times_a_decimal_scale_score_as_the_originals(
    folder: Path, tmp_path: Path, scale: float
) -> None:
    """× 1e20 and × 1e-25 round each value once in float32 (a last-bit change), × 2**-135 to
    float32's denormals (fewer bits), so NMI may move by k-means noise; the ranking metrics
    are those of the originals within a query, NMI within 0.01 (it was 0.0 at × 1e20)."""
    assert evaluate_cli(folder, folder / "c.npz", "--model-name", "plain").returncode == 0
    name = f"scaled-{scale:g}"
    emb = uneven(folder) * np.float32(scale)
    proc = evaluate_cli(folder, changed(folder, tmp_path, embeddings=emb), "--model-name", name)
    assert proc.returncode == 0, proc.stderr
    got, want = external_metrics(folder, name), external_metrics(folder, "plain")
    for metric in ("recall@1", "recall@2", "map@r", "r_precision"):
        assert got[metric] == pytest.approx(want[metric], abs=1.5 / 320), metric
    assert got["nmi"] == pytest.approx(want["nmi"], abs=0.01)


def frozen_l2_normalize(x: np.ndarray) -> np.ndarray:
    """``l2_normalize`` before issue 50, verbatim: the arithmetic every committed number used."""
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.maximum(norms, 1e-12)


@pytest.mark.parametrize("log_scale", [-9, -4, -1, 0, 1, 3, 8, 14])
def test_ordinary_embeddings_normalise_to_the_same_bits_as_before(log_scale: int) -> None:
    """Rows inside the safe range go through today's float32 arithmetic untouched, so no
    committed number moves (``dmlbench check`` replays them bit for bit)."""
    rng = np.random.default_rng(log_scale + 50)
    x = (rng.normal(size=(300, 64)) * 10.0**log_scale).astype(np.float32)
    x[::7] *= np.float32(rng.uniform(0.01, 100))  # rows of other sizes in the same matrix
    x[5] = 0.0  # an all-zero row stays zero
    assert np.array_equal(l2_normalize(x), frozen_l2_normalize(x))
    labels = rng.integers(0, 30, len(x))
    spec = MetricsSpec(recall_at=[1, 2, 4], nmi=True)
    before = retrieval(frozen_l2_normalize(x), labels, spec.model_copy(update={"normalize": False}))
    assert retrieval(x, labels, spec) == before  # == on floats: every bit


def test_unnormalised_embeddings_out_of_range_are_scaled_as_a_whole() -> None:
    """normalize: false: squared distances of × 2**70 overflowed float32; a common power of
    two changes no ranking, so the metrics are those of the unscaled embeddings."""
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(12, 16))
    labels = np.repeat(np.arange(12), 9)
    x = (centres[labels] + 0.5 * rng.normal(size=(len(labels), 16))).astype(np.float32)
    spec = MetricsSpec(recall_at=[1, 2], nmi=True, normalize=False)
    want = retrieval(x, labels, spec)
    assert retrieval(np.ldexp(x, 70), labels, spec) == want
    assert retrieval(np.ldexp(x, -60), labels, spec) == want


# --------------------------------------------------------- 5, 6, 7: the file's own arrays


@pytest.mark.parametrize(
    "seed",
    [np.asarray(-5), np.asarray("abc"), np.asarray(np.nan), np.asarray(2**40),
     np.asarray(1.7), np.asarray([0, 1]), np.asarray(True)],
)  # fmt: skip
def test_the_files_seed_is_range_checked_like_the_flag(
    folder: Path, tmp_path: Path, seed: np.ndarray
) -> None:
    proc = evaluate_cli(folder, changed(folder, tmp_path, seed=seed), "--model-name", "s")
    one_error(proc, "changed.npz", "array 'seed'", "[0, 2147483647]")


def test_a_valid_seed_array_is_used(folder: Path, tmp_path: Path) -> None:
    proc = evaluate_cli(folder, changed(folder, tmp_path, seed=np.asarray(7)), "--model-name", "s7")
    assert proc.returncode == 0, proc.stderr
    assert external_metrics(folder, "s7", seed=7)


def test_float64_beyond_float32s_range_is_one_line(folder: Path, tmp_path: Path) -> None:
    """Finite in the file, infinite once cast: faiss failed with a RuntimeError traceback."""
    with np.load(folder / "c.npz") as npz:
        emb = npz["embeddings"].astype(np.float64) * 1e300
    proc = evaluate_cli(folder, changed(folder, tmp_path, embeddings=emb), "--model-name", "f")
    one_error(proc, "changed.npz", "row 0 of embeddings is beyond float32's range")


@pytest.mark.parametrize(
    ("index", "fragment"),
    [(np.arange(320).astype(str), "not <U21 of shape (320,)"),
     (np.arange(320)[:, None], "not int64 of shape (320, 1)"),
     (np.arange(320).astype(np.float64), "not float64 of shape (320,)")],
)  # fmt: skip
def test_an_index_of_another_dtype_or_shape_is_named(
    folder: Path, tmp_path: Path, index: np.ndarray, fragment: str
) -> None:
    proc = evaluate_cli(folder, changed(folder, tmp_path, index=index), "--model-name", "i")
    one_error(proc, "changed.npz", "index must be integers of shape (N,)", fragment)


# ------------------------------------------------------------- 8: a kept run's own file


def test_a_kept_runs_own_embeddings_file_is_evaluated_as_it_is(folder: Path) -> None:
    record = load_record(run_record(folder))
    kept = run_record(folder).parent / record.artifacts["embeddings"].path
    proc = evaluate_cli(folder, kept)  # its model_name, trained_by, trained_on and seed
    assert proc.returncode == 0, proc.stderr
    (ext,) = (folder / "ext").rglob("contrastive-seed0-external.json")
    scored = load_record(ext)
    assert scored.metrics == record.metrics and scored.query_hits == record.query_hits
    assert scored.external is not None and scored.external.trained_by == "dmlbench"


# ------------------------------------------------------------- 3: hand-edited records


@pytest.mark.parametrize(
    ("edit", "fragment"),
    [({"schema_version": 99}, "schema_version 99"),
     ({"metrics.recall@1": 1.70}, "metric recall@1 is 1.7: a fraction"),
     ({"metrics.map@r": -3.0}, "metric map@r is -3.0: a fraction"),
     ({"metrics.nmi": 1.5}, "metric nmi is 1.5"),
     ({"metrics.ci_recall@1_hi": 2.0}, "metric ci_recall@1_hi is 2.0"),
     ({"metrics.queries": -1.0}, "metric queries is -1.0"),
     ({"metrics.queries": 12.5}, "must be whole"),
     ({"metrics.recall@1": 0.9}, "query_hits give recall@1"),
     ({"query_hits.n": 1000000}, "query_hits.n is 1000000, but 320 bits"),
     ({"query_hits.n": 100}, "query_hits.n is 100"),
     ({"query_hits.hits": "!!notbase64"}, "query_hits: not base64"),
     ({"seed": -5}, "seed -5: must be in")],
)  # fmt: skip
def test_report_refuses_a_hand_edited_record_naming_file_and_field(
    folder: Path, tmp_path: Path, edit: dict[str, object], fragment: str
) -> None:
    results = tmp_path / "results"
    source = run_record(folder)
    target = results / source.relative_to(folder / "results")
    target.parent.mkdir(parents=True)
    data = json.loads(source.read_text())
    for key, value in edit.items():
        *path, last = key.split(".", 1) if key.startswith(("metrics", "query_hits")) else [key]
        (data[path[0]] if path else data)[last] = value
    target.write_text(json.dumps(data))
    good = target.with_name(target.name.replace("contrastive", "untrained"))
    good.write_text(source.with_name(good.name).read_text())
    proc = run_cli("report", "--results-dir", results, "--reports-dir", tmp_path / "reports")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    (warning,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("warning")]
    assert str(target) in warning and "damaged record skipped" in warning and fragment in warning
    table = proc.stdout
    assert "| untrained" in table and "| contrastive" not in table
    assert "170.0" not in table and "-300.0" not in table


def test_decode_refuses_hits_of_another_length() -> None:
    hits = QueryHits.encode(np.array([1, 0, 1]), np.array([4, 4, 5]))
    assert hits.decode()[0].tolist() == [1.0, 0.0, 1.0]
    with pytest.raises(ValueError, match=r"query_hits\.n is 1000000, but 8 bits"):
        hits.model_copy(update={"n": 1000000}).decode()


def test_committed_records_pass_the_new_checks() -> None:
    """The checks refuse hand edits only: every record of the committed results reads."""
    from dmlbench.records import load_records

    root = Path(__file__).resolve().parents[2] / "results"
    records, problems = load_records(root)
    assert problems == [] and len(records) > 100


# --------------------------------------------------------- 4: a fake row from free text


FAKE = "x | 99.9 | 99.9 |\n| fake | 100"


def test_trained_by_with_a_line_break_is_refused(folder: Path) -> None:
    proc = evaluate_cli(folder, folder / "c.npz", "--model-name", "m", "--trained-by", FAKE)
    one_error(proc, "external model m: trained_by", "control character U+000A")


def test_the_files_trained_by_with_a_line_break_is_refused(folder: Path, tmp_path: Path) -> None:
    npz = changed(folder, tmp_path, trained_by=np.asarray(FAKE))
    one_error(evaluate_cli(folder, npz, "--model-name", "m"), "trained_by", "U+000A")


def test_a_pipe_in_free_text_stays_in_its_cell(folder: Path, tmp_path: Path) -> None:
    """``|`` is escaped in every Markdown cell, ``<`` ``>`` ``&`` become entities: no extra
    column, no fabricated row, no HTML."""
    results = tmp_path / "results"
    proc = run_cli(
        "evaluate", "--protocol", folder / "tiny.yaml", "--embeddings", folder / "c.npz",
        "--results-dir", results, "--model-name", "pipe",
        "--trained-by", "x | 99.9 | 99.9 | <b>fake</b>",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (run,) = (folder / "results").rglob("contrastive-seed0-final-override-*.json")
    (results / run.relative_to(folder / "results")).write_text(run.read_text())
    assert (
        run_cli("report", "--results-dir", results, "--reports-dir", tmp_path / "r").returncode == 0
    )
    (md,) = (tmp_path / "r").glob("*-external.md")
    rows = [ln for ln in md.read_text().splitlines() if ln.startswith("|")]
    assert len(rows) == 3  # header, rule, the one model
    cells = {len(ln.replace("\\|", "").split("|")) for ln in rows}
    assert len(cells) == 1  # every row has as many cells as the header
    assert "x \\| 99.9 \\| 99.9 \\| &lt;b&gt;fake&lt;/b&gt;" in rows[2]


def test_a_hand_edited_external_record_with_a_line_break_is_skipped(
    folder: Path, tmp_path: Path
) -> None:
    results = tmp_path / "results"
    proc = run_cli(
        "evaluate", "--protocol", folder / "tiny.yaml", "--embeddings", folder / "c.npz",
        "--results-dir", results, "--model-name", "edited",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (path,) = results.rglob("edited-seed0-external.json")
    data = json.loads(path.read_text())
    data["external"]["trained_on"] = FAKE
    path.write_text(json.dumps(data))
    proc = run_cli("report", "--results-dir", results, "--reports-dir", tmp_path / "r")
    assert str(path) in proc.stderr and "U+000A" in proc.stderr
    assert "fake" not in proc.stdout


# ------------------------------------------------- own pass: evaluate, images, plugins, track


def test_float64_wholly_below_float32s_range_is_one_line(folder: Path, tmp_path: Path) -> None:
    """× 1e-300 became all-zero rows in float32 and was scored (at chance) without a word."""
    with np.load(folder / "c.npz") as npz:
        emb = npz["embeddings"].astype(np.float64) * 1e-300
    proc = evaluate_cli(folder, changed(folder, tmp_path, embeddings=emb), "--model-name", "t")
    one_error(proc, "changed.npz", "row 0 of embeddings is below float32's range")


def test_embeddings_of_another_dtype_are_named(folder: Path, tmp_path: Path) -> None:
    with np.load(folder / "c.npz") as npz:
        emb = npz["embeddings"] > 0
    proc = evaluate_cli(folder, changed(folder, tmp_path, embeddings=emb), "--model-name", "b")
    one_error(proc, "changed.npz", "not bool of shape (320, 64)")


def test_a_results_dir_that_is_a_file_is_refused_before_any_work(
    folder: Path, tmp_path: Path
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    proc = run_cli(
        "evaluate", "--protocol", folder / "tiny.yaml", "--embeddings", folder / "c.npz",
        "--model-name", "x", "--results-dir", blocker / "results",
    )  # fmt: skip
    one_error(proc, str(blocker), "--results-dir")


def test_a_decompression_bomb_header_is_one_line(tmp_path: Path) -> None:
    import struct
    import zlib

    from dmlbench.data.cache import decode, image_size
    from dmlbench.errors import DataError

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", 100_000, 100_000, 8, 2, 0, 0, 0)
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
    png += chunk(b"IDAT", zlib.compress(b"\0" * 100)) + chunk(b"IEND", b"")
    bomb = tmp_path / "bomb.png"
    bomb.write_bytes(png)
    for read in (lambda: decode(bomb, 32), lambda: image_size(bomb)):
        with pytest.raises(DataError, match=r"bomb\.png: refused, Image size"):
            read()


def test_a_16_bit_grey_png_is_scaled_not_clipped(tmp_path: Path) -> None:
    """Pillow's convert("RGB") clipped 16-bit grey at 255: every pixel above 255/65535 white."""
    from PIL import Image

    from dmlbench.data.cache import decode

    wide = (np.arange(64, dtype=np.uint16).reshape(8, 8) * 1000).astype(np.uint16)
    Image.fromarray(wide).save(tmp_path / "g16.png")
    pixels = decode(tmp_path / "g16.png", None)
    assert pixels.shape == (3, 8, 8)
    assert (pixels[0] == (wide >> 8)).all() and (pixels[0] == pixels[2]).all()
    grey = Image.fromarray((wide >> 8).astype(np.uint8))
    grey.save(tmp_path / "g8.png")  # an 8-bit image decodes as before
    assert (decode(tmp_path / "g8.png", None)[1] == (wide >> 8)).all()


@pytest.mark.parametrize("spelling", ["./ant/0.png", "ant//0.png", "bee/../ant/0.png"])
def test_one_file_under_two_spellings_is_listed_twice(tmp_path: Path, spelling: str) -> None:
    """Two rows of one file: a test image retrieved its own copy (Recall@1 inflated)."""
    from PIL import Image

    from dmlbench.data.custom import SplitSpec, index_entries
    from dmlbench.errors import DataError

    rows = ["path,label"]
    for name in ("ant", "bee", "cat"):
        (tmp_path / name).mkdir()
        for j in range(2):
            Image.fromarray(np.zeros((4, 4, 3), np.uint8)).save(tmp_path / name / f"{j}.png")
            rows.append(f"{name}/{j}.png,{name}")
    (tmp_path / "index.csv").write_text("\n".join([*rows, f"{spelling},ant"]) + "\n")
    with pytest.raises(DataError, match=r"index.csv:8: .* is listed twice \(line 2\)"):
        index_entries(tmp_path, SplitSpec(test_fraction=0.5))


class _Loss(torch.nn.Module):
    """A plugin's loss (this module is not dmlbench's): returns what it is given."""

    def __init__(self, out: object) -> None:
        super().__init__()
        self.out = out

    def forward(self, emb: torch.Tensor, labels: torch.Tensor) -> object:
        if isinstance(self.out, BaseException):
            raise self.out
        return self.out(emb) if callable(self.out) else self.out


@pytest.mark.parametrize(
    ("out", "fragment"),
    [(lambda e: e.sum(dim=1), "returned a tensor of shape (4,), not one number"),
     (1.0, "returned a float, not a tensor"),
     (None, "returned a NoneType, not a tensor"),
     (lambda e: torch.tensor(3), "returned a torch.int64 tensor"),
     (lambda e: e.sum().detach(), "returned a number without a gradient"),
     (ValueError("boom in my loss"), "raised ValueError: boom in my loss"),
     (SystemExit(0), "raised SystemExit: 0")],
)  # fmt: skip
def test_a_plugin_loss_that_returns_no_number_is_one_line(out: object, fragment: str) -> None:
    from dmlbench.engine.train import _Stepper
    from dmlbench.errors import PluginLossError
    from dmlbench.options import Accel

    net = torch.nn.Linear(3, 2)
    step = _Stepper(net, _Loss(out), torch.optim.SGD(net.parameters(), lr=0.1),
                    torch.device("cpu"), Accel())  # fmt: skip
    with pytest.raises(PluginLossError, match="the loss _Loss") as err:
        step(torch.ones(4, 3), torch.arange(4))
    assert fragment in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("source", "fragment"),
    [("def (:\n", "importing it failed (SyntaxError"),
     ("from dmlbench.methods import Method, register_method\n"
      "@register_method('contrastive')\nclass M(Method):\n    paper = 'x'\n",
      "method 'contrastive' is registered twice"),
     ("from dmlbench.methods import Method, register_method\n"
      "@register_method('../escape')\nclass M(Method):\n    paper = 'x'\n",
      "method name '../escape' must be a slug")],
)  # fmt: skip
def test_a_plugin_that_fails_to_register_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, fragment: str
) -> None:
    from dmlbench.errors import DmlbenchError
    from dmlbench.methods import METHODS, load_plugins

    name = f"hostile_plugin_{abs(hash(source)) % 10**8}"
    (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(DmlbenchError, match=f"--plugin {name}: importing it failed") as err:
        load_plugins([name])
    assert fragment in str(err.value)
    assert "../escape" not in METHODS


@pytest.mark.parametrize(
    "spec", ["tensorboard:/proc/dmlbench-x", "mlflow:/proc/dmlbench-x",
             "mlflow:sqlite:////proc/dmlbench-x.db", "mlflow:http://127.0.0.1:9"],
)  # fmt: skip
def test_a_tracker_that_cannot_write_or_connect_is_one_line_at_once(spec: str) -> None:
    """They were FileNotFoundError tracebacks, a traceback after 107 s, minutes of retries."""
    import time

    from dmlbench.engine.tracking import open_tracker
    from dmlbench.errors import DmlbenchError

    pytest.importorskip("mlflow") if spec.startswith("mlflow") else pytest.importorskip(
        "tensorboard"
    )
    start = time.perf_counter()
    with pytest.raises(DmlbenchError, match="--track") as err:
        open_tracker(spec)
    assert time.perf_counter() - start < 15 and "\n" not in str(err.value)
