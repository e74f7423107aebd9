"""The verdicts' error rates against a known truth (dmlbench.report.calibration's generator:
seed effects shared across methods, each method's own seed effect with its own variance, class
effects, method × class, seed × class and seed × class × method interactions, binary hits per
query; sizes fitted to the committed boards). Every check runs the package's procedure, which
must pass, and a deliberately broken variant, which must fail: today's crossed bootstrap
(variance ≈ 2–4×, false *worse* ≈ 0), seeds unpaired across methods, per-pair intervals and,
for *equivalent*, a point-estimate rule. The default run fits glyphs-mini (and the same board
with its methods' own seed sds 16× apart); ``-m heavy`` adds emoji-mini and icons-mini with
more boards."""

from __future__ import annotations

from dataclasses import replace
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from dmlbench.records import load_records
from dmlbench.report import calibration as cal
from dmlbench.report.verdicts import EQUIVALENT, WORSE

ROOT = Path(__file__).resolve().parents[2] / cal.ROOT
K, N_SIM, N_BOOT = 10, 500, 200
PACKAGE = "moments (this package)"


@cache
def generator(
    board: str, unequal: float = 1.0, studies: int = 1, outlier: float = 1.0, shared: bool = False
) -> cal.Components:
    """The generator fitted to ``board``; with ``studies`` > 1, searched by that many studies
    per method whose selection luck has the methods' own seed sd (one method's ``outlier``
    × that); with one, searched once, whatever nesting the fitted board had (glyphs-mini v5
    has 3 studies: the tests set the study structure they check). ``shared``: a seed effect
    common to every method at least as large as each method's own (root mean square), as on a
    board trained from random weights where a seed's initialisation moves every method
    together (glyphs-mini v4; from the trunk, v5's fitted shared part is 0): what exposes
    seeds unpaired across methods."""
    records, _ = load_records(ROOT / board)
    comp = cal.fit_components(records, board)
    comp = comp.unequal(unequal) if unequal != 1.0 else comp
    comp = comp.with_studies(studies) if studies > 1 else replace(comp, studies=1, study=0.0)
    if shared:
        own = float(np.sqrt(np.mean(comp.seed_method**2)))
        comp = replace(comp, seed_shared=max(comp.seed_shared, own))
    return comp.with_outlier(outlier) if outlier != 1.0 else comp


@cache
def tie_boards(
    board: str, unequal: float, n: int, studies: int = 1, outlier: float = 1.0, shared: bool = False
) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(2026)
    comp = generator(board, unequal, studies, outlier, shared)
    return [cal.simulate(rng, comp, np.zeros(K)) for _ in range(n)]


def run(variant: str, board: tuple[np.ndarray, np.ndarray], i: int, studies: int = 1):
    methods = tuple(str(m) for m in range(board[0].shape[0]))
    procedure = cal.PROCEDURES[variant]
    labels = np.arange(board[0].shape[1]) % studies if studies > 1 else None
    if procedure is cal.bootstrap:
        return procedure(methods, *board, cal.DELTA, i, n_boot=N_BOOT)
    return procedure(methods, *board, cal.DELTA, i, n_sim=N_SIM, studies=labels)


def band_check(
    variant: str,
    board: str,
    unequal: float,
    n: int,
    studies: int = 1,
    outlier: float = 1.0,
    shared: bool = False,
) -> tuple[bool, float, float]:
    """(calibrated, false-worse rate, variance ratio) over ``n`` tied boards: the rate within
    [0.02, 0.06] widened by 2 Monte-Carlo sd at each end, and the procedure's mean variance of a
    difference within 2.5 sd (of a variance over n boards) of the true one."""
    boards = tie_boards(board, unequal, n, studies, outlier, shared)
    methods = tuple(map(str, range(K)))
    worse = sum(
        bool((run(variant, b, i, studies)["verdict"] == WORSE).any()) for i, b in enumerate(boards)
    )
    diffs = [float(np.mean((s[0] - s[1]).sum(axis=1)) / c.sum()) for s, c in boards]
    labels = generator(board, unequal, studies).study_labels()
    var = np.mean([cal.pair_se(variant, methods, b, labels) ** 2 for b in boards])
    rate, ratio = worse / n, float(var / np.var(diffs, ddof=1))
    lo = 0.02 - 2 * np.sqrt(0.02 * 0.98 / n)
    hi = 0.06 + 2 * np.sqrt(0.06 * 0.94 / n)
    tol = 2.5 * np.sqrt(2 / (n - 1))
    return lo <= rate <= hi and abs(ratio - 1) <= tol, rate, ratio


