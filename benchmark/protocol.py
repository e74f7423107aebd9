"""Protocols: the frozen conditions of a comparison.

A protocol is one YAML file (``protocols/*.yaml``) validated into a :class:`Protocol`. Unknown
keys are errors, so a typo can never silently fall back to a default. A variant may
``include:`` a base file and override some keys (lm-evaluation-harness style).

The protocol's identity is :func:`protocol_hash`, the SHA-256 of its canonical JSON form. It is
written into every record, and reports refuse to put records of different hashes in one table.
Free text (``description``, ``citation``), the machine-specific data root and the ``report:``
section (how results are judged, e.g. the equivalence margin of the verdicts) are left out of
the hash: they cannot move a number, so changing them re-renders reports without retraining.
"""

from __future__ import annotations

import copy
import hashlib
import importlib
import json
import os
import re
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AllowInfNan,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    ValidationError,
    field_validator,
    model_validator,
)

from dmlbench.errors import ProtocolError, did_you_mean, format_validation_error
from dmlbench.metrics.catalogue import hash_omit_defaults

COMPONENT_CHECK = "dmlbench.engine.components:check_components"
# What ``pretrained: trunk:NAME`` stands for in the hash: the trunk's recipe hash and weights
# SHA-256 (dmlbench.models.trunks), resolved by name like the component check.
TRUNK_IDENTITY = "dmlbench.models.trunks:identity"
TRUNK_PREFIX = "trunk:"
HASH_EXCLUDE: dict[str, Any] = {
    "description": True,
    "citation": True,
    "data": {"root"},
    "report": True,
}
# The practical-equivalence margin of the board verdicts (dmlbench.report.verdicts), in the
# headline metric's units: 3 Recall@1 points, from the power calculation in docs/reports.md
# (at the tuned boards' chosen 12 seeds, a method truly tied with the best is called
# *equivalent* in about 94% of boards at 3 points, 69% at 2.5 and 9% at 2).
DEFAULT_EQUIVALENCE_MARGIN = 0.03
# How far a board's best method must stand above the best row that needs no learning (raw
# pixels, the untrained network, the pretrained one without fine-tuning): 10 points of the
# headline metric (dmlbench.report.gate says why).
DEFAULT_GATE_MARGIN = 0.10
# Keys added after protocols were hashed, left out of the hash while at their default, so that
# adding an option never changes the identity of the protocols that do not use it.
HASH_OMIT_DEFAULTS: dict[tuple[str, str], Any] = {
    ("optim", "steps_per_epoch"): None,
    ("optim", "backbone_lr"): None,
    ("model", "channels_last"): False,
    ("model", "compile"): False,
    ("search", "studies"): 1,
    # a metric family added after the first hashes says so in its description
    **{("metrics", field): value for field, value in hash_omit_defaults().items()},
}


def _not_a_bool(value: Any) -> Any:
    if isinstance(value, bool):  # YAML ``true`` would otherwise pass as 1.0
        raise ValueError("Input should be a number, not a boolean")
    return value


# Strict scalar types of every schema: ``embedding_size: true`` must not train a 1-d embedding
# and ``epochs: 2.5`` must not run 2 epochs. Floats still accept ints and YAML 1.1's ``1e-3``
# (a string to YAML), but neither booleans nor inf/nan (``lr: 1e400``).
Int = Annotated[int, Strict()]
Float = Annotated[float, BeforeValidator(_not_a_bool), AllowInfNan(False)]
Bool = Annotated[bool, Strict()]
# A protocol name becomes a folder under --results-dir and a file name under --reports-dir:
# no path separators, no leading dot, no spaces (a shared protocol file must not be able to
# write anywhere else).
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._@=+:-]{0,127}$"

# Upper bounds of every integer, far beyond any DML setting, so that a typo (an extra zero, a
# pasted 10**20) is one line naming the key instead of a traceback from torch or faiss, or an
# hour of training before it fails. The CLI flags reuse them (dmlbench.cli.options).
MAX_SEED = 2**31 - 1  # faiss's k-means (NMI) takes a signed 32-bit seed
MAX_IMAGE_SIZE = 4096  # px
MAX_EMBEDDING_SIZE = 65536
MAX_BATCH_SIZE = 65536
MAX_EPOCHS = 100_000
MAX_STEPS = 10**9  # batches per epoch, and --max-steps
MAX_K = 1_000_000  # Recall@K, nDCG@K, label distance@K: far above any gallery used in DML
MAX_FOLDS = 100
MAX_STUDIES = 100
MAX_TRIALS = 100_000
MAX_VERSION = 1_000_000


