"""Paper defaults vs tuned, paired: how much does each method owe to the tuning budget?

A protocol ``X`` and its zero-budget derivation ``X@defaults`` (every method with its paper's
hyper-parameters, :meth:`dmlbench.protocol.Protocol.without_search`) are two boards of the same
data, split, backbone and pipeline. Side by side they show what equal tuning changes: a method
that wins with its defaults and falls back once every method is tuned owed its lead to a
better-tuned default, not to its loss (Musgrave et al., ECCV 2020, on unequal tuning). The two
boards are only paired when their records were computed on the same data (equal data
fingerprints) under the same protocol version; runs with overrides are left out, as in the
comparison across data sets.

The comparison is paired. A seed fixes the initial weights, batch order and augmentation draws,
and both boards ran the same seeds (the defaults board's are a subset of the tuned board's), so
seed s of a method under defaults and seed s tuned differ *only* by the selection (its
hyper-parameters and, where the protocol selects it on validation, its epoch count), where
comparing a 3-seed mean with a 5-seed mean shows a seed-set artefact. So only the seeds both
boards share are used: per method the mean of tuned − defaults over them, its 95% interval
simultaneous over the methods (the variance of each difference from the crossed seeds × test
classes moment estimates of :mod:`dmlbench.report.verdicts`, each component counted once;
seeds only where the records carry no per-query values; the critical value from the same
fitted law, never below Šidák's) and a verdict: *tuned better* (the interval lies above
0), *tuned worse* (below 0), *equivalent* (inside the protocol's ± δ) or *undecided*. No
rank change is printed: a rank change without its uncertainty reads as a finding where two
close means swapped.

Never a zero-width interval. Where a search selected the defaults *and* the same epoch count,
the two entries' runs are bit-identical on the shared seeds and the paired difference is 0 on
every seed and query; pairing then hides, rather than removes, the chance of the selection
(another search could have picked another trial). Such a method's difference keeps both
entries' runs and the same variance model with the seeds unpaired (the two entries' seed
parts, seed × class interaction included, as if trained on independent seeds; the test classes
stay shared, as they are by design): Var = 2·Var(seed part of one entry's mean). The search's
own randomness enters where the tuned entries were searched by several studies
(``search.studies``): the shared seeds are nested in the tuned side's studies, the same
three-level model as the boards' verdicts (:mod:`dmlbench.report.moments`), and an entry
whose runs are identical keeps its study part unpaired as well.

Selection is noisy: the search scores each trial on one validation fold (a quarter of the
training classes, 50 classes on glyphs-mini), so the selected trial can be worse on the test
classes than the paper's defaults, and "tuned worse" is a possible, honest outcome.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from dmlbench.metrics import catalogue
from dmlbench.records import ProtocolRef, Record, atomic_write_text
from dmlbench.report.board import board_metric, higher_is_better
from dmlbench.report.moments import with_study_sim
from dmlbench.report.query_tests import query_sums, seed_studies
from dmlbench.report.tables import (
    BASELINES,
    Shown,
    records_frame,
    render_markdown,
    row_labels,
    to_csv,
)
from dmlbench.report.titles import equivalence_margin, search_trials
from dmlbench.report.verdicts import (
    EQUIVALENT,
    UNDECIDED,
    MeanCovariance,
    critical_value,
    crossed_moments,
    rows_floor,
    seed_moments,
)

SUFFIX = "@defaults"
ALPHA = 0.05
BETTER, WORSE = "tuned better", "tuned worse"
COLUMNS = [
    "metric", "n_shared_seeds", "defaults_mean", "tuned_mean", "difference", "lower", "upper",
    "verdict", "equivalence_margin", "resampled", "same_runs",
]  # fmt: skip
TEXT = (
    "Headline metric ({metric}), paired: per method the mean over the seeds both boards share "
    "({seeds}) under the paper defaults ({defaults}) and under the tuned protocol ({tuned}), "
    "and the difference tuned − defaults with its 95% interval, simultaneous over the methods "
    "({how}). Verdict: tuned better / tuned worse where the interval lies above / below 0, "
    "equivalent where it lies inside ±{delta} (δ, the protocol's report setting), undecided "
    "otherwise. A method marked (same runs) had its defaults selected with the same epoch "
    "count, so its runs are bit-identical on these seeds; its interval treats the two "
    "entries' seeds as unpaired (what other seeds would have given), never a zero width. The "
    "search's own chance is in an interval only where the tuned board was searched by several "
    "studies (its seeds nested in them). Selection on one validation fold ({fold}) is "
    "noisy, so tuned can come out worse than the defaults. No rank change is shown: without "
    "its uncertainty it reads as a finding."
)
log = logging.getLogger(__name__)

BoardKey = tuple[str, int, str, str]  # protocol name, version, hash, data fingerprint


def board_pairs(records: Iterable[Record]) -> list[tuple[list[Record], list[Record]]]:
    """(tuned board, defaults board) for every ``X`` / ``X@defaults`` pair on the same data.

    Boards are the final records without overrides of one protocol hash. A pair whose data
    fingerprints differ is skipped with a warning: its gaps could come from the data.
    """
    boards: dict[BoardKey, list[Record]] = defaultdict(list)
    for r in records:
        if r.stage == "final" and not r.overrides:
            key = (r.protocol.name, r.protocol.version, r.protocol.hash, r.data_fingerprint)
            boards[key].append(r)
    pairs = []
    for d in sorted(k for k in boards if k[0].endswith(SUFFIX)):
        base = d[0].removesuffix(SUFFIX)
        for t in sorted(k for k in boards if k[0] == base and k[1] == d[1]):
            if t[3] != d[3]:
                log.warning(
                    "%s and %s: computed on different data (fingerprints %s, %s); not compared",
                    t[0],
                    d[0],
                    t[3][:12],
                    d[3][:12],
                )
                continue
            pairs.append((boards[t], boards[d]))
    return pairs


def _paired_seeds(tuned: list[Record], defaults: list[Record], methods: list[str]) -> list[int]:
    """The seeds on which every method of ``methods`` has a final record on both boards."""

    def seeds(records: list[Record], m: str) -> set[int]:
        return {r.seed for r, lb in zip(records, row_labels(records), strict=True) if lb == m}

    per = [seeds(tuned, m) & seeds(defaults, m) for m in methods]
    return sorted(set.intersection(*per)) if per else []


def _difference_moments(
    tuned: list[Record], defaults: list[Record], methods: list[str], seeds: list[int], metric: str
) -> tuple[MeanCovariance, str, np.ndarray]:
    """Each method's mean over ``seeds`` of tuned − defaults and their estimated covariance
    (seeds and test classes crossed where both boards carry per-query values on the same
    queries, else seeds only), and which methods' runs are identical (module docstring: their
    seed part is unpaired)."""
    t = query_sums(tuned, metric, methods, seeds)
    d = query_sums(defaults, metric, methods, seeds)
    studies = seed_studies(tuned, seeds)  # the tuned side's studies (defaults: no search)
    if t is not None and d is not None and np.array_equal(t[1], d[1]) and t[1].size >= 2:
        mc = crossed_moments(tuple(methods), t[0] - d[0], t[1], studies)
        how, alone = "seeds and test classes", crossed_moments(tuple(methods), *t, studies)
        same = np.all(t[0] == d[0], axis=(1, 2))
    else:

        def values(records: list[Record]) -> np.ndarray:
            by = {(lb, r.seed): r.metrics[metric]
                  for r, lb in zip(records, row_labels(records), strict=True)}  # fmt: skip
            return np.array([[by[(m, s)] for s in seeds] for m in methods], dtype=np.float64)

        tv, dv = values(tuned), values(defaults)
        mc, how = seed_moments(tuple(methods), tv - dv, studies), "seeds only"
        alone = seed_moments(tuple(methods), tv, studies)
        same = np.all(tv == dv, axis=1)
    if same.any():
        mc = replace(mc, seed=_unpaired(mc.seed, alone.seed, same), seed_sim=None)
        if mc.study is not None and alone.study is not None:
            mc = with_study_sim(replace(mc, study=_unpaired(mc.study, alone.study, same)))
    return mc, how, same


def _unpaired(part: np.ndarray, alone: np.ndarray, same: np.ndarray) -> np.ndarray:
    """``part`` with the rows of ``same`` replaced by twice one entry's own part, unpaired
    (module docstring: never a zero-width interval)."""
    out = part.copy()
    out[same, :] = out[:, same] = 0.0
    out[same, same] = 2.0 * np.diag(alone)[same]
    return out


def simultaneous_intervals(
    mc: MeanCovariance, alpha: float = ALPHA
) -> tuple[np.ndarray, np.ndarray]:
    """``(lower, upper)`` per method: estimate ± c·se, se from the moment estimate of the
    variance (each component counted once) and c the 1 − α quantile of the largest
    |studentised deviation| over the methods, simulated from the means' fitted law and never
    below Šidák's t (a max-t interval: simultaneous coverage over the family without
    Bonferroni's conservatism; :func:`dmlbench.report.verdicts.critical_value`)."""
    w = np.eye(len(mc.means))
    var = mc.contrasts(w)
    c = critical_value(mc, w, alpha, floor=rows_floor(mc, w, alpha))
    half = c * np.sqrt(var)
    return mc.means - half, mc.means + half


