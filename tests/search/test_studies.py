"""Several search studies per method (``search.studies``): study 0 is the one-study search,
the seeds are shared out round robin, each final trains with its own study's selection, a
record's selection replays, an interrupted run resumes the unfinished study."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dmlbench.options import RunOptions, Selection
from dmlbench.protocol import ProtocolError, load_protocol, validate_protocol
from dmlbench.records import Record, load_records, record_path
from dmlbench.run import run_protocol
from dmlbench.search.study import study_name
from tests.search.test_search import tiny


def studies(t: int, seeds: list[int], trials: int = 2) -> Any:
    return tiny(trials, **{"search.studies": t, "seeds": seeds, "optim.epochs": 1})


def trial_records(results: Path) -> list[Record]:
    return [r for r in load_records(results)[0] if r.stage == "search-trial"]


def proposals(records: list[Record], index: int) -> list[tuple[int, str]]:
    return sorted(
        (r.trial or 0, json.dumps(r.hparams, sort_keys=True))
        for r in records
        if r.study_index == index
    )


def test_the_key_keeps_every_hash_and_needs_a_seed_per_study() -> None:
    base = load_protocol("poses-mini").with_overrides({"search.studies": 1})  # seeds 0-2
    raw = base.model_dump(mode="json")
    del raw["search"]["studies"]
    assert validate_protocol(raw, source="no studies key").hash == base.hash
    three = base.with_overrides({"search.studies": 3, "seeds": list(range(12))})
    assert three.hash != base.with_overrides({"seeds": list(range(12))}).hash
    assert [three.study_of(s) for s in range(12)] == [0, 1, 2] * 4  # round robin by position
    assert three.without_search().search.studies == 1  # no search, no studies
    with pytest.raises(ProtocolError, match=r"search\.studies: 4 studies .* seeds has 3"):
        base.with_overrides({"search.studies": 4})


def test_a_record_s_study_index_round_trips_and_is_absent_with_one_study() -> None:
    one = Selection({"m": 0.1}, 3, 2, 0.5, "recall@1", "s", 8)
    assert "study_index" not in one.as_record()
    assert Selection.from_record(one.as_record()) == one
    two = Selection({"m": 0.1}, 3, 2, 0.5, "recall@1", "s-study1", 8, 1, 3)
    assert two.as_record()["study_index"] == 1
    assert Selection.from_record(two.as_record()) == two
    path = record_path(Path("r"), "p", "0" * 64, "m", 0, "search-trial", trial=3, study=1)
    assert path.name == "m-study1-trial0003-search-trial.json"


def test_each_seed_trains_with_its_own_study_s_selection(tmp_path: Path) -> None:
    """2 studies of 2 trials on seeds 0–3: study 0 proposes exactly the one-study search's
    trials under the same name rule, study 1 its own; seeds 0, 2 train with study 0's best,
    seeds 1, 3 with study 1's; a study-1 record's selection replays to the same numbers."""
    protocol = studies(2, [0, 1, 2, 3])
    run = RunOptions(results_dir=tmp_path / "two", progress=False)
    finals = [r for r in run_protocol(protocol, ["contrastive"], [0, 1, 2, 3], run)
              if r.method == "contrastive"]  # fmt: skip
    trials = trial_records(tmp_path / "two")
    assert len(trials) == 4
    assert {r.search["study"] for r in trials if r.study_index == 0} == {
        study_name(protocol, "contrastive", {})
    }
    one = tiny(2, **{"seeds": [0, 1, 2, 3], "optim.epochs": 1})
    run_protocol(
        one, ["contrastive"], [0], RunOptions(results_dir=tmp_path / "one", progress=False)
    )
    assert proposals(trials, 0) == proposals(trial_records(tmp_path / "one"), 0)
    assert proposals(trials, 1) != proposals(trials, 0)  # its own sampler seeds
    for final in finals:
        index = protocol.study_of(final.seed)
        assert final.study_index == index == final.seed % 2
        own = [r for r in trials if r.study_index == index and r.search["state"] == "complete"]
        best = max(own, key=lambda r: (r.metrics["val_recall@1"], -(r.trial or 0)))
        assert final.search["trial"] == best.trial and final.search["studies"] == 2
    replay = next(f for f in finals if f.seed == 1)
    again = run_protocol(
        protocol, ["contrastive"], [1],
        RunOptions(results_dir=tmp_path / "replay", progress=False,
                   selections={"contrastive": Selection.from_record(replay.search)}),
    )  # fmt: skip
    assert next(r for r in again if r.method == "contrastive").metrics == replay.metrics
    assert not trial_records(tmp_path / "replay")  # no search: the record's own selection


def test_an_interrupted_run_resumes_the_unfinished_study(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C in study 1's first trial: the run again leaves study 0's trials alone and
    finishes study 1."""
    import dmlbench.engine.train as train_module

    protocol = studies(2, [0, 1])
    real_train, calls = train_module.train, []

    def flaky(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 3:  # study 0: trials 0, 1; study 1: trial 0
            raise KeyboardInterrupt
        return real_train(*args, **kwargs)

    monkeypatch.setattr(train_module, "train", flaky)
    run = RunOptions(results_dir=tmp_path, progress=False)
    with pytest.raises(KeyboardInterrupt):
        run_protocol(protocol, ["contrastive"], [0, 1], run)
    before = {r.filename(): r.created for r in trial_records(tmp_path)}
    assert sorted(before) == ["contrastive-trial0000-search-trial.json",
                              "contrastive-trial0001-search-trial.json"]  # fmt: skip
    monkeypatch.setattr(train_module, "train", real_train)
    run_protocol(protocol, ["contrastive"], [0, 1], run)
    after = {r.filename(): r.created for r in trial_records(tmp_path)}
    assert len(after) == 4 and all(after[k] == v for k, v in before.items())


def test_search_runs_one_study_or_says_which_exist(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from dmlbench.cli.main import main

    protocol = tmp_path / "p.yaml"
    raw = studies(2, [0, 1]).model_dump(mode="json")
    protocol.write_text(json.dumps(raw), encoding="utf-8")
    common = ["search", "--protocol", str(protocol), "--method", "contrastive",
              "--results-dir", str(tmp_path / "r"), "--no-progress"]  # fmt: skip
    assert main([*common, "--study", "2"]) == 2
    assert "--study 2: protocol glyphs-search-test has search.studies: 2" in capsys.readouterr().err
    assert main([*common, "--study", "1"]) == 0
    assert {r.study_index for r in trial_records(tmp_path / "r")} == {1}
