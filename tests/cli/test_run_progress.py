"""Issue #18: a redirected ``dmlbench run`` prints one line per finished run, with an ETA."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.cli.runner import run_cli
from tests.test_protocol import BASE

CLOCK = r"\d+s|\d+m\d\ds|\d+h\d\dm"  # dmlbench.engine.progress.clock, "?" excluded
RUN_LINE = re.compile(
    rf"^(?P<method>\S+) seed (?P<seed>\d+): recall@1 [01]\.\d{{4}} \(took (?:{CLOCK})\); "
    rf"(?P<elapsed>{CLOCK}) elapsed, ETA (?P<eta>{CLOCK})$"
)


def _seconds(clock: str) -> int:
    """Inverse of ``clock``: ``42s``, ``3m05s``, ``2h07m`` to seconds."""
    h, m, s = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", clock).groups()  # type: ignore[union-attr]
    return int(h or 0) * 3600 + int(m or 0) * 60 + int(s or 0)


@pytest.mark.slow
def test_redirected_run_prints_a_line_per_finished_run_with_elapsed_and_eta(
    tmp_path: Path,
) -> None:
    """2 methods × 2 seeds with stderr off a terminal (no tqdm bars):
    the rows that need no learning (pixels, untrained) run for each seed too, so 8 runs finish
    and 8 lines say so."""
    proto = tmp_path / "p.yaml"
    proto.write_text(BASE.replace("seeds: [0]", "seeds: [0, 1]"))
    methods, seeds = ["contrastive", "proxy-anchor"], [0, 1]
    argv = [
        "run", "--protocol", str(proto), "--method", ",".join(methods),
        "--seed", ",".join(map(str, seeds)), "--no-search", "--threads", "1",
        "--results-dir", str(tmp_path / "res"), "--reports-dir", str(tmp_path / "rep"),
    ]  # fmt: skip
    proc = run_cli(*argv)  # stderr is not a terminal, as a pipe is not
    assert proc.returncode == 0, proc.stderr
    # a finished run's line starts with its method (epoch lines are indented)
    finished = [ln for ln in proc.stderr.splitlines() if re.match(r"\S+ seed \d+: ", ln)]
    matches = [RUN_LINE.match(ln) for ln in finished]
    assert all(matches), f"lines without elapsed time or ETA: {finished}"
    runs = sorted((m["method"], int(m["seed"])) for m in matches if m)
    expected = sorted((name, s) for name in ["pixels", "untrained", *methods] for s in seeds)
    assert runs == expected, proc.stderr
    elapsed = [_seconds(m["elapsed"]) for m in matches if m]
    assert elapsed == sorted(elapsed)  # the whole command's clock, not each run's
    assert matches[-1] is not None and matches[-1]["eta"] == "0s"  # nothing left