class StrictModel(BaseModel):
    """Base of every model read from a file (protocols, records, tolerances, published
    numbers): an unknown key is an error, never silently dropped (a typo would be a default)."""

    model_config = ConfigDict(extra="forbid")


class FrozenModel(StrictModel):
    """A configuration (protocol sections, data-set parameters): immutable once validated, so
    the hash computed from it stays the hash of what runs."""

    model_config = ConfigDict(frozen=True)


class DataSpec(FrozenModel):
    """Which data set, and its own parameters (validated by the data set's ``Params`` model)."""

    dataset: str
    root: str | None = Field(None, description="data root; ${VAR} expands; not hashed")
    params: dict[str, Any] = Field(default_factory=dict)


class TransformSpec(FrozenModel):
    """One image pipeline. Every step is optional; embedded data sets use none."""

    resize: Int | None = Field(None, gt=0, le=MAX_IMAGE_SIZE)
    random_resized_crop: Int | None = Field(None, gt=0, le=MAX_IMAGE_SIZE)
    crop_scale: tuple[Float, Float] = (0.16, 1.0)
    random_crop: Int | None = Field(None, gt=0, le=MAX_IMAGE_SIZE)
    center_crop: Int | None = Field(None, gt=0, le=MAX_IMAGE_SIZE)
    hflip: Float = Field(0.0, ge=0.0, le=1.0)


class ImagesSpec(FrozenModel):
    train: TransformSpec = Field(default_factory=TransformSpec)
    test: TransformSpec = Field(default_factory=TransformSpec)


class ModelSpec(FrozenModel):
    backbone: str
    pretrained: str | None = None
    embedding_size: Int = Field(gt=0, le=MAX_EMBEDDING_SIZE)
    normalize: Bool = True
    pooling: Literal["avg", "avgmax"] = "avg"
    frozen_bn: Bool = False
    # Two speed options that are part of *what* is computed, not only how fast: on the CPU an
    # NHWC network runs other convolution, batch-norm and pooling kernels, and torch.compile
    # fuses operations, and both round differently from the first step on (measured: a small
    # CNN's losses differ from the first step). Hence protocol keys, hashed, not run options.
    channels_last: Bool = Field(
        False, description="train and embed in NHWC memory format (timm's --channels-last)"
    )
    compile: Bool = Field(False, description="train through torch.compile (inductor)")


class BatchSpec(FrozenModel):
    """Batch composition; ``samples_per_class: null`` lets the method choose."""

    size: Int = Field(gt=1, le=MAX_BATCH_SIZE)
    samples_per_class: Int | None = Field(None, gt=0, le=MAX_BATCH_SIZE)


class OptimSpec(FrozenModel):
    name: Literal["adam", "adamw", "sgd", "rmsprop"] = "adam"
    lr: Float = Field(gt=0.0)
    backbone_lr: Float | None = Field(
        None,
        gt=0.0,
        description="learning rate of the backbone's parameters when it differs from `lr` "
        "(which then drives the embedding head and the loss's own parameters); null: one "
        "rate for the whole network",
    )
    weight_decay: Float = Field(0.0, ge=0.0)
    momentum: Float = Field(0.9, ge=0.0, lt=1.0)
    epochs: Int = Field(gt=0, le=MAX_EPOCHS)
    schedule: Literal["none", "cosine", "step"] = "none"
    step_epochs: Int = Field(10, gt=0, le=MAX_EPOCHS)
    step_gamma: Float = Field(0.1, gt=0.0, le=1.0)
    steps_per_epoch: Int | None = Field(
        None,
        gt=0,
        le=MAX_STEPS,
        description="an epoch of at most this many batches (the first of that epoch's seeded "
        "order) instead of one pass: lets a one-pass protocol validate, and prune, more often",
    )


K = Annotated[Int, Field(le=MAX_K)]  # >= 1 is checked below, with the list's name


