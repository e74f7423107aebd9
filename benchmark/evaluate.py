"""Deprecated alias of :mod:`dmlbench.metrics.retrieval` (moved in 0.2; this alias goes in 0.3)."""

from __future__ import annotations

import warnings

import dmlbench.metrics.retrieval as _moved
from dmlbench.metrics.retrieval import *  # noqa: F403

warnings.warn(
    "dmlbench.evaluate moved to dmlbench.metrics.retrieval; the old path goes in dmlbench 0.3",
    DeprecationWarning,
    stacklevel=2,
)
globals().update({k: v for k, v in vars(_moved).items() if not k.startswith("__")})