def _verdict(lower: float, upper: float, delta: float, sign: float, equivalence: bool) -> str:
    lo, hi = sorted((sign * lower, sign * upper))  # in the "tuned better" direction
    if lo > 0:
        return BETTER
    if hi < 0:
        return WORSE
    if equivalence and lo >= -delta and hi <= delta:
        return EQUIVALENT
    return UNDECIDED


def defaults_vs_tuned(tuned: list[Record], defaults: list[Record]) -> pd.DataFrame:
    """Per method on both boards (trained methods; the untrained row is the same network on
    both): the paired difference tuned − defaults over the shared seeds, its simultaneous
    95% interval and the verdict. Sorted by the tuned mean, best first."""
    metric = board_metric(records_frame(tuned))
    empty = pd.DataFrame(columns=COLUMNS).rename_axis("method")
    if metric is None:
        return empty
    higher = higher_is_better(metric)
    tuned = [r for r in tuned if metric in r.metrics]
    defaults = [r for r in defaults if metric in r.metrics]
    both = sorted((set(row_labels(tuned)) & set(row_labels(defaults))) - set(BASELINES))
    seeds = _paired_seeds(tuned, defaults, both)
    if not both or not seeds:
        return empty
    diff, how, same = _difference_moments(tuned, defaults, both, seeds, metric)
    lower, upper = simultaneous_intervals(diff) if len(seeds) >= 2 else (diff.means, diff.means)
    if catalogue.is_percent(metric):  # a fraction's differences lie in ±1 (compare_with_best)
        lower, upper = np.maximum(lower, -1.0), np.minimum(upper, 1.0)
    delta = equivalence_margin(tuned[0].protocol)

    def mean(records: list[Record], m: str) -> float:
        return float(np.mean([r.metrics[metric]
                              for r, lb in zip(records, row_labels(records), strict=True)
                              if lb == m and r.seed in seeds]))  # fmt: skip

    sign = 1.0 if higher else -1.0
    rows = {
        m: {
            "metric": metric,
            "n_shared_seeds": len(seeds),
            "defaults_mean": mean(defaults, m),
            "tuned_mean": mean(tuned, m),
            "difference": float(diff.means[i]),
            "lower": float(lower[i]),
            "upper": float(upper[i]),
            "verdict": (
                _verdict(lower[i], upper[i], delta, sign, how != "seeds only")
                if len(seeds) >= 2
                else ""
            ),
            "equivalence_margin": delta,
            "resampled": how,
            "same_runs": bool(same[i]),
        }
        for i, m in enumerate(both)
    }
    out = pd.DataFrame.from_dict(rows, orient="index")[COLUMNS]
    out.index.name = "method"
    out.attrs["seeds"] = seeds
    return out.sort_values("tuned_mean", ascending=not higher, kind="stable")