class MetricsSpec(FrozenModel):
    recall_at: list[K] = Field(default_factory=lambda: [1, 2, 4, 8])
    nmi: Bool = True
    map_at_r: Bool = True
    r_precision: Bool = True
    normalize: Bool = Field(True, description="L2-normalise embeddings before retrieval")
    ndcg_at: list[K] = Field(default_factory=list)
    label_distance_at: list[K] = Field(default_factory=list)
    mrr: Bool = Field(False, description="mean reciprocal rank of the first same-class item")
    class_recall_at: list[K] = Field(
        default_factory=list, description="Recall@K averaged within each class, then over classes"
    )
    class_map_at_r: Bool = Field(
        False, description="MAP@R averaged within each class, then over classes"
    )

    @model_validator(mode="after")
    def _positive_ks(self) -> MetricsSpec:
        for key in ("recall_at", "ndcg_at", "label_distance_at", "class_recall_at"):
            if any(k < 1 for k in getattr(self, key)):
                raise ValueError(f"{key}: every K must be >= 1")
        return self


class ValidationSpec(FrozenModel):
    """How search trials carve validation classes out of the training classes."""

    by: Literal["classes"] = "classes"
    folds: Int = Field(1, ge=1, le=MAX_FOLDS)
    fraction: Float = Field(0.25, gt=0.0, lt=1.0)


class SearchSpec(FrozenModel):
    """The tuning budget: ``trials`` Optuna trials per method; 0 means the paper's defaults.

    ``studies`` independent searches per method, each of ``trials`` trials with its own
    sampler seeds, each selection retrained on its share of the seeds (round robin by
    position): the verdicts then count the search's own luck (docs/reports.md).
    """

    trials: Int = Field(20, ge=0, le=MAX_TRIALS)
    studies: Int = Field(1, ge=1, le=MAX_STUDIES)
    sampler: Literal["tpe", "random"] = "tpe"
    pruner: Literal["none", "median", "hyperband"] = "median"
    validation: ValidationSpec = Field(default_factory=ValidationSpec)


class ReportSpec(FrozenModel):
    """How a board's results are judged: a report setting, never part of the protocol hash.

    ``equivalence_margin`` (δ) is the practical-equivalence margin of the verdicts, in the
    headline metric's units (0.03 = 3 Recall@1 points): a method whose simultaneous interval of
    the difference to the best of the others lies inside ± δ is *equivalent*. It is chosen
    from a power calculation, not from the results, and can change without retraining.
    ``gate_margin`` is how far the board's best method must stand above the best row that
    needs no learning before ``dmlbench check --update`` writes the board
    (:mod:`dmlbench.report.gate`); every shipped board keeps the default.
    """

    equivalence_margin: Float = Field(DEFAULT_EQUIVALENCE_MARGIN, gt=0.0, lt=1.0)
    gate_margin: Float = Field(DEFAULT_GATE_MARGIN, ge=-1.0, lt=1.0)


