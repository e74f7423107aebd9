"""Paper defaults vs tuned, paired: shared seeds only, the paired difference, its interval and
verdict, no rank change; boards paired only on the same data and version."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from dmlbench.records import ProtocolRef, QueryHits, Record
from dmlbench.report.build import build_reports
from dmlbench.report.defaults import (
    BETTER,
    WORSE,
    board_pairs,
    defaults_vs_tuned,
    simultaneous_intervals,
)
from dmlbench.report.verdicts import UNDECIDED, seed_moments
from tests.report.test_build import rec

# tuned: 5 seeds; defaults: seeds 0-2. b's search selected its defaults (and their epochs):
# seeds 0-2 identical.
TUNED = {
    "a": [0.80, 0.82, 0.81, 0.95, 0.95],
    "b": [0.70, 0.72, 0.71, 0.50, 0.50],
    "c": [0.50, 0.52, 0.49, 0.51, 0.50],
    "untrained": [0.3] * 5,
}
DEFAULTS = {"a": [0.60, 0.61, 0.62], "b": [0.70, 0.72, 0.71], "c": [0.60, 0.61, 0.59],
            "d": [0.65, 0.6, 0.6], "untrained": [0.3] * 3}  # fmt: skip


def boards(fingerprint: str = "f-glyphs-mini", version: int = 1) -> list[Record]:
    out = [
        rec(m, s, "t" * 64, "glyphs-mini", m={"recall@1": v})
        for m, vs in TUNED.items()
        for s, v in enumerate(vs)
    ]
    ref = ProtocolRef(name="glyphs-mini@defaults", version=version, hash="d" * 64)
    for m, vs in DEFAULTS.items():
        for s, v in enumerate(vs):
            r = rec(m, s, "d" * 64, "glyphs-mini@defaults", m={"recall@1": v})
            out.append(r.model_copy(update={"data_fingerprint": fingerprint, "protocol": ref}))
    return out


def test_only_shared_seeds_are_compared_paired() -> None:
    [(tuned, defaults)] = board_pairs(boards())
    t = defaults_vs_tuned(tuned, defaults)
    assert list(t.index) == ["a", "b", "c"]  # d is not on the tuned board; untrained never
    assert (t["n_shared_seeds"] == 3).all() and t.attrs["seeds"] == [0, 1, 2]
    assert t.loc["a", "tuned_mean"] == pytest.approx(0.81)  # seeds 0-2 only, not 0.866
    assert t.loc["a", "difference"] == pytest.approx(0.20)
    assert t.loc["b", "tuned_mean"] == pytest.approx(0.71)  # its seeds 3-4 (0.50) not counted
    # b's runs are the same on seeds 0-2: difference 0, but never a zero-width interval (its
    # seeds unpaired: Var = 2 × the seed variance of b's mean) and, seeds only, no equivalent
    assert t.loc["b", "difference"] == 0 and bool(t.loc["b", "same_runs"])
    se = np.sqrt(2 * np.var([0.70, 0.72, 0.71], ddof=1) / 3)
    assert t.loc["b", "upper"] == pytest.approx(-t.loc["b", "lower"])
    assert t.loc["b", "upper"] > 2 * se
    assert t.loc["b", "verdict"] == UNDECIDED
    assert not t.loc[["a", "c"], "same_runs"].any()
    assert t.loc["a", "verdict"] == BETTER and t.loc["c", "verdict"] == WORSE
    assert "rank_change" not in t.columns and "defaults_rank" not in t.columns


def test_one_method_gets_the_paired_t_interval() -> None:
    """One method over 5 seeds, seeds only: the family is one difference, so c is t_4's 97.5%
    quantile (Šidák's floor with m = 1; the simulation agrees within its noise)."""
    d = np.array([[0.02, 0.05, 0.01, 0.04, 0.03]])
    lower, upper = simultaneous_intervals(seed_moments(("a",), d))
    se = d.std(ddof=1) / np.sqrt(5)
    c = stats.t.ppf(0.975, 4)
    assert lower[0] == pytest.approx(d.mean() - c * se, rel=0.05)
    assert upper[0] == pytest.approx(d.mean() + c * se, rel=0.05)
    assert upper[0] - d.mean() >= c * se - 1e-12  # never below the floor


def test_noise_gives_undecided_and_hits_add_the_class_component() -> None:
    classes = np.repeat(np.arange(40), 10)
    rng = np.random.default_rng(0)
    records = []
    for name, h in (("glyphs-mini", "t" * 64), ("glyphs-mini@defaults", "d" * 64)):
        for s in range(4):
            hits = (rng.random(400) < 0.5).astype(float)
            r = rec("a", s, h, name, m={"recall@1": float(hits.mean())})
            records.append(r.model_copy(update={"query_hits": QueryHits.encode(hits, classes)}))
            records.append(rec("b", s, h, name, m={"recall@1": 0.3 + 0.01 * s}))
    [(tuned, defaults)] = board_pairs(records)
    # b lacks hits: the whole pair falls back to seeds only, and says so
    assert set(defaults_vs_tuned(tuned, defaults)["resampled"]) == {"seeds only"}
    only_a = [r for r in tuned if r.method == "a"], [r for r in defaults if r.method == "a"]
    t = defaults_vs_tuned(*only_a)
    assert t.loc["a", "resampled"] == "seeds and test classes"
    assert t.loc["a", "verdict"] == UNDECIDED  # independent coin flips: no claim either way


def test_files_written_and_indexed(tmp_path: Path) -> None:
    search = {"trials": 8, "trial": 3, "metric": "recall@1", "value": 0.7, "epochs": 2}
    records = [
        r.model_copy(update={"search": search})
        if r.protocol.name == "glyphs-mini" and r.method != "untrained"
        else r
        for r in boards()
    ]
    written = build_reports(records, tmp_path)
    md, csv_path = (
        tmp_path / "glyphs-mini-defaults-vs-tuned.md",
        tmp_path / "glyphs-mini-defaults-vs-tuned.csv",
    )
    assert md in written and csv_path in written
    text = md.read_text(encoding="utf-8")
    title = "glyphs-mini v1: paper defaults (no search) vs tuned (8-trial search per method)"
    assert f"## {title}\n" in text
    assert "seeds both boards share (0, 1, 2)" in text and "noisy" in text
    assert "different runs" not in text and "rank change" in text  # the note says why none
    row = next(line for line in text.splitlines() if line.startswith("| b "))
    cells = [c.strip() for c in row.split("|")[2:-1]]
    assert cells[:3] == ["3", "71.0", "71.0"] and cells[4] == "undecided"
    assert cells[3].startswith("+0.0 [-") and cells[3].endswith("] (same runs)")
    with csv_path.open(encoding="utf-8") as fh:
        rows = {r["method"]: r for r in csv.DictReader(fh)}
    assert float(rows["a"]["difference"]) == pytest.approx(0.20)
    assert rows["a"]["tuned_hash"] == "t" * 64 and rows["a"]["verdict"] == BETTER
    index = (tmp_path / "index.html").read_text(encoding="utf-8")
    assert "paper defaults (no search) vs tuned (8-trial search per method)" in index


def test_only_boards_on_the_same_data_and_version_are_paired(tmp_path: Path) -> None:
    assert board_pairs(boards(fingerprint="other")) == []
    assert board_pairs(boards(version=2)) == []
    build_reports(boards(fingerprint="other"), tmp_path)
    assert not list(tmp_path.glob("*defaults-vs-tuned*"))


def test_tuned_studies_nest_the_shared_seeds_and_widen_the_interval() -> None:
    """Tuned entries searched by 3 studies (seeds 0–5, round robin), the difference to the
    defaults shifted by each study's selection (+0.05, +0.15, −0.05): the interval counts the
    between-study part (T − 1 = 2 df), much wider than the same numbers read as one study."""
    from dmlbench.report.defaults import _difference_moments, simultaneous_intervals

    luck = [0.05, 0.15, -0.05]
    out = []
    ref = ProtocolRef(name="glyphs-mini@defaults", version=1, hash="d" * 64)
    for s in range(6):
        search = {"trial": 0, "trials": 8, "metric": "recall@1", "value": 0.8, "epochs": 4,
                  "hparams": {}, "study": "x", "study_index": s % 3, "studies": 3}  # fmt: skip
        noise = 0.01 * (s % 2)
        t = rec("a", s, "t" * 64, "glyphs-mini", m={"recall@1": 0.6 + luck[s % 3] + noise})
        out.append(t.model_copy(update={"search": search}))
        d = rec("a", s, "d" * 64, "glyphs-mini@defaults", m={"recall@1": 0.6 + noise})
        out.append(d.model_copy(update={"data_fingerprint": "f-glyphs-mini", "protocol": ref}))
    [(tuned, defaults)] = board_pairs(out)
    mc, _, _ = _difference_moments(tuned, defaults, ["a"], list(range(6)), "recall@1")
    assert mc.nested and mc.studies == 3
    lower, upper = simultaneous_intervals(mc)
    flat = [r.model_copy(update={"search": {**r.search, "study_index": 0}}) for r in tuned]
    one, _, _ = _difference_moments(flat, defaults, ["a"], list(range(6)), "recall@1")
    lo1, hi1 = simultaneous_intervals(one)
    assert upper[0] - lower[0] > 2 * (hi1[0] - lo1[0])
    assert lower[0] < 0 < upper[0]  # three studies cannot rule out no gain
