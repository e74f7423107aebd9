"""Tolerances of the leaderboard check: measured seed-to-seed spread, capped to catch 2 points.

``dmlbench check --update`` runs every board's seeds and stores, per (board, method, metric),
the values, their sample standard deviation (``ddof=1``), the board's typical std of that
metric (the median over its trained entries, :func:`typical_std`) and

    ``tolerance = min(K · max(std, typical std), CAP)``  (``K = 3``, ``CAP = 0.015``)

for every metric on a 0-1 scale (Recall@K, MAP@R, R-Precision, NMI, nDCG@K and the Recall@1
bootstrap bounds). Why both terms: on the same kind of machine a re-run at one thread is bit
identical, so a tolerance matters only when code or libraries changed; the spread term keeps a
harmless change (a library's last-bit rounding, which training grows into seed-like noise)
from failing where the spread is small, and the cap makes a change that costs any method 2
Recall@1 points (or 0.02 nDCG@10) fail where the spread is larger: three times glyphs-mini's
typical Recall@1 std is about 4 points, wide enough to let the top four methods reorder
unnoticed. The mean label distance (``mld@K``, in label units, unbounded) keeps the spread
term alone. A metric whose spread is exactly 0 everywhere (a count) gets the absolute floor
``FLOOR`` instead, so a re-run must reproduce it.
"""

from __future__ import annotations

import hashlib
import math
import statistics
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from dmlbench.errors import DmlbenchError
from dmlbench.metrics.catalogue import FAMILIES
from dmlbench.protocol import StrictModel
from dmlbench.records import is_baseline

K = 3.0


FLOOR = 0.005


CAP = 0.015
# unbounded label distances (not fractions): the spread term alone
UNCAPPED_PREFIXES = tuple(f.key for f in FAMILIES if not f.percent)


TOLERANCES = "tolerances.yaml"


RULE = (
    "tolerance = min(k * max(std, typical_std), cap): std = sample std of the entry's metric "
    "over the board's seeds (ddof=1), typical_std = median of that std over the board's trained "
    f"entries; cap for every 0-1 metric (not {', '.join(k + 'K' for k in UNCAPPED_PREFIXES)}); "
    "floor only when both stds are 0"
)


class SeedSpread(StrictModel):
    """One metric of one entry: its value per seed, their std, the protocol's typical std
    of that metric and the tolerance (``RULE``)."""

    values: list[float]
    std: float
    typical_std: float = 0.0
    tolerance: float

    def with_typical(
        self, typical: float, cap: float | None, k: float = K, floor: float = FLOOR
    ) -> SeedSpread:
        wide = max(self.std, typical)
        tolerance = k * wide if wide > 0 else floor
        if cap is not None and wide > 0:
            tolerance = min(tolerance, cap)
        return self.model_copy(update={"typical_std": typical, "tolerance": tolerance})

    def seed_noise(self, k: float = K, floor: float = FLOOR) -> SeedSpread:
        """The tolerance without the cap, ``k · max(std, typical std)``: what ``dmlbench check``
        uses off the portable numeric path (another architecture), where a re-run is not
        bit-identical and drifts by seed-like noise
        (:func:`~dmlbench.leaderboard.check.off_path`)."""
        return self.with_typical(self.typical_std, None, k, floor)


def cap_for(metric: str, cap: float = CAP) -> float | None:
    """The cap of ``metric``'s tolerance; None for the unbounded ones."""
    return None if metric.startswith(UNCAPPED_PREFIXES) else cap


class ProtocolTolerances(StrictModel):
    seeds: list[int]
    hash: str
    data_fingerprint: str
    methods: dict[str, dict[str, SeedSpread]]


class Tolerances(StrictModel):
    """``tolerances.yaml``: how the tolerances were derived, and the tolerances."""

    k: float
    floor: float
    cap: float
    rule: str
    created: str
    machine: dict[str, Any]
    hparams: dict[str, dict[str, Any]]
    protocols: dict[str, ProtocolTolerances]
    #: SHA-256 of every committed record, by its path under the leaderboard folder: the check
    #: compares re-runs with the committed records, so a record edited by hand must be caught
    #: before it is trusted (:func:`verify_checksums`).
    checksums: dict[str, str]


def spread(values: list[float], k: float = K, floor: float = FLOOR) -> SeedSpread:
    """Sample std (ddof=1) of ``values`` and ``k·std``; ``floor`` only when std is exactly 0."""
    n = len(values)
    mean = sum(values) / n
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    return SeedSpread(values=values, std=std, tolerance=k * std if std > 0 else floor)


def typical_std(spreads: dict[str, dict[str, SeedSpread]]) -> dict[str, float]:
    """Per metric, the median over the trained entries of their seed-to-seed std.

    Three seeds give a noisy std: by chance it can come out several times smaller than the
    metric's real spread (poses-mini's triplet-dense got 0.0009 for ndcg@1, a tenth of the
    protocol's typical 0.010), which would fail a harmless change. The tolerance therefore
    never goes below ``k`` times what is typical for that metric under that protocol.
    """
    trained = {m: e for m, e in spreads.items() if not is_baseline(m)} or spreads
    metrics = {metric for entry in trained.values() for metric in entry}
    return {
        metric: statistics.median(e[metric].std for e in trained.values() if metric in e)
        for metric in sorted(metrics)
    } | {metric: 0.0 for entry in spreads.values() for metric in entry if metric not in metrics}


def load_tolerances(lb_dir: Path) -> Tolerances | None:
    """The leaderboard's tolerances; None when the file is absent.

    Raises:
        DmlbenchError: the file is damaged (not UTF-8, not YAML, a tag, a wrong field): one
            line, exit 2, never exit 1, which means "a metric moved".
    """
    path = lb_dir / TOLERANCES
    if not path.is_file():
        return None
    try:
        return Tolerances.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError, yaml.YAMLError, ValidationError) as err:
        what = (
            f"{err.error_count()} invalid field(s)"
            if isinstance(err, ValidationError)
            else (type(err).__name__)
        )
        raise DmlbenchError(
            f"{path}: damaged ({what}); restore it (git checkout -- {path}) or regenerate the "
            "leaderboard (dmlbench check --update)"
        ) from None


def record_checksums(lb_dir: Path, folders: list[str]) -> dict[str, str]:
    """SHA-256 of every record (``*.json``) under ``folders`` of ``lb_dir``, by relative path.

    External records (``<model>-seed<N>-external.json``, ``dmlbench evaluate``) are left out:
    the check neither re-runs nor compares a model trained elsewhere, so one may sit on a
    board without being taken for a hand-edited run."""
    out = {}
    for folder in sorted(folders):
        for path in sorted((lb_dir / folder).rglob("*.json")):
            if path.name.endswith("-external.json"):
                continue
            key = path.relative_to(lb_dir).as_posix()
            out[key] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def verify_checksums(lb_dir: Path, tolerances: Tolerances) -> None:
    """Refuse a committed board whose records differ from the ones ``--update`` wrote.

    Raises:
        DmlbenchError: a record was edited, added or removed by hand (one line naming it).
    """
    now = record_checksums(lb_dir, sorted(tolerances.protocols))
    for key in sorted(set(now) | set(tolerances.checksums)):
        if now.get(key) != tolerances.checksums.get(key):
            change = (
                "is not in" if key not in tolerances.checksums
                else "is missing but listed in" if key not in now
                else "differs from its checksum in"
            )  # fmt: skip
            raise DmlbenchError(
                f"{lb_dir / key}: {change} {TOLERANCES}: the committed leaderboard was changed "
                "by hand; restore it from git or regenerate it (dmlbench check --update)"
            )