def display(frame: pd.DataFrame) -> pd.DataFrame:
    """Display strings: means and differences in % (label distances as they are), each cell
    keeping its number (:class:`~dmlbench.report.tables.Shown`) for the page to sort by."""
    out = pd.DataFrame(index=frame.index)
    metric = str(frame["metric"].iloc[0]) if len(frame) else ""
    digits, scale = catalogue.digits(metric), catalogue.scale(metric)
    out["seeds"] = [Shown(str(int(v)), v) for v in frame["n_shared_seeds"]]
    out["defaults"] = [Shown(f"{v * scale:.{digits}f}", v) for v in frame["defaults_mean"]]
    out["tuned"] = [Shown(f"{v * scale:.{digits}f}", v) for v in frame["tuned_mean"]]
    same = frame["same_runs"] if "same_runs" in frame else [False] * len(frame)
    out["tuned − defaults (95% CI)"] = [
        Shown(
            f"{d * scale:+.{digits}f} [{lo * scale:+.{digits}f}, {hi * scale:+.{digits}f}]"
            + (" (same runs)" if sr else ""),
            d,
        )
        for d, lo, hi, sr in zip(
            frame["difference"], frame["lower"], frame["upper"], same, strict=True
        )
    ]
    out["verdict"] = [v or "—" for v in frame["verdict"]]
    return out


