"""Mutation check: each term of each hand-written loss, changed, fails its reference test.

A reference test that passes is only worth as much as the changes it would notice. For every
own loss (written here, not wrapping pytorch-metric-learning's formula), :data:`MUTATIONS`
lists small source edits of the kind a slip makes: a term scaled by 0.7 (positive or negative
part), a margin changed, a square dropped, a mean taken over the wrong set, a selection rule
swapped (hardest instead of semi-hard). Each mutant is built by editing the method module's
source text (the edited text must occur exactly once, so the table fails loudly when the code
moves), executing it as a fresh module, and substituting it for the method in the registry and
in the test module's namespace. The method's declared reference test (see
``test_reference_coverage.REFERENCE_TESTS``, plus :data:`EXTRA_TESTS`) then runs over all its
parameter sets, and at least one of them must fail with an ``AssertionError``. The unmutated copy, run through the same
machinery, must pass and must be the code that ran (its forward is counted), so a broken
substitution cannot pass for a caught mutant.

``python -m tests.methods.test_mutations --out reports/mutations.md`` writes the
tried / caught table.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import itertools
import sys
import types
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import torch

import dmlbench.methods._base as base
from dmlbench.methods import METHODS
from tests.methods.test_reference_coverage import declared_test

pytestmark = [pytest.mark.slow, pytest.mark.heavy]  # about two minutes on one core

Mutation = tuple[str, str, str]  # (what it models, text in the source, its replacement)

MUTATIONS: dict[str, list[Mutation]] = {
    "contrastive": [
        ("positive term ×0.7", "same * dij.pow(2)", "0.7 * same * dij.pow(2)"),
        ("negative term ×0.7", "(1.0 - same) * torch.relu", "0.7 * (1.0 - same) * torch.relu"),
        ("margin ×0.9", "torch.relu(self.margin - dij)", "torch.relu(0.9 * self.margin - dij)"),
        ("positive term unsquared", "same * dij.pow(2)", "same * dij"),
        ("negative hinge unsquared", "self.margin - dij).pow(2)", "self.margin - dij)"),
        ("factor ½ dropped", "return 0.5 * loss.mean()", "return loss.mean()"),
    ],
    "triplet-semihard": [
        ("margin ×0.9", "d_ap - d[a, n] + self.margin", "d_ap - d[a, n] + 0.9 * self.margin"),
        (
            "positive distance ×0.7",
            "d_ap - d[a, n] + self.margin",
            "0.7 * d_ap - d[a, n] + self.margin",
        ),
        (
            "negative distance ×0.7",
            "d_ap - d[a, n] + self.margin",
            "d_ap - 0.7 * d[a, n] + self.margin",
        ),
        (
            "hardest negative instead of semi-hard",
            "torch.where(farther, d_an, inf).argmin(dim=1)",
            "torch.where(neg_an, d_an, inf).argmin(dim=1)",
        ),
        (
            "closest instead of farthest negative when none is semi-hard",
            "torch.where(neg_an, d_an, -inf).argmax(dim=1)",
            "torch.where(neg_an, d_an, inf).argmin(dim=1)",
        ),
        (
            "mean over the batch, not the pairs",
            "+ self.margin).mean()",
            "+ self.margin).sum() / len(d)",
        ),
    ],
    "lifted": [
        ("margin ×0.9", "(self.margin - d)", "(0.9 * self.margin - d)"),
        ("positive distance ×0.7", "s[None, :]) + d", "s[None, :]) + 0.7 * d"),
        ("negative sum ×0.7", ".logsumexp(dim=1)", ".logsumexp(dim=1) - 0.35667494393873245"),
        (
            "one end's negatives only",
            "torch.logaddexp(s[:, None], s[None, :])",
            "(s[:, None] + 0.0 * s[None, :])",
        ),
        ("hinge unsquared", "torch.relu(big_j[pos]).pow(2)", "torch.relu(big_j[pos])"),
        ("factor ½ dropped", ".pow(2).mean() / 2", ".pow(2).mean()"),
    ],
    "binomial": [
        ("positive term ×0.7", "pos_terms = torch.where(", "pos_terms = 0.7 * torch.where("),
        ("negative term ×0.7", "neg_terms = torch.where(", "neg_terms = 0.7 * torch.where("),
        ("negative margin γ ×0.9", "(s - self.gamma)", "(s - 0.9 * self.gamma)"),
        (
            "positive scale α ×0.7",
            "self.alpha * (self.gamma - s)",
            "0.7 * self.alpha * (self.gamma - s)",
        ),
        (
            "mean over anchors, not sum",
            "(pos_mean + neg_mean).sum()",
            "(pos_mean + neg_mean).mean()",
        ),
    ],
    "npairs": [
        ("negative similarities ×0.7", "logits = sim[a_idx] -", "logits = 0.7 * sim[a_idx] -"),
        (
            "positive similarity ×0.7",
            "- sim[a_idx, p_idx][:, None]",
            "- 0.7 * sim[a_idx, p_idx][:, None]",
        ),
        ("regulariser ×2", "reg = 0.25 * self.l2_reg", "reg = 0.5 * self.l2_reg"),
        ("the 1 + inside the log dropped", "torch.cat([one, logits], dim=1)", "logits"),
    ],
    "prototypical": [
        ("distances ×0.7", "F.cross_entropy(-d,", "F.cross_entropy(-0.7 * d,"),
        (
            "prototype over one more",
            "/ member.sum(dim=1, keepdim=True)",
            "/ (member.sum(dim=1, keepdim=True) + 1)",
        ),
        (
            "one more support image",
            "support = rank < self.n_support",
            "support = rank <= self.n_support",
        ),
    ],
    "ranked-list": [
        (
            "positive term ×0.7",
            "d - (self.alpha - self.margin), zero",
            "0.7 * (d - (self.alpha - self.margin)), zero",
        ),
        ("negative term ×0.7", "loss_p + self.lam * loss_n", "loss_p + 0.7 * self.lam * loss_n"),
        ("negative boundary α ×0.9", "neg & (d < self.alpha)", "neg & (d < 0.9 * self.alpha)"),
        (
            "temperature ×0.7",
            "(self.temperature * (self.alpha - d))",
            "(0.7 * self.temperature * (self.alpha - d))",
        ),
    ],
    "log-ratio": [
        ("embedding log-distance ×0.7", "log_df = 0.5 * torch.log(", "log_df = 0.35 * torch.log("),
        (
            "label log-ratio ×0.7",
            "- (log_dy[:, None] - log_dy[None, :])",
            "- 0.7 * (log_dy[:, None] - log_dy[None, :])",
        ),
        ("absolute instead of squared residual", "residual[mask].pow(2)", "residual[mask].abs()"),
    ],
    "triplet-binary": [
        ("margin ×0.9", "pml_triplet_loss(margin)", "pml_triplet_loss(0.9 * margin)"),
        (
            "one negative fewer",
            "torch.arange(self.positives + 1, n,",
            "torch.arange(self.positives + 2, n,",
        ),
        (
            "one positive fewer",
            "torch.arange(1, self.positives + 1,",
            "torch.arange(1, self.positives,",
        ),
    ],
    "structured-clustering": [
        (
            "NMI term ×0.7 in the loss",
            "score_pred + self.gamma * (1.0 - nmi)",
            "score_pred + 0.7 * self.gamma * (1.0 - nmi)",
        ),
        ("oracle score ×0.7", "- score_gt)", "- 0.7 * score_gt)"),
        ("predicted score ×0.7", "score_pred = -d[:, chosen]", "score_pred = -0.7 * d[:, chosen]"),
        (
            "NMI term ×0.7 in the greedy score",
            "+ gamma * (1.0 - nmi)",
            "+ 0.7 * gamma * (1.0 - nmi)",
        ),
        (
            "new cluster's joint counts ×0.7",
            "+ values[bounds[2] :].sum(dim=0)",
            "+ 0.7 * values[bounds[2] :].sum(dim=0)",
        ),
        (
            "new cluster left out of H(g)",
            " + xlogx[counts[bounds[2] :].sum(dim=0)]",
            "",
        ),
    ],
}
#: Further reference comparisons run against the mutants of a method (besides its declared
#: test): the greedy inference of structured-clustering is checked step by step against a loop
#: with scikit-learn's NMI, which the end-to-end loss comparison on 12 points may not reach.
EXTRA_TESTS: dict[str, list[str]] = {
    "structured-clustering": [
        "test_vectorised_greedy_equals_the_explicit_partitions",
        "test_each_greedy_step_is_the_best_single_addition",
    ],
}


def method_module(name: str) -> types.ModuleType:
    return importlib.import_module(METHODS.get(name).__module__)


def mutant_source(name: str, old: str, new: str) -> str:
    source = inspect.getsource(method_module(name))
    count = source.count(old)
    assert count == 1, f"{name}: {old!r} occurs {count} times in its source (update MUTATIONS)"
    return source.replace(old, new)


def counted(cls: type[torch.nn.Module], calls: list[int]) -> Callable[..., Any]:
    forward = cls.forward

    def wrapper(self: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return forward(self, *args, **kwargs)

    return wrapper


def execute(name: str, source: str, mp: pytest.MonkeyPatch) -> types.ModuleType:
    """``source`` run as a fresh module; what it registers goes into ``module.REGISTERED``."""
    original = method_module(name)
    module = types.ModuleType(f"{original.__name__}__mutant")
    mp.setitem(sys.modules, module.__name__, module)
    registered: dict[str, type[base.Method]] = {}

    def register(method_name: str) -> Callable[[type[Any]], type[Any]]:
        def decorator(cls: type[Any]) -> type[Any]:
            cls.name = method_name
            registered[method_name] = cls
            return cls

        return decorator

    mp.setattr(base, "register_method", register)
    exec(compile(source, original.__file__ or name, "exec"), module.__dict__)
    module.REGISTERED = registered  # type: ignore[attr-defined]
    return module


def substitute(
    name: str, source: str, test: Callable[..., Any], mp: pytest.MonkeyPatch
) -> list[int]:
    """Run ``source`` as the method's module; point the registry and the test module at it.

    Returns a list that grows by one at every forward call of the substituted loss classes.
    """
    original = method_module(name)
    module = execute(name, source, mp)
    calls: list[int] = []
    for value in vars(module).values():
        own = getattr(value, "__module__", None) == module.__name__
        if own and inspect.isclass(value) and issubclass(value, torch.nn.Module):
            mp.setattr(value, "forward", counted(value, calls))
    registered, get = module.REGISTERED, METHODS.get
    mp.setattr(METHODS, "get", lambda n: registered[n] if n in registered else get(n))
    test_module = sys.modules[test.__module__]
    for attr, value in vars(test_module).items():
        if getattr(value, "__module__", None) == original.__name__ and hasattr(module, attr):
            mp.setattr(test_module, attr, getattr(module, attr))
    return calls


def argument_sets(test: Callable[..., Any]) -> Iterator[dict[str, Any]]:
    """Every combination of the test's ``parametrize`` lists."""
    axes: list[list[dict[str, Any]]] = []
    for mark in getattr(test, "pytestmark", []):
        if mark.name != "parametrize":
            continue
        names = mark.args[0]
        names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
        cases = []
        for value in mark.args[1]:
            value = getattr(value, "values", value)
            value = value if len(names) > 1 else (value,)
            cases.append(dict(zip(names, value, strict=True)))
        axes.append(cases)
    for combo in itertools.product(*axes):
        yield {k: v for case in combo for k, v in case.items()}


