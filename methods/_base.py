"""What a method is: a loss (with any parameters it owns), its batch needs, defaults, search space.

A method module subclasses :class:`Method`, sets the class attributes and implements
:meth:`Method.build_loss`; the trainer owns everything else (batching, optimisation, logging),
as pytorch-metric-learning's ``BaseMetricLossFunction`` owns reduction and leaves
``compute_loss`` to subclasses.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar

import numpy as np
from torch import nn

from dmlbench.errors import DmlbenchError, Registry
from dmlbench.protocol import NAME_PATTERN

if TYPE_CHECKING:
    import optuna

    from dmlbench.data.base import Split
    from dmlbench.protocol import Protocol

#: The one name of the learning-rate multiplier of a loss's learnable parameters (proxies,
#: class weights), for hand-written, catalogue and ``pml:`` methods alike, so that
#: ``--hparam proxy_lr_mult=10`` means the same on every method that has one. Margin's β keeps
#: its paper's name (``beta_lr_mult``): it is one scalar, not a proxy per class.
LR_MULT_KEY = "proxy_lr_mult"

HParams = dict[str, Any]


class Method:
    """Base class of every registered method.

    Class attributes:
        name: the registry name (set by :func:`register_method`).
        paper: short citation, e.g. ``"Schroff et al., CVPR 2015"``.
        defaults: the paper's hyper-parameters; ``defaults_source`` says where they are from.
        label_kind: ``class`` for class labels, ``continuous`` for label vectors.
        samples_per_class: default images per class in a batch (``samples_per_class`` in the
            hyper-parameters overrides it; the protocol's ``batch.samples_per_class`` wins);
            the protocol's batch size must be a multiple of it (:meth:`check_batch`).
        feature_layer_norm: the method's model standardises features before the head.
        lr_mult_key: the hyper-parameter whose value multiplies the protocol's learning rate
            for the loss's own learnable parameters (proxies, margin's β). Its default must
            come from the paper or its authors' code and be cited in ``defaults_source``: at
            the backbone's rate, such parameters barely move under the real protocols (Adam
            at 1e-5), and a proxy method would train against its random initial proxies.

    Args:
        hparams: overrides of ``defaults`` (unknown keys are errors).
        num_classes: number of training classes (proxy methods own one proxy per class).
        embedding_size: width of the embedding.
    """

    name: ClassVar[str] = ""
    paper: ClassVar[str] = ""
    defaults: ClassVar[HParams] = {}
    defaults_source: ClassVar[str] = ""
    label_kind: ClassVar[Literal["class", "continuous"]] = "class"
    samples_per_class: ClassVar[int] = 4
    feature_layer_norm: ClassVar[bool] = False
    lr_mult_key: ClassVar[str | None] = None

    def __init__(self, hparams: HParams | None, num_classes: int, embedding_size: int) -> None:
        hparams = dict(hparams or {})
        allowed = {*self.defaults, "samples_per_class"}
        unknown = sorted(set(hparams) - allowed)
        if unknown:
            raise DmlbenchError(
                f"method {self.name}: unknown hyper-parameter(s) {unknown}; "
                f"known: {sorted(allowed)}"
            )
        self.hparams: HParams = {
            **self.defaults,
            "samples_per_class": self.samples_per_class,
            **hparams,
        }
        self.num_classes = num_classes
        self.embedding_size = embedding_size

    def build_loss(self) -> nn.Module:
        """The loss module: ``loss(embeddings (B, d), labels (B,)) -> scalar``."""
        raise NotImplementedError

    @classmethod
    def search_space(cls, trial: optuna.Trial) -> HParams:
        """Hyper-parameters the papers tune, sampled from ``trial``; defaults are enqueued first."""
        return {}

    @classmethod
    def hparam_problem(cls, name: str, value: Any) -> str | None:
        """Why ``value`` cannot be hyper-parameter ``name`` (``None`` when it can).

        The type is the default's (a float also takes an int, never a bool); the range is the
        sign the search space implies (a space starting above 0 needs a positive value, one
        starting at 0 a non-negative one): ``alpha=abc`` or ``alpha=-5`` fails here, with the
        other command-line errors, not inside the loss after the data is loaded.
        """
        default = cls.samples_per_class if name == "samples_per_class" else cls.defaults[name]
        kinds: tuple[type, ...] = (int, float) if isinstance(default, float) else (type(default),)
        if isinstance(value, bool) != isinstance(default, bool) or not isinstance(value, kinds):
            return f"expected {type(default).__name__} like the default {default!r}, got {value!r}"
        if isinstance(value, float) and not math.isfinite(value):
            return f"{value} is not finite"
        low = search_lower_bounds(cls).get(name)
        if name == "samples_per_class":
            low = max(low or 1, 1)
        if low is not None and not isinstance(value, bool) and isinstance(value, int | float):
            if low > 0 and value <= 0:
                return f"must be > 0 (the search space starts at {low})"
            if low >= 0 and value < 0:
                return f"must be >= 0 (the search space starts at {low})"
        return None

    @classmethod
    def check_batch(
        cls, batch_size: int, samples_per_class: int | None, hparams: HParams | None = None
    ) -> None:
        """Refuse a P×K batch that cannot fill the protocol's batch size exactly.

        Batch size is one of the conditions shown to move DML results (Fehervari et al. 2019,
        Figure 2), so it is never rounded down to a multiple of the samples per class: the
        protocol's ``batch.samples_per_class`` wins, then a fixed hyper-parameter, then the
        method's default, and the batch size must be a multiple of it. Methods with their own
        samplers (continuous labels) fill the batch exactly by construction.
        """
        if cls.label_kind != "class":
            return
        given = (hparams or {}).get("samples_per_class")
        if samples_per_class is not None and given is not None and given != samples_per_class:
            raise DmlbenchError(
                f"method {cls.name}: samples_per_class {given!r} given, but the protocol fixes "
                f"batch.samples_per_class at {samples_per_class}: drop the override, or use a "
                "protocol that leaves it to the method (batch.samples_per_class: null)"
            )
        m = samples_per_class or given or cls.samples_per_class
        if isinstance(m, bool) or not isinstance(m, int) or m < 1 or batch_size % m:
            raise DmlbenchError(
                f"method {cls.name}: batch.size {batch_size} is not a multiple of "
                f"samples_per_class {m!r}; every method trains on the protocol's exact batch "
                "size: set batch.samples_per_class or choose a batch size it divides"
            )

    @classmethod
    def fill_batch_defaults(cls, hparams: HParams, samples_per_class: int | None) -> HParams:
        """``hparams`` with the defaults that depend on the protocol's images per class filled in.

        A paper's default can be tied to its own batch composition (prototypical's 5 shots of
        10 images per class); when a protocol fixes ``batch.samples_per_class`` (``None``: each
        method chooses), such a default is restated for that batch here, where the method is
        built, so the record names the value that trained. Values already given are kept.
        """
        return hparams

    @classmethod
    def resolved_hparams(cls, given: HParams, samples_per_class: int | None) -> HParams:
        """Every hyper-parameter a run with ``given`` overrides trains with, under a protocol
        whose ``batch.samples_per_class`` is ``samples_per_class``: what its record names.

        A protocol that fixes the images per class overrides the method's own choice, so the
        record names the protocol's value, the one its batches were drawn with.
        """
        resolved = {
            **cls.defaults,
            "samples_per_class": cls.samples_per_class,
            **cls.fill_batch_defaults(dict(given), samples_per_class),
        }
        if samples_per_class is not None and cls.label_kind == "class":
            resolved["samples_per_class"] = samples_per_class
        return resolved

    def batch_sampler(
        self, split: Split, batch_size: int, samples_per_class: int | None, seed: int
    ) -> Any:
        """The batch sampler for training; class-balanced P×K by default."""
        from dmlbench.data.samplers import ClassBalancedBatchSampler

        m = samples_per_class or int(self.hparams["samples_per_class"])
        return ClassBalancedBatchSampler(np.asarray(split.labels), batch_size, m, seed)

    def build_model(self, protocol: Protocol, in_channels: int) -> nn.Module | None:
        """A model of the method's own (DREML's ensemble), or ``None`` for the protocol's.

        Called after seeding; a custom model must map images to (B, d) embeddings.
        """
        return None

    def param_groups(self, loss: nn.Module, lr: float) -> list[dict[str, Any]]:
        """Optimizer groups for the loss's own parameters (proxies may learn faster)."""
        params = [p for p in loss.parameters() if p.requires_grad]
        if not params:
            return []
        mult = float(self.hparams[self.lr_mult_key]) if self.lr_mult_key else 1.0
        return [{"params": params, "lr": lr * mult}]


