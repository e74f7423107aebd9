"""dmlbench: deep metric learning methods re-run under frozen protocols with equal budgets.

The public entry points are the command line (``dmlbench --help``) and these functions:

>>> from dmlbench import load_protocol, run_protocol
>>> protocol = load_protocol("glyphs-mini")

``load_results(path)`` returns every record under a folder as a tidy DataFrame
(docs/records.md, "Results as data"); ``load_model(record)`` returns the network a final run
kept (docs/records.md, "Kept models and embeddings"), ready for inference, and
``load_index(record, gallery=None)`` that network with a gallery to ``search(images, k)``
(docs/records.md, "Nearest neighbours of new images");
``evaluate_external(protocol, embed_fn, name=..., trained_by=..., trained_on=...)`` scores a
model of one's own on a protocol's test split (docs/evaluate.md).

They are imported on first use, so ``import dmlbench`` (and ``dmlbench --version``) stays
cheap; the layout of the package is described in docs/development.md ("Layout").
"""

from __future__ import annotations

import importlib
from typing import Any

from dmlbench import simd

# Before torch or faiss is imported: one SIMD level on every x86-64 machine (dmlbench.simd).
simd.pin()

__version__ = "0.2.0.dev0"

_PUBLIC = {
    "load_protocol": "dmlbench.protocol",
    "run_protocol": "dmlbench.run",
    "RunOptions": "dmlbench.options",
    "load_model": "dmlbench.engine.inference",
    "load_index": "dmlbench.engine.neighbours",
    "load_results": "dmlbench.report.results",
    "evaluate_external": "dmlbench.engine.external",
}
__all__ = [*_PUBLIC, "__version__"]


def __getattr__(name: str) -> Any:
    if name in _PUBLIC:
        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'dmlbench' has no attribute {name!r}")