def pair_title(tuned: ProtocolRef, records: list[Record]) -> str:
    """``glyphs-mini v4: paper defaults (no search) vs tuned (8-trial search per method)``."""
    trials = search_trials(tuned, records)
    budget = f" ({trials}-trial search per method)" if trials else ""
    return f"{tuned.name} v{tuned.version}: paper defaults (no search) vs tuned{budget}"


def pair_text(frame: pd.DataFrame, tuned: ProtocolRef, defaults: ProtocolRef) -> str:
    """The paragraph above a pair's table: what is compared, over which seeds, and how."""
    from dmlbench.report.titles import rebuilt_protocol

    metric = str(frame["metric"].iloc[0])
    seeds = frame.attrs.get("seeds", [])
    delta = float(frame["equivalence_margin"].iloc[0])
    shown = f"{100 * delta:g} points" if catalogue.is_percent(metric) else f"{delta:g}"
    how = str(frame["resampled"].iloc[0])
    how = (
        "the shared seeds and the test classes crossed, each variance component counted once"
        if how == "seeds and test classes"
        else "over the shared seeds only: no per-query values, so the test-query component is "
        "not counted, the intervals are too narrow and no method is called equivalent"
    )
    if len(seeds) <= 3:
        how += f"; with {len(seeds)} seeds the seed variance rests on {len(seeds) - 1} degrees "
        how += "of freedom, so the verdicts are provisional"
    protocol = rebuilt_protocol(tuned.name, tuned.hash)
    fold = "a held-out share of the training classes"
    if protocol is not None:
        v = protocol.search.validation
        fold = f"{v.folds} fold{'s' if v.folds > 1 else ''}, {v.fraction:g} of the training classes"
    return TEXT.format(
        metric=metric,
        seeds=", ".join(map(str, seeds)),
        defaults=f"{defaults.name} {defaults.hash[:12]}",
        tuned=f"{tuned.name} {tuned.hash[:12]}",
        how=how,
        delta=shown,
        fold=fold,
    )


def write_defaults_vs_tuned(
    records: Iterable[Record], out_dir: Path
) -> tuple[list[Path], list[tuple[str, pd.DataFrame]]]:
    """``<X>-defaults-vs-tuned.md`` / ``.csv`` per base protocol ``X`` with a pair of boards.

    Returns the paths written and (title, display table) per pair, for the index page.
    """
    by_base: dict[str, list[tuple[str, str, pd.DataFrame]]] = defaultdict(list)
    for tuned, defaults in board_pairs(records):
        t, d = tuned[0].protocol, defaults[0].protocol
        frame = defaults_vs_tuned(tuned, defaults)
        if frame.empty:
            continue
        text = pair_text(frame, t, d)
        frame = frame.assign(tuned_hash=t.hash, defaults_hash=d.hash)
        by_base[t.name].append((pair_title(t, tuned), text, frame))
    written, shown = [], []
    for base, sections in sorted(by_base.items()):
        md = "\n".join(
            f"## {title}\n\n{text}\n\n{render_markdown(display(frame))}\n"
            for title, text, frame in sections
        )
        md_path, csv_path = (out_dir / f"{base}-defaults-vs-tuned.{x}" for x in ("md", "csv"))
        atomic_write_text(md_path, md)
        atomic_write_text(csv_path, to_csv(pd.concat([frame for _, _, frame in sections])))
        written += [md_path, csv_path]
        shown += [(title, display(frame)) for title, _, frame in sections]
    return written, shown
