"""Every shipped protocol with a search budget gives its pruner something to act on.

A trial reports its validation score after every epoch of every fold (``folds × epochs``
reports, :func:`dmlbench.search.worker` ``_validate``); a pruner that sees a single report per
trial (poses-mini used to train one epoch) can never stop a trial, so its whole budget runs to
the end. Checked statically: the reports are counted from the protocol, and the protocol's own
pruner (:func:`make_pruner`) is shown scores without any training.
"""

from __future__ import annotations

import optuna
import pytest

from dmlbench.protocol import Protocol, builtin_names, load_protocol
from dmlbench.search.study import make_pruner

SEARCHED = [n for n in builtin_names() if load_protocol(n).search.trials > 0]


def validation_reports(protocol: Protocol) -> int:
    """Reports one trial makes when it is not pruned: one per epoch of each fold."""
    return protocol.search.validation.folds * protocol.optim.epochs


def first_pruned_report(protocol: Protocol, good: int = 4, bad: int = 4) -> int | None:
    """The earliest report (0-based step) at which the protocol's pruner stops a trial that
    scores far below ``good`` finished ones at every report; None if it never does."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    steps = validation_reports(protocol)
    study = optuna.create_study(direction="maximize", pruner=make_pruner(protocol))
    for _ in range(good):
        trial = study.ask()
        for step in range(steps):
            trial.report(0.9, step)
        study.tell(trial, 0.9)
    earliest = None
    for _ in range(bad):
        trial = study.ask()
        for step in range(steps):
            trial.report(0.1, step)
            if trial.should_prune():
                earliest = step if earliest is None else min(earliest, step)
                study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                break
        else:
            study.tell(trial, 0.1)
    return earliest


def test_every_searched_protocol_is_checked() -> None:
    assert {"glyphs-mini", "poses-mini", "mpii-pose", "cub200"} <= set(SEARCHED)


@pytest.mark.parametrize("name", SEARCHED)
def test_the_pruner_can_act_within_a_trial(name: str) -> None:
    protocol = load_protocol(name)
    if protocol.search.pruner == "none":  # explicitly no pruning: nothing to act
        return
    reports = validation_reports(protocol)
    assert reports >= 2, (
        f"{name}: {reports} validation report per trial; its {protocol.search.pruner} pruner "
        "cannot stop a trial (validate more often: more, shorter epochs via steps_per_epoch)"
    )
    step = first_pruned_report(protocol)
    assert step is not None, f"{name}: the pruner never stops a bad trial"
    assert step < reports - 1, f"{name}: the pruner stops a bad trial only at its last report"


def test_one_report_per_trial_leaves_the_pruner_idle() -> None:
    """The check can fail: one epoch on one fold (poses-mini before v2) prunes nothing."""
    one = load_protocol("poses-mini").with_overrides(
        {"optim.epochs": 1, "search.validation.folds": 1}
    )
    assert validation_reports(one) == 1
    assert first_pruned_report(one) is None
    four = one.with_overrides({"optim.epochs": 4})
    assert first_pruned_report(four) == 1  # after the median pruner's one warm-up report


def completed_trials(protocol: Protocol, trials: int = 8) -> int:
    """Trials that run to the end when every new trial scores below all earlier ones (the
    worst case for a median pruner: each later curve is below the median)."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize", pruner=make_pruner(protocol))
    for n in range(trials):
        trial, score = study.ask(), 0.9 - 0.1 * n
        for step in range(validation_reports(protocol)):
            trial.report(score, step)
            if trial.should_prune():
                study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                break
        else:
            study.tell(trial, score)
    return sum(t.state == optuna.trial.TrialState.COMPLETE for t in study.trials)


@pytest.mark.parametrize("name", ["glyphs-mini", "poses-mini"])
def test_every_search_completes_at_least_three_trials(name: str) -> None:
    """Each method's equal budget is real: with 2 start-up trials, proxy-nca and supcon
    completed 2 of their 8 (docs/tuning.md); the median pruner now waits for 3."""
    assert completed_trials(load_protocol(name)) == 3
