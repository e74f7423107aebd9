"""What a method is: a loss (with any parameters it owns), its batch needs, defaults, search space.

A method module subclasses :class:`Method`, sets the class attributes and implements
:meth:`Method.build_loss`; the trainer owns everything else (batching, optimisation, logging),
as pytorch-metric-learning's ``BaseMetricLossFunction`` owns reduction and leaves
``compute_loss`` to subclasses.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar

import numpy as np
from torch import nn

from dmlbench.errors import DmlbenchError
from dmlbench.registry import Registry

if TYPE_CHECKING:
    import optuna

    from dmlbench.data.base import Split
    from dmlbench.protocol import Protocol

HParams = dict[str, Any]


class Method:
    """Base class of every registered method.

    Class attributes:
        name: the registry name (set by :func:`register_method`).
        paper: short citation, e.g. ``"Schroff et al., CVPR 2015"``.
        defaults: the paper's hyper-parameters; ``defaults_source`` says where they are from.
        label_kind: ``class`` for class labels, ``continuous`` for label vectors.
        samples_per_class: default images per class in a batch (``samples_per_class`` in the
            hyper-parameters overrides it; the protocol's ``batch.samples_per_class`` wins).
        feature_layer_norm: the method's model standardises features before the head.
        extra_lr_keys: learnable loss parameters whose learning rate is ``lr × hparams[key]``
            (e.g. proxies, ``{"proxy_lr_mult"}``).

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


METHODS: Registry[type[Method]] = Registry("method")
M = TypeVar("M", bound=Method)


def register_method(name: str) -> Callable[[type[M]], type[M]]:
    """Class decorator: ``@register_method("multi-similarity")``."""

    def decorator(cls: type[M]) -> type[M]:
        if not cls.paper:
            raise ValueError(f"method {name} must cite its paper")
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
