"""Bad input, clear errors (issue #9, point 1), seen from the command line.

Every input a user can get wrong — a protocol key, a value, a name, a data root, an index file,
an image, a label, a command-line argument — must end ``dmlbench`` with exit status 2 and ONE
line on stderr, ``error: …``, that names the file, key or path at fault, without a traceback;
``--debug`` shows the traceback instead (docs/failures.md, "What happens when…").

The data cases use the CUB-200-2011 fixture in its real on-disk format
(:func:`tests.data.fixtures.make_cub`) under a protocol that ``include:``s the shipped
``cub200.yaml`` and shrinks images, batch and metrics to the fixture, run with
``--backbone-override small-cnn --max-steps 1 --no-search``: each case takes about a second.
The run banner (``protocol NAME vN (hash); methods: …``) that ``dmlbench run`` prints before it
starts is the only other line allowed on stderr.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from dmlbench.cli.main import main
from dmlbench.errors import DataError, DmlbenchError, ProtocolError
from dmlbench.protocol import builtin_dir
from tests.data.fixtures import make_cub

BANNER = re.compile(r"^protocol \S+ v\d+ \([0-9a-f]{12}\); methods: .*; budget: ")
SMOKE = [
    "--backbone-override", "small-cnn", "--pretrained", "none", "--max-steps", "1", "--no-progress",
]  # fmt: skip


def fixture_protocol(root: Path, **sections: str) -> str:
    """The shipped cub200 protocol, shrunk to the fixture; ``sections`` replace whole lines."""
    lines = {
        "include": f"include: {builtin_dir() / 'cub200.yaml'}",
        "name": "name: cub-fixture",
        "data": f"data: {{root: {root}}}",
        "images": "images: {train: {resize: 36, random_crop: 32, hflip: 0.5}, "
        "test: {resize: 36, center_crop: 32}}",
        "batch": "batch: {size: 4, samples_per_class: 2}",
        "metrics": "metrics: {recall_at: [1, 2], nmi: false}",
        "seeds": "seeds: [0]",
    }
    lines.update(sections)
    return "\n".join(v for v in lines.values() if v) + "\n"


class Setup:
    """A CUB fixture, a protocol file for it and the ``dmlbench run`` command line."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.root = make_cub(tmp_path / "CUB_200_2011", train=3, test=3, per_class=3)
        self.protocol = tmp_path / "protocol.yaml"
        self.protocol.write_text(fixture_protocol(self.root))
        self.results = tmp_path / "results"

    def argv(self, *extra: str, search: bool = False) -> list[str]:
        return [
            "run", "--protocol", str(self.protocol), "--method", "contrastive",
            "--results-dir", str(self.results), "--reports-dir", str(self.tmp / "reports"),
            *SMOKE, *([] if search else ["--no-search"]), *extra,
        ]  # fmt: skip

    def image(self, image_id: int) -> Path:
        rows = dict(line.split() for line in (self.root / "images.txt").read_text().splitlines())
        return self.root / "images" / rows[str(image_id)]

    def relabel(self, image_id: int, label: int | str) -> Path:
        path = self.root / "image_class_labels.txt"
        rows = [line.split() for line in path.read_text().splitlines()]
        path.write_text("".join(f"{i} {label if i == str(image_id) else c}\n" for i, c in rows))
        return path


Edit = Callable[[Setup], list[str]]


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Setup:
    monkeypatch.setenv("DMLBENCH_CACHE", str(tmp_path / "cache"))  # no cache shared across cases
    return Setup(tmp_path)


def error_line(capsys: pytest.CaptureFixture[str]) -> str:
    """The single ``error:`` line on stderr (the run banner aside); no traceback."""
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip() and not BANNER.match(line)]
    assert len(lines) == 1, err
    assert lines[0].startswith("error: "), err
    return lines[0]


def edit_protocol(**sections: str) -> Edit:
    def edit(s: Setup) -> list[str]:
        s.protocol.write_text(fixture_protocol(s.root, **sections))
        return []

    return edit


def options(*argv: str) -> Edit:
    return lambda s: list(argv)


def remove_index(s: Setup) -> list[str]:
    (s.root / "images.txt").unlink()
    return []


def short_index_row(s: Setup) -> list[str]:
    (s.root / "images.txt").write_text("1\n")
    return []


def remove_image(s: Setup) -> list[str]:
    s.image(4).unlink()
    return []


def truncate_image(s: Setup) -> list[str]:
    s.image(4).write_bytes(s.image(4).read_bytes()[:300])
    return []


