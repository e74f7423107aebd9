"""End to end on a small glyphs protocol: every trained method beats the untrained network.

This is the test version of the README's `dmlbench run`: fewer classes and epochs so it runs
in about a minute, but the same code path and the same claim (trained > untrained on test
Recall@1, with a margin no initialisation accident could give).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dmlbench.options import RunOptions
from dmlbench.protocol import load_protocol
from dmlbench.run import run_protocol


@pytest.mark.slow
@pytest.mark.heavy  # dmlbench check covers every method against its untrained row
def test_default_methods_beat_untrained(tmp_path: Path) -> None:
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


@pytest.mark.slow
@pytest.mark.heavy  # 45 s of CI with the rendering; their boards will cover it (docs/protocols.md)
@pytest.mark.parametrize(("name", "margin"), [("emoji-mini", 0.04), ("icons-mini", 0.03)])
def test_rendered_data_sets_learn(tmp_path: Path, name: str, margin: float) -> None:
    """`dmlbench run --protocol NAME --method multi-similarity --seed 0 --no-search` beats the
    untrained network on the two data sets rendered from installed packages (measured: 19.4
    vs 13.0 on emoji-mini v3, 16.2 vs 10.5 on icons-mini v2; the margins leave room for seed
    noise, not for a method that does not learn). Skipped where the source packages are not
    installed."""
    from dmlbench.errors import DataError

    protocol = load_protocol(name).without_search()
    try:
        records = run_protocol(
            protocol, ["multi-similarity"], [0], RunOptions(results_dir=tmp_path, progress=False)
        )
    except DataError as err:  # a source package missing: the one line names the install
        pytest.skip(str(err))
    r1 = {r.method: r.metrics["recall@1"] for r in records}
    assert r1["multi-similarity"] > r1["untrained"] + margin, r1
