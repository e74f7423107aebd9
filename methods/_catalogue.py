"""The declared catalogue: cited pytorch-metric-learning losses registered under readable names.

Why one declarative table (three family modules: ``catalogue_proxy``, ``catalogue_pair``,
``catalogue_ranking``) rather than one module per method: the ~24 entries are data (a citation,
defaults with their source, a search space, samples per class, a learning-rate multiplier)
around one shared adapter. Twenty-four near-identical 40-line modules would hide the differences
a reviewer must check; a table grouped by family shows them side by side, and the few entries
whose formulation needs code (SoftTriple's centre regulariser, Manifold's class proxies, the
tuplet-margin + intra-pair-variance sum) keep that code beside their entry.

An entry's ``defaults`` are constructor arguments of the library class, plus the
learning-rate multiplier ``proxy_lr_mult`` when the loss owns learnable parameters (their
learning rate is ``lr × proxy_lr_mult``, see :meth:`Method.param_groups`), plus any key the
entry's ``build`` consumes itself (``extra``). ``defaults_source`` states where each value comes
from, including the multiplier; "PML default" means pytorch-metric-learning's documented default
is the only source.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pytorch_metric_learning import losses
from torch import nn

from dmlbench.methods._base import LR_MULT_KEY, HParams, Method, register_method
from dmlbench.methods._library import CITATIONS, PMLLoss, protocol_kwargs


@dataclass(frozen=True)
class Float:
    """A float searched over [lo, hi] (log-uniform unless ``log=False``)."""

    lo: float
    hi: float
    log: bool = True


@dataclass(frozen=True)
class Choice:
    """A categorical choice."""

    choices: tuple[Any, ...]


Space = dict[str, Float | Choice]
SPC = Choice((2, 4, 8))  # samples per class, tuned for every entry


@dataclass(frozen=True)
class CatalogueEntry:
    """One catalogue entry (see the module docstring for the meaning of each field)."""

    name: str
    pml: str
    paper: str
    defaults: HParams
    defaults_source: str
    space: Space
    samples_per_class: int = 4
    extra: tuple[str, ...] = ()
    build: Callable[[nn.Module, HParams], nn.Module] | None = None
    pml_kwargs: Callable[[int, int], dict[str, Any]] | None = None
    loss_cls: type[nn.Module] | None = None  # a fixed subclass of the library class
    docs: str = field(default="")

    def library_class(self) -> type[nn.Module]:
        return self.loss_cls or getattr(losses, self.pml)


def suggest(trial: Any, space: Space) -> HParams:
    out: HParams = {}
    for key, dist in space.items():
        if isinstance(dist, Float):
            out[key] = trial.suggest_float(key, dist.lo, dist.hi, log=dist.log)
        else:
            out[key] = trial.suggest_categorical(key, list(dist.choices))
    return out


class CatalogueMethod(Method):
    """A catalogue entry as a method; :func:`register_entry` sets ``entry``."""

    entry: CatalogueEntry

    def loss_kwargs(self) -> dict[str, Any]:
        """Constructor arguments: the protocol's (classes, width) and the entry's own."""
        e = self.entry
        cls = e.library_class()
        skip = {LR_MULT_KEY, "samples_per_class", *e.extra}
        own = {k: v for k, v in self.hparams.items() if k not in skip}
        if e.pml_kwargs is not None:
            fixed = e.pml_kwargs(self.num_classes, self.embedding_size)
        else:
            fixed = protocol_kwargs(cls, self.num_classes, self.embedding_size)
        return {**fixed, **own}

    def build_loss(self) -> nn.Module:
        loss = self.entry.library_class()(**self.loss_kwargs())
        if self.entry.build is not None:
            return self.entry.build(loss, self.hparams)
        return PMLLoss(loss)

    @classmethod
    def search_space(cls, trial: Any) -> HParams:
        return suggest(trial, cls.entry.space)


def register_entry(entry: CatalogueEntry) -> type[Method]:
    """Register ``entry`` under its readable name (and remember its citation)."""
    for key in entry.space:
        if key not in entry.defaults and key != "samples_per_class":
            raise ValueError(f"{entry.name}: searched key {key!r} has no default")
    CITATIONS.setdefault(entry.pml, entry.paper)
    attrs: dict[str, Any] = {
        "entry": entry,
        "paper": entry.paper,
        "defaults": dict(entry.defaults),
        "defaults_source": entry.defaults_source,
        "samples_per_class": entry.samples_per_class,
        "lr_mult_key": LR_MULT_KEY if LR_MULT_KEY in entry.defaults else None,
        "__doc__": entry.docs or f"{entry.paper} (pytorch-metric-learning {entry.pml}).",
        "__module__": entry.build.__module__ if entry.build else __name__,
    }
    cls = type(entry.pml.removesuffix("Loss") + "Method", (CatalogueMethod,), attrs)
    return register_method(entry.name)(cls)
