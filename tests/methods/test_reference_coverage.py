"""Every registered method has a reference test, and that test notices when the loss changes.

A method is pinned to its paper by a test comparing the registered loss with an independent
computation: a slow loop written from the paper's equation, or pytorch-metric-learning where
the library has the same formula. :data:`REFERENCE_TESTS` declares, for every name the registry
lists (hand-written methods and catalogue entries alike), the test function that does so; a
test parametrised over method names (:data:`REFERENCE_SUITES`) declares every name it lists.
Two checks make the declaration hard to dodge:

* coverage: the declared names are exactly the registered ones (a new method, or a new
  catalogue entry, fails here until its reference test is declared; the failure lists every
  name that lacks one); the registry's on-demand resolvers (``pml:<Loss>``) are declared too;
* a canary mutation: the loss module the method builds is made to return 0.9 × its value, and
  the declared test must then fail with an ``AssertionError`` (while passing unmutated). A
  test that never calls the method's loss, or compares it with itself, cannot pass this.

A declared test is called directly with the first value of each ``parametrize`` list (it must
not need fixtures); a test with a ``name`` parameter receives the method name, so one test can
serve a whole catalogue.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any

import pytest
import torch

from dmlbench.methods import METHODS, create_method

#: method name (or resolver prefix) -> "test module::test function" in tests/methods.
REFERENCE_TESTS: dict[str, str] = {
    "angular": "test_angular::test_matches_reference_on_npair_batches",
    "binomial": "test_binomial::test_matches_reference_value_and_gradient",
    "contrastive": "test_contrastive::test_matches_reference_value_and_gradient",
    "dreml": "test_dreml::test_matches_reference_value_and_gradient",
    "lifted": "test_lifted::test_matches_reference_value_and_gradient",
    "log-ratio": "test_log_ratio::test_matches_reference_value_and_gradient",
    "margin": "test_margin::test_loss_on_the_sampled_triplets_matches_reference",
    "multi-similarity": "test_multi_similarity::test_matches_reference_value_and_gradient",
    "npairs": "test_npairs::test_matches_reference_on_npair_batches",
    "prototypical": "test_prototypical::test_matches_reference_on_pk_batches",
    "proxy-nca": "test_proxy_nca::test_matches_reference_value_and_gradient",
    "proxy-softmax": "test_proxy_softmax::test_matches_reference_value_and_gradient",
    "proxy-triplet": "test_proxy_triplet::test_matches_reference_value_and_gradient",
    "ranked-list": "test_ranked_list::test_matches_reference_value_and_gradient",
    "structured-clustering": "test_structured_clustering::test_matches_reference_value_and_gradient",
    "triplet-binary": "test_triplet_binary::test_matches_reference_value_and_gradient",
    "triplet-dense": "test_triplet_dense::test_matches_reference_value_and_gradient",
    "triplet-semihard": "test_triplet_semihard::test_matches_reference_value_and_gradient",
    # names built on demand: the adapter around the library's loss, against the library
    "pml:": "test_pml_resolver::test_loss_with_miner_passes_the_mined_tuples",
}
#: Reference tests parametrised over method names (``parametrize("name", [...])``): every
#: name in that list is declared with the test, so adding a name there is enough.
REFERENCE_SUITES = ["test_catalogue::test_matches_reference_value_and_gradient"]
#: A name a resolver builds, to run the canary of a resolver prefix with.
RESOLVER_EXAMPLES = {"pml:": "pml:ContrastiveLoss"}
CANARY_SCALE = 0.9


def resolver_prefixes() -> list[str]:
    """Prefixes of names the registry builds on demand (not listed, so declared separately)."""
    return sorted(getattr(METHODS, "_resolvers", {}))


def covered_names() -> list[str]:
    return sorted({*METHODS.list(), *resolver_prefixes()})


def load_test(spec: str) -> Callable[..., Any]:
    """The test function ``module::function`` of tests/methods."""
    module_name, _, function = spec.partition("::")
    module = importlib.import_module(f"tests.methods.{module_name}")
    test = getattr(module, function, None)
    assert callable(test), f"{spec} does not exist"
    return test


def parametrized_names(test: Callable[..., Any]) -> list[str]:
    marks = getattr(test, "pytestmark", [])
    lists = [m.args[1] for m in marks if m.name == "parametrize" and m.args[0] == "name"]
    return [str(getattr(v, "values", [v])[0]) for values in lists for v in values]


def declared() -> dict[str, str]:
    """Every declared method name (or resolver prefix) -> its reference test."""
    out = dict(REFERENCE_TESTS)
    for spec in REFERENCE_SUITES:
        for name in parametrized_names(load_test(spec)):
            out.setdefault(name, spec)
    return out


def declared_test(name: str) -> Callable[..., Any]:
    return load_test(declared()[name])


def first_arguments(test: Callable[..., Any], name: str) -> dict[str, Any]:
    """Keyword arguments for one direct call: the first case of each ``parametrize`` mark."""
    kwargs: dict[str, Any] = {}
    for mark in getattr(test, "pytestmark", []):
        if mark.name != "parametrize":
            continue
        names, values = mark.args[0], mark.args[1]
        names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
        first = values[0]
        first = getattr(first, "values", first)  # pytest.param(...)
        first = first if len(names) > 1 else (first,)
        kwargs.update(zip(names, first, strict=True))
    if "name" in inspect.signature(test).parameters:
        kwargs["name"] = name
    missing = set(inspect.signature(test).parameters) - set(kwargs)
    assert not missing, f"{name}: the reference test needs fixtures {sorted(missing)}"
    return kwargs


def loss_class(name: str) -> type[torch.nn.Module]:
    """The class of the loss module ``name`` builds (built once with paper defaults)."""
    method = create_method(name, None, num_classes=100, embedding_size=8)
    return type(method.build_loss())


def scaled_forward(cls: type[torch.nn.Module]) -> Callable[..., torch.Tensor]:
    original = cls.forward

    def forward(self: torch.nn.Module, *args: Any, **kwargs: Any) -> torch.Tensor:
        return CANARY_SCALE * original(self, *args, **kwargs)

    return forward


def test_every_registered_method_declares_a_reference_test() -> None:
    names, known = covered_names(), declared()
    missing = [n for n in names if n not in known]
    stale = sorted(set(known) - set(names))
    assert not missing, (
        f"{len(missing)} registered method(s) without a declared reference test (add each to "
        f"REFERENCE_TESTS in {__name__}, or to a suite's name list): {', '.join(missing)}"
    )
    assert not stale, f"reference tests declared for methods that are not registered: {stale}"


@pytest.mark.parametrize("name", sorted(declared()))
def test_reference_test_catches_a_scaled_loss(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Undeclared names are listed by the coverage test above, once, not here one by one."""
    test = declared_test(name)
    built = RESOLVER_EXAMPLES.get(name, name)
    kwargs = first_arguments(test, built)
    test(**kwargs)  # passes as it is
    monkeypatch.setattr(loss_class(built), "forward", scaled_forward(loss_class(built)))
    with pytest.raises(AssertionError):
        test(**kwargs)
