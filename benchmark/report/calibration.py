"""Calibration of the verdicts by simulation: error rates against a known truth.

The verdicts (:mod:`dmlbench.report.verdicts`) claim a false-*worse* rate of at most α and an
*equivalent* that a method truly more than δ away rarely gets. Those claims hold only if the
generator of the test boards is as rich as the real data, so the one here has every source
of variance the committed records show, with sizes fitted to glyphs-mini's records
(:func:`fit_components`, from the per-query hits :func:`~dmlbench.report.query_tests.class_sums`
reads), on the probability scale of a class's hit rate:

    p_isc = μ + g_i + a_s + u_is + b_c + v_ic + w_sc,   h_isc ~ Binomial(n_c, p_isc)

with g_i the true gaps, a_s a seed effect shared by every method (a seed fixes initial weights
and batch order alike), u_is a method's own seed effect, b_c a class effect (resampled from
the board's observed class means), v_ic a method × class interaction, w_sc a seed × class
interaction shared by the methods, and the binomial draw of each class's queries (the query
noise, the largest part of the seed × class interaction). The components are moment
estimates (McCullagh 2000; Owen 2007) from the ten leading methods' cross-products: the
shared parts from pairs of methods, the own parts from each method less the shared.

With ``studies`` > 1 (:meth:`Components.with_studies`) each method is searched by several
studies, each shifting the method's p by its own normal draw α_it (the selection luck), and
seed s belongs to study s mod T, as ``dmlbench run`` shares the seeds out;
:meth:`Components.with_outlier` gives one method a luck many times the others' (a search
that sometimes fails).

Procedures compared (:data:`PROCEDURES`): the package's (moments; nested in the studies where
there are several), the crossed bootstrap it replaces (which counts the seed × class noise
three times), the same moments with seeds unpaired across methods, per-pair intervals (not
simultaneous), a point-estimate rule for *equivalent* and, on boards of several studies, the
moments with the study level ignored (the 12 seeds treated as exchangeable) and one pool of
study luck that no method leaves (no F test). All but the
first live in :mod:`dmlbench.report.procedures`, and only there, as the broken variants the
tests must catch.

Run ``python -m dmlbench.report.calibration --boards 500`` for the table in docs/reports.md
(``--only studies`` for the generators searched by several studies alone).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from dmlbench.records import Record, is_baseline, load_records
from dmlbench.report.procedures import (
    ALPHA,
    DELTA,
    N_BOOT,
    PROCEDURES,
    STUDY_ONLY,
    Procedure,
    bootstrap,
    moments,
    no_study_level,
    pair_se,
    per_pair,
    point_estimate,
    unpaired,
)
from dmlbench.report.query_tests import class_sums, seed_studies
from dmlbench.report.tables import row_labels
from dmlbench.report.verdicts import EQUIVALENT, N_SIM, WORSE, MeanCovariance, crossed_moments

__all__ = [  # the procedures, re-exported for the tests and the command
    "ALPHA", "DELTA", "N_BOOT", "PROCEDURES", "STUDY_ONLY", "Procedure", "bootstrap",
    "moments", "no_study_level", "pair_se", "per_pair", "point_estimate", "unpaired",
]  # fmt: skip

ROOT = Path("results/leaderboard")
FITTED = ("glyphs-mini", "emoji-mini", "icons-mini")


@dataclass(frozen=True)
class Components:
    """Sizes of the generator's parts (standard deviations, probability scale), per board."""

    name: str
    mean: float
    seed_shared: float
    seed_method: np.ndarray  # one sd per method: the methods' own seed effects, unequal
    class_effects: np.ndarray  # observed class means less their mean, resampled per board
    counts: np.ndarray  # queries of each observed class, resampled with its effect
    class_method: float
    seed_class: float
    seed_class_method: float  # beyond the binomial query noise
    seeds: int
    study: float = 0.0  # sd of a study's selection luck (one draw per method and study)
    studies: int = 1  # search studies per method; seed s belongs to study s mod T
    outlier: tuple[int, float] | None = None  # (method, its study sd ÷ the others')

    def with_studies(self, studies: int, ratio: float = 1.0) -> Components:
        """The same board searched by ``studies`` studies per method, each shifting its
        method's mean by a normal draw whose sd is ``ratio`` × the methods' own seed sd (root
        mean square): selection luck as large as the seed noise."""
        sd = ratio * math.sqrt(float(np.mean(self.seed_method**2)))
        name = f"{self.name}, {studies} studies, study sd {ratio:g}× the seed sd"
        return replace(self, name=name, study=sd, studies=studies)

    def with_outlier(self, ratio: float = 16.0, index: int = 5) -> Components:
        """The same studies, but method ``index``'s selection luck ``ratio`` × the others':
        a method whose search sometimes selects an unstable configuration, so that one of
        its studies falls far below the others (a catastrophe). Judged on the others'
        pooled luck it would be called *worse* whenever its search was unlucky, and pooled
        with them it would widen every interval: the F test of ``moments.study_excess``
        must let it keep its own."""
        name = f"{self.name}, method {index}'s study sd ×{ratio:g}"
        return replace(self, name=name, outlier=(index, ratio))

    def study_sds(self, k: int) -> np.ndarray:
        """Each of ``k`` methods' study sd."""
        sd = np.full(k, self.study)
        if self.outlier is not None:
            sd[self.outlier[0] % k] *= self.outlier[1]
        return sd

    def study_labels(self) -> np.ndarray | None:
        """Each seed's study (round robin by position, as ``dmlbench run`` shares them out),
        or None with one study."""
        return np.arange(self.seeds) % self.studies if self.studies > 1 else None

    def unequal(self, ratio: float) -> Components:
        """The same board with the methods' own seed sds spread geometrically over
        ``ratio`` (sd of the last / sd of the first), their mean square kept."""
        k = len(self.seed_method)
        spread = np.geomspace(1.0, ratio, k)
        spread *= math.sqrt(float(np.mean(self.seed_method**2)) / float(np.mean(spread**2)))
        return replace(self, name=f"{self.name}, own seed sd ×{ratio:g} apart", seed_method=spread)


