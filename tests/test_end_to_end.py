"""End to end on a small glyphs protocol: every trained method beats the untrained network.

This is the test version of the README's `dmlbench run`: fewer classes and epochs so it runs
in about a minute, but the same code path and the same claim (trained > untrained on test
Recall@1, with a margin no initialisation accident could give).
"""

from __future__ import annotations

import pytest

from dmlbench.options import RunOptions
from dmlbench.protocol import load_protocol
from dmlbench.run import run_protocol


@pytest.mark.slow
@pytest.mark.heavy  # dmlbench check covers every method against its untrained row
def test_default_methods_beat_untrained(tmp_path) -> None:  # type: ignore[no-untyped-def]
    base = load_protocol("glyphs-mini")
    protocol = base.with_overrides(
        {"data.params.num_classes": 200, "optim.epochs": 6, "search.trials": 0}, name="glyphs-e2e"
    )
    records = run_protocol(
        protocol, list(base.methods), [0], RunOptions(results_dir=tmp_path, progress=False)
    )
    r1 = {r.method: r.metrics["recall@1"] for r in records}
    untrained = r1.pop("untrained")
    assert set(r1) == set(base.methods)
    for method, value in r1.items():
        assert value > untrained + 0.15, f"{method}: {value:.3f} vs untrained {untrained:.3f}"