def replace_image_by_text(s: Setup) -> list[str]:
    s.image(4).write_text("<html>404 not found</html>\n")
    return []


def word_label(s: Setup) -> list[str]:
    s.relabel(2, "two")
    return []


def label_999(s: Setup) -> list[str]:
    s.relabel(2, 999)  # CUB's classes are 1..200
    return []


def single_image_class(s: Setup) -> list[str]:
    s.relabel(2, 2)  # class 1 keeps image 1 only
    s.relabel(3, 2)
    return []


# Each case: how to break the input (returns extra argv) and what the error line must contain;
# "{protocol}", "{root}", "{tmp}", "{image}" and "{labels}" are filled in from the fixture.
CASES = [
    pytest.param(
        edit_protocol(batch="batch: {size: 4, samples_per_clas: 2}"),
        ["{protocol}", "batch.samples_per_clas: unknown key", "did you mean 'samples_per_class'"],
        id="unknown-key",
    ),
    pytest.param(
        edit_protocol(batch="batch: {size: four, samples_per_class: 2}"),
        ["{protocol}", "batch.size:", "integer", "'four'"],
        id="wrong-type",
    ),
    pytest.param(
        edit_protocol(optim="optim: {lr: -0.001}"),
        ["{protocol}", "optim.lr:", "greater than 0", "-0.001"],
        id="negative-lr",
    ),
    pytest.param(
        edit_protocol(methods="methods: [contrastiv]"),
        ["{protocol}", "methods: unknown method 'contrastiv'", "did you mean 'contrastive'"],
        id="unknown-method-in-protocol",
    ),
    pytest.param(
        options("--method", "contrastiv"),
        ["contrastiv", "did you mean 'contrastive'"],
        id="unknown-method-option",
    ),
    pytest.param(
        edit_protocol(model="model: {backbone: bn_inception}"),
        ["{protocol}", "model.backbone: unknown backbone 'bn_inception'", "'bn-inception'"],
        id="unknown-backbone-in-protocol",
    ),
    pytest.param(
        edit_protocol(model="model: {backbone: resnet18}"),
        ["model.backbone: unknown backbone 'resnet18'", "did you mean 'timm:resnet18'"],
        id="bare-timm-backbone-in-protocol",
    ),
    pytest.param(
        options("--backbone-override", "small_cnn"),
        ["model.backbone: unknown backbone 'small_cnn'", "did you mean 'small-cnn'"],
        id="unknown-backbone-option",
    ),
    pytest.param(
        edit_protocol(data="data: {dataset: cub-200, root: /nowhere}"),
        ["{protocol}", "data.dataset:", "'cub-200'", "did you mean 'cub200'"],
        id="unknown-data-set",
    ),
    pytest.param(
        options("--protocol", "cub-200"),
        ["unknown protocol 'cub-200'", "did you mean 'cub200'"],
        id="unknown-protocol-name",
    ),
    pytest.param(
        lambda s: ["--protocol", str(s.tmp / "nope.yaml")],
        ["{tmp}/nope.yaml", "not found"],
        id="missing-protocol-file",
    ),
    pytest.param(
        lambda s: ["--data-root", str(s.tmp / "nowhere")],
        ["{tmp}/nowhere", "not a directory", "dmlbench data prepare cub200"],
        id="missing-data-root",
    ),
    pytest.param(
        edit_protocol(data='data: {root: "${DMLBENCH_SURELY_UNSET}/CUB_200_2011"}'),
        ["DMLBENCH_SURELY_UNSET", "unset variable"],
        id="data-root-unset-variable",
    ),
    pytest.param(remove_index, ["{root}/images.txt", "index file not found"], id="missing-index"),
    pytest.param(short_index_row, ["{root}/images.txt:1", "expected 2 fields"], id="bad-index-row"),
    pytest.param(remove_image, ["{image}", "image file is missing"], id="missing-image"),
    pytest.param(truncate_image, ["{image}", "image"], id="truncated-image"),
    pytest.param(replace_image_by_text, ["{image}", "not a readable image"], id="non-image-file"),
    pytest.param(word_label, ["{labels}", "'two' is not an integer"], id="non-integer-label"),
    pytest.param(
        label_999,
        ["{labels}", "999"],
        id="label-out-of-range",
    ),
    pytest.param(single_image_class, ["single image", "class 1"], id="single-image-class"),
    pytest.param(
        edit_protocol(metrics="metrics: {recall_at: [1, 64], nmi: false}"),
        ["metrics.recall_at", "K=64", "gallery (8 items)"],
        id="k-larger-than-gallery",
    ),
    pytest.param(
        options("--workers", "0"), ["--workers 0", "must be in [1, 1024]"], id="workers-0"
    ),
    pytest.param(
        options("--heartbeat", "0"), ["--heartbeat 0", "must be in [1, 86400]"], id="heartbeat-0"
    ),
    pytest.param(
        options("--hparam", "margin=0.5"),
        ["--hparam 'margin=0.5'", "METHOD.NAME=VALUE"],
        id="hparam-without-method",
    ),
    pytest.param(
        options("--hparam", "contrastive.margin"),
        ["--hparam 'contrastive.margin'", "METHOD.NAME=VALUE"],
        id="hparam-without-value",
    ),
    pytest.param(
        options("--hparam", "contrastive.margn=0.5"),
        ["contrastive", "unknown hyper-parameter", "margn"],
        id="hparam-unknown-name",
    ),
    pytest.param(
        options("--hparam", "contrastiv.margin=0.5"),
        ["--hparam", "contrastiv", "did you mean 'contrastive'"],
        id="hparam-for-a-method-not-run",
    ),
    pytest.param(
        options("--loader-workers", "-1"),
        ["--loader-workers -1", "must be in [0, 1024]"],
        id="loader-workers-negative",
    ),
    pytest.param(
        options("--seed", "-1"),
        ["--seed", "-1", "must be in [0,"],
        id="negative-seed",
    ),
    pytest.param(
        options("--max-steps", "0"),
        ["--max-steps 0", "must be in [1, 1000000000]"],
        id="max-steps-zero",
    ),
]