class Protocol(FrozenModel):
    """Every condition that can move a number in a comparison (and, unhashed, how its
    results are judged: ``report``)."""

    name: str
    version: Int = Field(ge=1, le=MAX_VERSION)
    description: str = ""
    citation: str | None = None
    data: DataSpec
    images: ImagesSpec = Field(default_factory=ImagesSpec)
    model: ModelSpec
    batch: BatchSpec
    optim: OptimSpec
    metrics: MetricsSpec = Field(default_factory=MetricsSpec)
    search: SearchSpec = Field(default_factory=SearchSpec)
    seeds: list[Annotated[Int, Field(ge=0, le=MAX_SEED)]] = Field(min_length=1)
    methods: list[str] = Field(default_factory=list, description="default methods of `run`")
    report: ReportSpec = Field(default_factory=ReportSpec, description="not hashed")

    def study_of(self, seed: int) -> int:
        """The search study whose selection ``seed``'s final run trains with: the seeds are
        shared out by their position in ``seeds``, round robin (12 seeds, 3 studies: study 0
        gets seeds 0, 3, 6, 9), so a run of any subset of the seeds pairs each with the same
        study; a seed outside ``seeds`` by its value."""
        position = self.seeds.index(seed) if seed in self.seeds else seed
        return position % self.search.studies

    @field_validator("name")
    @classmethod
    def _name_is_a_slug(cls, name: str) -> str:
        if not re.fullmatch(NAME_PATTERN, name):
            raise ValueError(
                "must be a slug (letters, digits and . _ - @ = + :, starting with a letter or "
                "digit, at most 128): it names the results and reports folders"
            )
        return name

    @property
    def hash(self) -> str:
        return protocol_hash(self)

    @property
    def short_hash(self) -> str:
        return self.hash[:12]

    def data_root(self, override: str | None = None) -> Path | None:
        """The data root with ``${VAR}`` expanded; ``override`` (``--data-root``) wins."""
        root = override if override is not None else self.data.root
        return Path(os.path.expandvars(root)).expanduser() if root else None

    def without_search(self) -> Protocol:
        """The same protocol with a zero tuning budget: every method runs its paper defaults.

        Named ``<name>@defaults``, with its own hash, so default-hyper-parameter results can
        never share a table (or a record file) with tuned ones, and a reader tells them apart
        by name, not by a 12-character hash.
        """
        return self.with_trials(0)

    def with_trials(self, trials: int) -> Protocol:
        """The protocol with another tuning budget, named ``<name>@trials=N`` (``@defaults``
        for 0); the protocol itself when the budget is unchanged."""
        if trials == self.search.trials:
            return self
        suffix = "defaults" if trials == 0 else f"trials={trials}"
        changes: dict[str, Any] = {"search.trials": trials}
        if trials == 0:  # no search, no studies: the defaults board's hash ignores them
            changes["search.studies"] = 1
        return self.with_overrides(changes, name=f"{self.name}@{suffix}")

    def with_overrides(self, overrides: dict[str, Any], name: str | None = None) -> Protocol:
        """A derived protocol with dotted keys replaced (``{"model.embedding_size": 32}``)."""
        raw = self.model_dump(mode="json")
        for dotted, value in overrides.items():
            _set_dotted(raw, dotted, value)
        if name is not None:
            raw["name"] = name
        return validate_protocol(raw, source=f"{self.name} with {overrides}")


def protocol_hash(protocol: Protocol) -> str:
    """SHA-256 of the canonical JSON of everything that can move a number."""
    content = protocol.model_dump(mode="json", exclude=HASH_EXCLUDE)
    pretrained = content["model"]["pretrained"]
    if isinstance(pretrained, str) and pretrained.startswith(TRUNK_PREFIX):
        module, _, name = TRUNK_IDENTITY.partition(":")
        identity = getattr(importlib.import_module(module), name)
        content["model"]["pretrained"] = identity(pretrained[len(TRUNK_PREFIX) :])
    for (section, key), default in HASH_OMIT_DEFAULTS.items():
        if content[section].get(key) == default:
            del content[section][key]
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


# --------------------------------------------------------------------------- loading


def builtin_dir() -> Path:
    return Path(str(resources.files("dmlbench.protocols")))


def builtin_names() -> list[str]:
    return sorted(p.stem for p in builtin_dir().glob("*.yaml"))


def resolve_path(name_or_path: str | Path) -> Path:
    """A file path, or the name of a shipped protocol (``glyphs-mini``)."""
    path = Path(name_or_path)
    try:  # a folder on the way that this user may not enter: one line, not a traceback
        is_path, is_file = path.suffix in {".yaml", ".yml"} or path.exists(), path.is_file()
    except OSError as err:
        raise ProtocolError(f"{path}: cannot read protocol file ({err.strerror})") from None
    if is_path:
        if not is_file:
            raise ProtocolError(f"{path}: protocol file not found")
        return path
    candidate = builtin_dir() / f"{name_or_path}.yaml"
    if candidate.is_file():
        return candidate
    hint = did_you_mean(str(name_or_path), builtin_names())
    raise ProtocolError(
        f"unknown protocol '{name_or_path}'{hint}; shipped: {', '.join(builtin_names())}"
    )


def load_protocol(name_or_path: str | Path) -> Protocol:
    """Load, resolve ``include:`` and validate a protocol; errors name the file and key."""
    path = resolve_path(name_or_path)
    raw = _load_raw(path, seen=())
    return validate_protocol(raw, source=str(path))


