"""Deprecated alias of :mod:`dmlbench.metrics.continuous` (moved in 0.2; this alias goes in 0.3)."""

from __future__ import annotations

import warnings

import dmlbench.metrics.continuous as _moved
from dmlbench.metrics.continuous import *  # noqa: F403

warnings.warn(
    "dmlbench.evaluate_continuous moved to dmlbench.metrics.continuous; "
    "the old path goes in dmlbench 0.3",
    DeprecationWarning,
    stacklevel=2,
)
globals().update({k: v for k, v in vars(_moved).items() if not k.startswith("__")})
