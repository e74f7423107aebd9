"""Deprecated alias of :mod:`dmlbench.engine.train` (moved in 0.2; this alias goes in 0.3)."""

from __future__ import annotations

import warnings

import dmlbench.engine.train as _moved
from dmlbench.engine.train import *  # noqa: F403

warnings.warn(
    "dmlbench.train moved to dmlbench.engine.train; the old path goes in dmlbench 0.3",
    DeprecationWarning,
    stacklevel=2,
)
globals().update({k: v for k, v in vars(_moved).items() if not k.startswith("__")})