def fit_components(records: Sequence[Record], name: str = "", top: int = 10) -> Components:
    """Moment estimates of the generator's parts from one board's final records with
    per-query hits, over its ``top`` leading methods (the methods a "close to the best"
    question is about): shared parts from the mean cross-product of two methods, a method's
    own parts from its own square less the shared, the binomial query noise subtracted from
    the residual's own part. A tuned board searched by several studies gives the seed parts
    within studies and a study sd, the between-study component pooled over the leading
    methods' contrasts (σ²_α = T × its mean), so the generator draws that much selection
    luck with the board's own nesting."""
    finals = [r for r in records if r.stage == "final"]
    labels = row_labels(finals)
    kept = [r for r, lb in zip(finals, labels, strict=True) if not is_baseline(lb)]
    methods = tuple(sorted(set(row_labels(kept))))
    seeds = sorted({r.seed for r in kept})
    found = class_sums(kept, methods, seeds)
    if found is None:
        raise ValueError("the records carry no per-query hits on shared queries")
    sums, counts = found
    studies = seed_studies(kept, seeds)  # a tuned board searched by several studies
    mc = crossed_moments(methods, sums, counts, studies)
    lead = np.argsort(-mc.means)[:top]
    _k, s, c = sums.shape
    n = s * c
    pick = np.ix_(lead, lead)
    seed = ((mc.seed - mc.resid) * n / c)[pick]  # Cov(a_s + u_is) per pair of methods
    cls = ((mc.cls - mc.resid) * n / s)[pick]
    res = (mc.resid * n)[pick]
    off = ~np.eye(len(lead), dtype=bool)

    def shared(m: np.ndarray) -> float:
        return max(float(m[off].mean()), 0.0)

    rates = sums[lead] / counts
    scale = c * counts / counts.sum()  # y = scale · class hit rate
    binomial = float(np.mean(scale**2 * rates * (1 - rates) / np.maximum(counts - 1, 1)))
    own_res = float(np.diag(res).mean()) - shared(res)
    return Components(
        name=name,
        mean=float(mc.means[lead].mean()),
        seed_shared=math.sqrt(shared(seed)),
        seed_method=np.sqrt(np.clip(np.diag(seed) - shared(seed), 1e-8, None)),
        class_effects=rates.mean(axis=(0, 1)) - rates.mean(),
        counts=counts,
        class_method=math.sqrt(max(float(np.diag(cls).mean()) - shared(cls), 0.0)),
        seed_class=math.sqrt(shared(res)),
        seed_class_method=math.sqrt(max(own_res - binomial, 0.0)),
        seeds=s,
        study=study_sd(mc, lead),
        studies=mc.studies if mc.nested else 1,
    )