def fill(fragment: str, s: Setup, image: Path) -> str:
    labels = s.root / "image_class_labels.txt"
    return fragment.format(protocol=s.protocol, root=s.root, tmp=s.tmp, image=image, labels=labels)


@pytest.mark.parametrize(("edit", "fragments"), CASES)
def test_bad_input_is_one_error_line_with_exit_2(
    edit: Edit, fragments: list[str], setup: Setup, capsys: pytest.CaptureFixture[str]
) -> None:
    image = setup.image(4)  # before the index may be edited
    extra = edit(setup)
    assert main(setup.argv(*extra)) == 2
    line = error_line(capsys)
    for fragment in fragments:
        assert fill(fragment, setup, image) in line, line


def test_trials_must_not_be_negative(setup: Setup, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(setup.argv("--trials", "-1", search=True)) == 2
    line = error_line(capsys)
    assert "--trials -1" in line and "must be in [0, 100000]" in line


def test_k_larger_than_the_gallery_fails_before_any_training(
    setup: Setup, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import dmlbench.run

    trained: list[object] = []
    monkeypatch.setattr(dmlbench.run, "train", lambda *a, **k: trained.append(a))
    edit_protocol(metrics="metrics: {recall_at: [1, 64], nmi: false}")(setup)
    assert main(setup.argv()) == 2
    assert "metrics.recall_at" in error_line(capsys)
    assert trained == [] and not list(setup.results.rglob("*.json"))  # not even the baseline


def test_unknown_names_fail_before_the_data_is_read(
    setup: Setup, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import dmlbench.run

    monkeypatch.setattr(dmlbench.run, "load_data", lambda *a: pytest.fail("data was read"))
    assert main(setup.argv("--method", "contrastive,multi-similarty")) == 2
    assert "did you mean 'multi-similarity'" in error_line(capsys)


# --------------------------------------------------------------------------- --debug, stderr


def test_debug_raises_instead_of_one_line(setup: Setup) -> None:
    image = setup.image(4)
    truncate_image(setup)
    with pytest.raises(DataError, match=re.escape(str(image))):
        main(["--debug", *setup.argv()])
    edit_protocol(batch="batch: {size: 4, samples_per_clas: 2}")(setup)
    with pytest.raises(ProtocolError, match="samples_per_clas"):
        main(["--debug", *setup.argv()])
    edit_protocol()(setup)
    with pytest.raises(DmlbenchError, match="--workers 0"):
        main(["--debug", *setup.argv("--workers", "0")])


def test_stderr_of_a_real_process(setup: Setup) -> None:
    """Outside pytest's capture, with logging configured as for a user: still one line."""
    image = setup.image(4)
    replace_image_by_text(setup)
    proc = subprocess.run(
        [sys.executable, "-m", "dmlbench", *setup.argv()], capture_output=True, text=True
    )
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if not BANNER.match(line)]
    assert len(lines) == 1 and lines[0].startswith(f"error: {image}: not a readable image")
