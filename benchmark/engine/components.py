"""Whether what a protocol names exists: the check behind every protocol's validation.

:mod:`dmlbench.protocol` validates a protocol's schema; the names it holds (data set, backbone
and weights, methods) belong to the layers above it, so it resolves this check by name
(``protocol.COMPONENT_CHECK``) instead of importing them. A bad name is one line naming the
file and the key, at ``dmlbench validate`` and before any run.
"""

from __future__ import annotations

from pydantic import ValidationError

from dmlbench.data import DATASETS
from dmlbench.data.transforms import output_size
from dmlbench.errors import (
    DmlbenchError,
    ProtocolError,
    RegistryError,
    did_you_mean,
    format_validation_error,
)
from dmlbench.methods import METHODS
from dmlbench.models import backbone_exists, backbone_hint, check_weights
from dmlbench.models.bn_inception import bn_inception_takes
from dmlbench.protocol import Protocol


def check_components(protocol: Protocol, source: str) -> None:
    """Refuse, in one line naming ``source`` and the key, a protocol whose data set (or its
    parameters), backbone (or its weights tag), methods (or their batch) or image size for
    BN-Inception does not exist or cannot work."""
    try:
        dataset = DATASETS.get(protocol.data.dataset)
    except RegistryError as err:
        raise ProtocolError(f"{source}: data.dataset: {err}") from None
    try:
        dataset.Params.model_validate(protocol.data.params)
    except ValidationError as err:
        msg = format_validation_error(err, dataset.Params, prefix="data.params")
        raise ProtocolError(f"{source}: {msg}") from None
    if not backbone_exists(protocol.model.backbone):
        hint = backbone_hint(protocol.model.backbone)
        raise ProtocolError(
            f"{source}: model.backbone: unknown backbone '{protocol.model.backbone}'{hint}"
        )
    try:  # an unknown pretrained tag: refused by validate too, not only by run
        check_weights(protocol.model.backbone, protocol.model.pretrained)
    except DmlbenchError as err:
        raise ProtocolError(f"{source}: {err}") from None
    for method in protocol.methods:
        if method not in METHODS:
            hint = did_you_mean(method, METHODS.list())
            raise ProtocolError(f"{source}: methods: unknown method '{method}'{hint}")
        try:
            METHODS.get(method).check_batch(protocol.batch.size, protocol.batch.samples_per_class)
        except DmlbenchError as err:
            raise ProtocolError(f"{source}: batch.size: {err}") from None
    if protocol.model.backbone == "bn-inception":
        for split in ("train", "test"):
            size = output_size(getattr(protocol.images, split))
            if size is not None and not bn_inception_takes(size):
                near = min(
                    (s for s in range(max(size - 32, 32), size + 33) if bn_inception_takes(s)),
                    key=lambda s: abs(s - size),
                )
                raise ProtocolError(
                    f"{source}: images.{split}: bn-inception cannot take {size} px images (its "
                    f"inception branches end in different sizes); the nearest size it takes is "
                    f"{near}"
                )