def reference_tests(name: str) -> list[Callable[..., Any]]:
    test = declared_test(name)
    module = sys.modules[test.__module__]
    return [test, *(getattr(module, extra) for extra in EXTRA_TESTS.get(name, []))]


def run_reference(name: str, source: str) -> tuple[bool, int]:
    """(did a reference test fail with an AssertionError, forward calls seen)."""
    tests = reference_tests(name)
    with pytest.MonkeyPatch.context() as mp:
        calls = substitute(name, source, tests[0], mp)
        for test in tests:
            for kwargs in argument_sets(test):
                try:
                    test(**kwargs)
                except AssertionError:
                    return True, len(calls)
    return False, len(calls)


CASES = [(name, i) for name, table in MUTATIONS.items() for i in range(len(table))]


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_unmutated_copy_passes_and_is_what_runs(name: str) -> None:
    failed, calls = run_reference(name, inspect.getsource(method_module(name)))
    assert not failed and calls > 0


@pytest.mark.parametrize(("name", "index"), CASES, ids=[f"{n}-{i}" for n, i in CASES])
def test_reference_test_catches_the_mutation(name: str, index: int) -> None:
    what, old, new = MUTATIONS[name][index]
    caught, calls = run_reference(name, mutant_source(name, old, new))
    assert calls > 0, f"{name}: the mutant never ran"
    assert caught, f"{name}: '{what}' ({old!r} → {new!r}) passes its reference test"


def report() -> str:
    lines = [
        "# Mutation check of the hand-written losses",
        "",
        "Generated by `python -m tests.methods.test_mutations --out reports/mutations.md`; "
        "each mutant is one source edit of the method module, run against the method's "
        "declared reference test and any extra reference comparison (all parameter sets).",
        "",
        "| method | reference test | mutation | caught |",
        "| --- | --- | --- | --- |",
    ]
    tried = caught_total = 0
    for name in sorted(MUTATIONS):
        for what, old, new in MUTATIONS[name]:
            caught, _ = run_reference(name, mutant_source(name, old, new))
            tried += 1
            caught_total += caught
            tests = ", ".join(f"`{t.__name__}`" for t in reference_tests(name))
            lines.append(f"| {name} | {tests} | {what} | {'yes' if caught else 'NO'} |")
    methods = len(MUTATIONS)
    lines[1:1] = ["", f"**{caught_total} of {tried} mutations caught** ({methods} losses)."]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    text = report()
    if args.out is not None:
        args.out.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
