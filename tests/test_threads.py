"""The torch thread count is an option of the run, recorded, and restored afterwards.

Numbers can differ in their last bits between thread counts, and training grows those bits,
so how a run is executed (``--threads``, ``--workers``) must be explicit and recorded: a
search worker trains with its parent's count, whatever the number of workers.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch

from dmlbench.options import RunOptions, torch_threads
from dmlbench.run import run_protocol


def test_threads_are_set_for_the_run_recorded_and_restored(
    tiny_glyphs_protocol: Any, tmp_path: Path
) -> None:
    before = torch.get_num_threads()
    want = 1 if before != 1 else 2
    options = RunOptions(results_dir=tmp_path, max_steps=1, progress=False, threads=want)
    records = run_protocol(tiny_glyphs_protocol, ["contrastive"], [0], options)
    assert {r.env["torch_threads"] for r in records} == {want}
    assert torch.get_num_threads() == before


def test_no_threads_option_leaves_the_count_alone() -> None:
    before = torch.get_num_threads()
    with torch_threads(None):
        assert torch.get_num_threads() == before
    with torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before


def test_search_workers_get_the_parents_thread_count(monkeypatch: Any, tmp_path: Path) -> None:
    """``tune`` hands every spawned worker the same count, not cores / workers."""
    import dmlbench.search.tuning as sw  # where tune looks spawn_workers up
    from dmlbench.options import SearchOptions

    seen: list[int | None] = []

    def fake_spawn(protocol: Any, method: str, run: RunOptions, *rest: Any) -> list[Any]:
        seen.append(run.threads)
        raise RuntimeError("stop here")

    monkeypatch.setattr(sw, "spawn_workers", fake_spawn)
    from dmlbench.data import load_data
    from dmlbench.protocol import load_protocol
    from dmlbench.search import tune

    protocol = load_protocol("glyphs-mini").with_overrides(
        {"data.params.num_classes": 40, "search.trials": 2}
    )
    data = load_data(protocol)
    run = RunOptions(results_dir=tmp_path, max_steps=1, progress=False)
    with pytest.raises(RuntimeError, match="stop here"):
        tune(
            protocol,
            "contrastive",
            data.train,
            data.fingerprint,
            replace(run, search=SearchOptions(workers=3)),
        )
    assert seen == [torch.get_num_threads()]
