"""Tolerances of the leaderboard check, derived from measured seed-to-seed spread.

``dmlbench check --update`` runs seeds 0, 1 and 2 of every entry and stores, per (protocol,
method, metric), the three values, their sample standard deviation (``ddof=1``), the
protocol's typical std of that metric (the median over its trained entries,
:func:`typical_std`) and ``tolerance = K · max(std, typical std)`` (``K = 3``). Only a metric
whose spread is exactly 0 everywhere (a count such as ``queries``) gets the absolute floor
``FLOOR`` instead, so a re-run must reproduce it.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict

from dmlbench.leaderboard.tasks import UNTRAINED

SPREAD_SEEDS = (0, 1, 2)


K = 3.0


FLOOR = 0.005


TOLERANCES = "tolerances.yaml"


RULE = (
    "tolerance = k * max(std, typical_std): std = sample std of the entry's metric over the "
    "seeds (ddof=1), typical_std = median of that std over the protocol's trained entries; "
    "floor only when both are 0"
)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Spread(_Strict):
    """One metric of one entry: its value per seed, their std, the protocol's typical std
    of that metric and the tolerance (``RULE``)."""

    values: list[float]
    std: float
    typical_std: float = 0.0
    tolerance: float

    def with_typical(self, typical: float, k: float = K, floor: float = FLOOR) -> Spread:
        wide = max(self.std, typical)
        return self.model_copy(
            update={"typical_std": typical, "tolerance": k * wide if wide > 0 else floor}
        )


class ProtocolTolerances(_Strict):
    hash: str
    data_fingerprint: str
    methods: dict[str, dict[str, Spread]]


class Tolerances(_Strict):
    """``tolerances.yaml``: how the tolerances were derived, and the tolerances."""

    seeds: list[int]
    k: float
    floor: float
    rule: str
    created: str
    machine: dict[str, Any]
    hparams: dict[str, dict[str, Any]]
    protocols: dict[str, ProtocolTolerances]


def spread(values: list[float], k: float = K, floor: float = FLOOR) -> Spread:
    """Sample std (ddof=1) of ``values`` and ``k·std``; ``floor`` only when std is exactly 0."""
    n = len(values)
    mean = sum(values) / n
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    return Spread(values=values, std=std, tolerance=k * std if std > 0 else floor)


def typical_std(spreads: dict[str, dict[str, Spread]]) -> dict[str, float]:
    """Per metric, the median over the trained entries of their seed-to-seed std.

    Three seeds give a noisy std: by chance it can come out several times smaller than the
    metric's real spread (poses-mini's triplet-dense got 0.0009 for ndcg@1, a tenth of the
    protocol's typical 0.010), which would fail a harmless change. The tolerance therefore
    never goes below ``k`` times what is typical for that metric under that protocol.
    """
    trained = {m: e for m, e in spreads.items() if m != UNTRAINED} or spreads
    metrics = {metric for entry in trained.values() for metric in entry}
    return {
        metric: statistics.median(e[metric].std for e in trained.values() if metric in e)
        for metric in sorted(metrics)
    } | {metric: 0.0 for entry in spreads.values() for metric in entry if metric not in metrics}


def load_tolerances(lb_dir: Path) -> Tolerances | None:
    path = lb_dir / TOLERANCES
    if not path.is_file():
        return None
    return Tolerances.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))