def validate_protocol(raw: dict[str, Any], source: str) -> Protocol:
    """Validate a raw mapping; also checks the data set's own ``params`` and known names."""
    try:
        protocol = Protocol.model_validate(raw)
    except ValidationError as err:
        raise ProtocolError(f"{source}: {format_validation_error(err, Protocol)}") from None
    studies = protocol.search.studies
    if protocol.search.trials > 0 and studies > len(protocol.seeds):
        raise ProtocolError(
            f"{source}: search.studies: {studies} studies need at least {studies} seeds to "
            f"share out; seeds has {len(protocol.seeds)} ({', '.join(map(str, protocol.seeds))})"
        )
    _check_components(protocol, source)
    return protocol


def _check_components(protocol: Protocol, source: str) -> None:
    """The names a protocol gives (data set, backbone, weights, methods) against the
    registries of the layers above this one: resolved by name when a protocol is validated
    (a lazy "module:object" entry, as lm-evaluation-harness's registry does), so this module
    imports none of them."""
    module, _, name = COMPONENT_CHECK.partition(":")
    getattr(importlib.import_module(module), name)(protocol, source)


class UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key given twice in one mapping.

    PyYAML keeps the last of two ``name:`` lines silently; in a frozen protocol the line a
    reader sees first may then not be the one that ran, so it is an error naming the key and
    both lines. A merge key (``<<: *base``) may still be overridden: that is what it is for.
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        first: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            try:
                earlier = first.get(key)
            except TypeError:  # an unhashable key: the safe loader's own error names it
                continue
            if earlier is not None:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (first on line {earlier})",
                    key_node.start_mark,
                )  # fmt: skip
            first[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


def _load_raw(path: Path, seen: tuple[Path, ...]) -> dict[str, Any]:
    path = path.resolve()
    if path in seen:
        raise ProtocolError(f"{path}: include cycle through {', '.join(map(str, seen))}")
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ProtocolError(f"{path}: cannot read protocol file ({err.strerror})") from None
    except UnicodeDecodeError as err:
        line = path.read_bytes()[: err.start].count(b"\n") + 1
        raise ProtocolError(
            f"{path}: line {line}: not UTF-8 text (byte {err.object[err.start]:#04x}); "
            "save the protocol as UTF-8"
        ) from None
    try:
        raw = yaml.load(text, Loader=UniqueKeyLoader)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or "invalid YAML"
        raise ProtocolError(f"{path}:{where}: {problem}") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ProtocolError(f"{path}: a protocol must be a mapping, got {type(raw).__name__}")
    include = raw.pop("include", None)
    if include is None:
        return raw
    if not isinstance(include, str):
        raise ProtocolError(f"{path}: include: must be a file name")
    base = _load_raw(_include_path(path, include), seen=(*seen, path))
    return deep_merge(base, raw)


def _include_path(path: Path, include: str) -> Path:
    """The file ``include:`` names: beside the including file first (a local base always
    wins), else a shipped protocol (``include: glyphs-mini``), so a variant of a shipped
    protocol can live anywhere without copying it."""
    if Path(include).is_absolute():
        if not Path(include).is_file():
            raise ProtocolError(f"{path}: include: file not found: {include}")
        return Path(include)
    stem = include.removesuffix(".yaml").removesuffix(".yml")
    beside = [path.parent / include]
    if stem == include:  # a bare name also finds name.yaml beside the file
        beside.append(path.parent / f"{include}.yaml")
    for candidate in beside:
        if candidate.is_file():
            return candidate
    shipped = builtin_dir() / f"{stem}.yaml"
    if "/" not in include and "\\" not in include and shipped.is_file():
        return shipped
    hint = did_you_mean(stem, builtin_names())
    raise ProtocolError(
        f"{path}: include: {include}: neither a file beside it ({beside[-1]}) nor a shipped "
        f"protocol ({builtin_dir()}){hint}"
    )


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """``override`` wins; nested mappings merge key by key, lists are replaced whole."""
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _set_dotted(raw: dict[str, Any], dotted: str, value: Any) -> None:
    node = raw
    *parents, leaf = dotted.split(".")
    for key in parents:
        if not isinstance(node.get(key), dict):
            raise ProtocolError(f"override {dotted}: '{key}' is not a section")
        node = node[key]
    if leaf not in node and not (len(parents) >= 1 and parents[-1] == "params"):
        raise ProtocolError(f"override {dotted}: unknown key '{leaf}'")
    node[leaf] = value