class _BoundsProbe:
    """A stand-in Optuna trial that records each numeric suggestion's lower bound."""

    def __init__(self) -> None:
        self.low: dict[str, float] = {}

    def suggest_float(self, name: str, low: float, high: float, **_: Any) -> float:
        self.low[name] = low
        return low

    def suggest_int(self, name: str, low: int, high: int, **_: Any) -> int:
        self.low[name] = low
        return low

    def suggest_categorical(self, name: str, choices: Any) -> Any:
        numbers = [c for c in choices if isinstance(c, int | float) and not isinstance(c, bool)]
        if numbers:
            self.low[name] = min(numbers)
        return next(iter(choices))


def search_lower_bounds(cls: type[Method]) -> dict[str, float]:
    """The lowest value the method's search space can propose, per hyper-parameter."""
    probe = _BoundsProbe()
    try:
        cls.search_space(probe)  # type: ignore[arg-type]  # duck-typed trial
    except Exception:  # a plugin's space that needs a real trial: no bounds, no check
        return {}
    return probe.low


METHODS: Registry[type[Method]] = Registry("method")
M = TypeVar("M", bound=Method)


def register_method(name: str) -> Callable[[type[M]], type[M]]:
    """Class decorator: ``@register_method("multi-similarity")``."""

    def decorator(cls: type[M]) -> type[M]:
        if not cls.paper:
            raise ValueError(f"method {name} must cite its paper")
        if re.fullmatch(NAME_PATTERN, name) is None:  # it names record files and table rows
            raise ValueError(
                f"method name {name!r} must be a slug (letters, digits and . _ - @ = + :, "
                "starting with a letter or digit): it names the record's file"
            )
        cls.name = name
        METHODS.add(name, cls)
        return cls

    return decorator


def create_method(
    name: str, hparams: HParams | None, num_classes: int, embedding_size: int
) -> Method:
    """Instantiate a registered method; ``None`` overrides are dropped (timm's factory rule)."""
    clean = {k: v for k, v in (hparams or {}).items() if v is not None}
    return METHODS.get(name)(clean, num_classes, embedding_size)


def method_for(protocol: Protocol, name: str, hparams: HParams | None, num_classes: int) -> Method:
    """The method as a protocol's run builds it: its embedding size is the protocol's.

    The one place runs, search trials, preflight checks and kept models build a method, so
    none of them can hand a method another width than the network it trains.
    """
    given = {k: v for k, v in (hparams or {}).items() if v is not None}
    resolved = METHODS.get(name).resolved_hparams(given, protocol.batch.samples_per_class)
    return create_method(name, resolved, num_classes, protocol.model.embedding_size)