def study_sd(mc: MeanCovariance, lead: np.ndarray) -> float:
    """The sd of a study's selection luck from a nested estimate, over the methods ``lead``:
    the between-study component σ²_α/T pooled over their contrasts (trace of P·B·P over
    k − 1, so that a part shared by every method cancels), times T, truncated at 0; 0 with
    one study."""
    if not mc.nested or len(lead) < 2:
        return 0.0
    between = mc.between_studies[np.ix_(lead, lead)]
    centre = np.eye(len(lead)) - 1.0 / len(lead)
    pooled = float(np.trace(centre @ between @ centre)) / (len(lead) - 1)
    return math.sqrt(max(mc.studies * pooled, 0.0))


def simulate(
    rng: np.random.Generator, comp: Components, gaps: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """One board's per-class hit sums (k × seeds × classes) and queries per class, the
    methods' true Recall@1 being ``comp.mean + gaps`` (up to the clip to [0.005, 0.995]);
    as many classes as the fitted board, resampled with their query counts."""
    k, s = len(gaps), comp.seeds
    pick = rng.integers(0, len(comp.counts), len(comp.counts))
    counts, c = comp.counts[pick], len(pick)
    own = comp.seed_method[np.arange(k) % len(comp.seed_method)]
    p = (
        comp.mean
        + gaps[:, None, None]
        + rng.normal(0, comp.seed_shared, (1, s, 1))
        + rng.normal(0, 1, (k, s, 1)) * own[:, None, None]
        + comp.class_effects[pick][None, None, :]
        + rng.normal(0, comp.class_method, (k, 1, c))
        + rng.normal(0, comp.seed_class, (1, s, c))
        + rng.normal(0, comp.seed_class_method, (k, s, c))
    )
    if comp.studies > 1:  # each method's studies: its own selection luck, seeds nested
        luck = rng.normal(0, 1, (k, comp.studies)) * comp.study_sds(k)[:, None]
        p += luck[:, np.arange(s) % comp.studies, None]
    hits = rng.binomial(counts.astype(np.int64), p.clip(0.005, 0.995)).astype(np.float64)
    return hits, counts


@dataclass(frozen=True)
class Rates:
    """Per procedure, over ``boards`` simulated boards of each scenario."""

    false_worse: float  # all tied: boards with any worse
    equivalent_tie: float  # all tied: share of methods called equivalent
    power: float  # one method 3 points behind: called worse
    false_equivalent: float  # one method δ + 0.5 points ahead: boards with any equivalent
    se_ratio: float  # all tied: mean estimated variance of a difference / its true variance
    boards: int


def wilson(x: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a proportion x (of n trials)."""
    centre = (x + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(x * (1 - x) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(centre - half, 0.0), min(centre + half, 1.0)


def rates(
    procedures: Sequence[str],
    comp: Components,
    boards: int,
    k: int = 10,
    delta: float = DELTA,
    seed: int = 2026,
    n_sim: int = N_SIM,
    n_boot: int = N_BOOT,
) -> dict[str, Rates]:
    """Simulate ``boards`` boards of each scenario (the same boards for every procedure)."""
    rng = np.random.default_rng(seed)
    methods = tuple(str(i) for i in range(k))
    behind, ahead = np.zeros(k), np.zeros(k)
    behind[k - 1] = -0.03
    ahead[0] = delta + 0.005
    count = {p: np.zeros(4) for p in procedures}
    var_sum = dict.fromkeys(procedures, 0.0)
    first_diff = []
    for b in range(boards):
        tie = simulate(rng, comp, np.zeros(k))
        gap = simulate(rng, comp, behind)
        near = simulate(rng, comp, ahead)
        first_diff.append(float(np.mean((tie[0][0] - tie[0][1]).sum(axis=1)) / tie[1].sum()))
        for p in procedures:
            run = PROCEDURES[p]
            extra: dict[str, object] = {"n_boot": n_boot} if run is bootstrap else {"n_sim": n_sim}
            extra["studies"] = comp.study_labels()
            out = run(methods, *tie, delta, b, **extra)
            count[p][0] += bool((out["verdict"] == WORSE).any())
            count[p][1] += float((out["verdict"] == EQUIVALENT).mean())
            count[p][2] += (
                run(methods, *gap, delta, b, **extra).loc[methods[-1], "verdict"] == WORSE
            )
            near_out = run(methods, *near, delta, b, **extra)
            count[p][3] += bool((near_out["verdict"] == EQUIVALENT).any())
            var_sum[p] += pair_se(p, methods, tie, comp.study_labels()) ** 2
    true_var = float(np.var(first_diff, ddof=1))
    out = {}
    for p in procedures:
        fw, eq, power, false_eq = (float(v) / boards for v in count[p])
        out[p] = Rates(fw, eq, power, false_eq, var_sum[p] / boards / true_var, boards)
    return out


def table(result: dict[str, Rates]) -> str:
    """The Markdown table of :func:`rates`, each rate with its 95% Monte-Carlo interval."""

    def cell(x: float, n: int) -> str:
        lo, hi = wilson(x, n)
        return f"{x:.3f} [{lo:.3f}, {hi:.3f}]"

    head = (
        "| procedure | false *worse*, all tied (target 0.02–0.06) | *equivalent*, true tie "
        "(share of methods) | *worse*, 3 points behind (power) | any *equivalent*, δ + 0.5 "
        "points apart (≤ 0.05) | variance of a difference / truth |\n"
        "| --- | --- | --- | --- | --- | --- |"
    )
    rows = [
        f"| {p} | {cell(r.false_worse, r.boards)} | {r.equivalent_tie:.3f} "
        f"| {cell(r.power, r.boards)} | {cell(r.false_equivalent, r.boards)} "
        f"| {r.se_ratio:.2f} |"
        for p, r in result.items()
    ]
    return "\n".join([head, *rows])


def describe(comp: Components) -> str:
    """The fitted sizes in words (Recall@1 points)."""
    own = 100 * comp.seed_method
    return (
        f"{comp.name}: mean {100 * comp.mean:.1f}, seed shared {100 * comp.seed_shared:.2f}, "
        f"seed per method {own.min():.2f}–{own.max():.2f}, class "
        f"{100 * comp.class_effects.std():.1f}, method × class {100 * comp.class_method:.2f}, "
        f"seed × class {100 * comp.seed_class:.2f}, seed × class × method "
        f"{100 * comp.seed_class_method:.2f} (plus the binomial query noise); {comp.seeds} "
        f"seeds, {len(comp.counts)} classes, {int(comp.counts.sum())} queries"
        + (f"; {comp.studies} studies, study sd {100 * comp.study:.2f}" if comp.studies > 1 else "")
    )


def generators(root: Path, boards: Sequence[str]) -> list[Components]:
    """One generator fitted to each board in ``boards`` (folders under ``root``), the first
    one again with its methods' own seed sds 16× apart (strongly unequal), the first one
    searched by 3 studies per method whose selection luck has the own seed sd (the seeds
    nested in studies; a first board searched by several studies keeps its fitted ones),
    and those studies with one method's luck 16× the others' (a search that sometimes
    fails: the F test sees it) and 4× (one it sees about half of the time)."""
    comps = []
    for name in boards:
        records, _ = load_records(root / name)
        comps.append(fit_components(records, name))
    studies = comps[0] if comps[0].studies > 1 else comps[0].with_studies(3)
    extra = [] if studies is comps[0] else [studies]
    unstable = [studies.with_outlier(16.0), studies.with_outlier(4.0)]
    return [*comps, comps[0].unequal(16.0), *extra, *unstable]


def procedures_for(comp: Components) -> list[str]:
    """Every procedure, less those only a board of several studies tells apart."""
    return [p for p in PROCEDURES if comp.studies > 1 or p not in STUDY_ONLY]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boards", type=int, default=500, help="simulated boards per scenario")
    parser.add_argument("--root", type=Path, default=ROOT, help="the committed boards")
    parser.add_argument("--fit", nargs="+", default=list(FITTED), help="boards to fit to")
    parser.add_argument("--out", type=Path, default=None, help="also write the tables here")
    parser.add_argument(
        "--only", default="", metavar="TEXT",
        help="only the generators whose description contains TEXT (e.g. 'studies')",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if not args.root.is_dir():
        parser.exit(2, f"{args.root}: no such folder of boards\n")
    parts = [
        f"10 methods, δ = {100 * DELTA:g} points, α = {ALPHA:g}, {args.boards} boards per "
        "scenario; false *worse*, power and any *equivalent* with Wilson 95% Monte-Carlo "
        "intervals."
    ]
    for comp in [g for g in generators(args.root, args.fit) if args.only in g.name]:
        result = rates(procedures_for(comp), comp, args.boards)
        parts += [f"**{describe(comp)}.**", table(result)]
        print(parts[-2], parts[-1], sep="\n\n", flush=True)
    if args.out is not None:
        args.out.write_text("\n\n".join(parts) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