VARIANTS = [
    pytest.param(PACKAGE, True, id="package"),
    pytest.param("crossed bootstrap (before)", False, id="bootstrap-before"),
    pytest.param("moments, seeds unpaired", False, id="unpaired-seeds"),
    pytest.param("per-pair intervals", False, id="per-pair"),
]


@pytest.mark.parametrize(("variant", "calibrated"), VARIANTS)
def test_false_worse_rate_under_ties_is_in_the_target_band(
    variant: str, calibrated: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    """10 tied methods on glyphs-mini's sizes (12 seeds, 200 classes × 16 queries) with a
    seed effect shared by every method, 300 boards: the package's procedure lands in the band
    with an unbiased variance; the earlier crossed bootstrap (variance ≈ 1.8×), unpaired seeds
    (≈ 1.2×, false *worse* ≈ 0) and per-pair intervals (rate ≈ 0.7) miss it."""
    ok, rate, ratio = band_check(variant, "glyphs-mini", 1.0, 300, shared=True)
    with capsys.disabled():
        print(f"\n{variant}: false-worse {rate:.3f}, variance ratio {ratio:.2f}")
    assert ok == calibrated


def test_false_worse_rate_with_strongly_unequal_seed_variances() -> None:
    """The methods' own seed sds 16× apart (glyphs-mini's sizes): still in the band."""
    ok, rate, ratio = band_check(PACKAGE, "glyphs-mini", 16.0, 300)
    assert ok, (rate, ratio)


@pytest.mark.parametrize(
    ("variant", "calibrated"),
    [pytest.param(PACKAGE, True, id="package"),
     pytest.param("moments, study level ignored", False, id="study-level-ignored")],
)  # fmt: skip
def test_false_worse_rate_with_three_search_studies(
    variant: str, calibrated: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    """Item 3: 10 tied methods, 12 seeds nested in 3 studies per method whose selection luck
    has the methods' own seed sd (glyphs-mini's sizes), 300 boards: the nested estimate lands
    in the band with an unbiased variance; the crossed estimate that treats the 12 seeds as
    exchangeable (the study level ignored) calls false *worse* far above 0.06."""
    ok, rate, ratio = band_check(variant, "glyphs-mini", 1.0, 300, studies=3)
    with capsys.disabled():
        print(f"\n{variant}, 3 studies: false-worse {rate:.3f}, variance ratio {ratio:.2f}")
    assert ok == calibrated
    if not calibrated:
        assert rate > 0.1


@pytest.mark.parametrize(
    ("variant", "calibrated"),
    [pytest.param(PACKAGE, True, id="package"),
     pytest.param("moments, one pool for every search", False, id="one-pool")],
)  # fmt: skip
def test_false_worse_rate_with_one_catastrophic_search(
    variant: str, calibrated: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    """3 studies per method, one method's selection luck 16× the others' (a search that
    sometimes fails), 300 boards: the package's procedure stays in the band, and the
    variance of a difference of two other methods stays their own (the F test lets the
    unstable search leave the pool). One pool for every search (no test) widens every
    other interval: that variance ≈ 4× the truth."""
    ok, rate, ratio = band_check(variant, "glyphs-mini", 1.0, 300, studies=3, outlier=16.0)
    with capsys.disabled():
        print(f"\n{variant}, one catastrophic search: false-worse {rate:.3f}, ratio {ratio:.2f}")
    assert ok == calibrated, (rate, ratio)
    if not calibrated:
        assert ratio > 2


@pytest.mark.heavy
@pytest.mark.parametrize("board", ["glyphs-mini", "emoji-mini", "icons-mini"])
@pytest.mark.parametrize("unequal", [1.0, 16.0])
def test_false_worse_rate_with_three_studies_on_every_fitted_board(
    board: str, unequal: float
) -> None:
    """Heavy: 1,000 boards per generator with 3 search studies per method (study sd = the
    methods' own seed sd)."""
    ok, rate, ratio = band_check(PACKAGE, board, unequal, 1000, studies=3)
    assert ok, (rate, ratio)


@pytest.mark.heavy
@pytest.mark.parametrize("board", ["glyphs-mini", "emoji-mini", "icons-mini"])
@pytest.mark.parametrize("unequal", [1.0, 16.0])
def test_false_worse_rate_on_every_fitted_board(board: str, unequal: float) -> None:
    """Heavy: 1,000 boards per generator, each committed board's sizes, equal and strongly
    unequal own seed variances."""
    ok, rate, ratio = band_check(PACKAGE, board, unequal, 1000)
    assert ok, (rate, ratio)


@pytest.mark.parametrize(
    ("variant", "calibrated"),
    [pytest.param(PACKAGE, True, id="package"),
     pytest.param("point estimate inside ±δ", False, id="point-estimate")],
)  # fmt: skip
def test_a_pair_delta_plus_half_a_point_apart_is_rarely_equivalent(
    variant: str, calibrated: bool
) -> None:
    """Item 2: one method δ + 0.5 = 3.5 points ahead of 9 tied ones, so every method's true
    gap to the best of the others is ±3.5 points: boards with any *equivalent* ≤ 5% over 150
    boards of icons-mini's sizes (the noisiest committed board: its interval is widest, so the
    point-estimate rule errs most). A rule that calls equivalence from the point estimate
    inside ±δ must fail."""
    rng = np.random.default_rng(48)
    gaps = np.zeros(K)
    gaps[0] = cal.DELTA + 0.005
    hits = 0
    for i in range(150):
        out = run(variant, cal.simulate(rng, generator("icons-mini"), gaps), i)
        hits += bool((out["verdict"] == EQUIVALENT).any())
    assert (hits / 150 <= 0.05) == calibrated


def test_power_for_a_three_point_gap_and_never_equivalent_ten_points_behind() -> None:
    """One method 3 points behind 9 tied ones on glyphs-mini's sizes: *worse* on ≥ 80% of 60
    boards; 10 points behind: *worse* on every one of 15 boards, never *equivalent*."""
    rng = np.random.default_rng(11)
    found = 0
    for i in range(60):
        gaps = np.zeros(K)
        gaps[-1] = -0.03
        out = run(PACKAGE, cal.simulate(rng, generator("glyphs-mini"), gaps), i)
        found += out.loc[str(K - 1), "verdict"] == WORSE
        gaps[-1] = -0.10
        if i < 15:
            out = run(PACKAGE, cal.simulate(rng, generator("glyphs-mini"), gaps), i)
            assert out.loc[str(K - 1), "verdict"] == WORSE
    assert found / 60 >= 0.80


def test_the_fitted_study_sd_is_the_simulated_one() -> None:
    """A tuned board searched by 3 studies gives the generator its own study sd
    (:func:`calibration.study_sd`): over 150 boards simulated with a known sd, the mean of the
    fitted variance is the true one within 3 Monte-Carlo standard errors."""
    comp = generator("glyphs-mini", studies=3)
    rng = np.random.default_rng(15)
    fitted = []
    for _ in range(150):
        sums, counts = cal.simulate(rng, comp, np.zeros(K))
        mc = cal.crossed_moments(tuple(map(str, range(K))), sums, counts, comp.study_labels())
        fitted.append(cal.study_sd(mc, np.arange(K)) ** 2)
    err = 3 * np.std(fitted) / np.sqrt(len(fitted))
    assert abs(np.mean(fitted) - comp.study**2) < err


def test_the_command_writes_the_table(tmp_path: Path) -> None:
    """``python -m dmlbench.report.calibration``: a table per generator (3 boards: a smoke
    run of the command, not of the rates); a missing folder exits 2."""
    out = tmp_path / "table.md"
    cal.main(["--boards", "3", "--root", str(ROOT), "--fit", "icons-mini", "--out", str(out)])
    text = out.read_text(encoding="utf-8")
    # icons-mini, unequal, 3 studies, one search 16× and one 4× as unstable as the others
    assert text.count("| moments (this package) |") == 5
    assert text.count("| moments, study level ignored |") == 3
    only = tmp_path / "studies.md"
    cal.main(["--boards", "2", "--root", str(ROOT), "--fit", "icons-mini", "--only", "studies",
              "--out", str(only)])  # fmt: skip
    assert only.read_text(encoding="utf-8").count("| moments (this package) |") == 3
    with pytest.raises(SystemExit) as err:
        cal.main(["--root", str(tmp_path / "none")])
    assert err.value.code == 2
