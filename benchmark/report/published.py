"""Published numbers as data: schema, loader, matcher and the reported-vs-reproduced table.

``<results-dir>/published/*.yaml`` hold published numbers (Fehervari et al. 2019 Tables 1-4, the
multi-similarity paper's Tables 1-3, Kim et al. 2019, Kim et al. 2020), one entry per (data set,
method, kind, source, setting) with the metric values in %, as printed. ``kind`` says who
obtained a number: ``reported`` by the method's original paper, or ``reproduced`` by someone
else (the ``source`` names who and where).

When is a published number comparable with ours? Numbers are paired by data set, method,
backbone and embedding size: the shipped protocols in :func:`published_protocols` (and those
derived from them by budget only, ``cub200@defaults``) have published counterparts, and their
setting is read from the protocol itself (records carry the protocol name). Every other setting
both sides record — normalisation, training image size, batch size, pretraining — is compared
for each published number, and a difference is never paired silently: the report marks the
published value (``†N``) and a footnote names each difference (:func:`differences`). Other
protocols (glyphs, poses, a user's own file, a sweep) have no published counterpart.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd
import yaml
from pydantic import Field, ValidationError, field_validator

from dmlbench.errors import DmlbenchError
from dmlbench.metrics import catalogue
from dmlbench.metrics.catalogue import METRIC_KEY
from dmlbench.protocol import FrozenModel, StrictModel


class PublishedEntry(StrictModel):
    """One published row: a method's numbers on one data set under one setting."""

    dataset: str
    method: str = Field(min_length=1, description="a registered method name")
    kind: Literal["reported", "reproduced"]
    source: str = Field(min_length=1)
    backbone: str
    embedding_size: int = Field(gt=0)
    image_size: int | None = None
    batch_size: int | None = None
    normalized: bool | None = None
    pretrained: str | None = None
    note: str | None = None
    values: dict[str, float | None] = Field(min_length=1)

    @field_validator("method")
    @classmethod
    def _registered(cls, method: str) -> str:
        from dmlbench.errors import did_you_mean
        from dmlbench.methods import METHODS

        if method not in METHODS:
            raise ValueError(f"unknown method {method!r}{did_you_mean(method, METHODS.list())}")
        return method

    @field_validator("values")
    @classmethod
    def _check_values(cls, values: dict[str, float | None]) -> dict[str, float | None]:
        for key, v in values.items():
            if not METRIC_KEY.match(key):
                raise ValueError(f"unknown metric {key!r} (use one of {catalogue.key_forms()})")
            if v is not None and not 0.0 <= v <= 100.0:
                raise ValueError(f"{key}: {v} is not a percentage in [0, 100]")
        return values


class PublishedFile(StrictModel):
    paper: str
    seed: str | None = None
    entries: list[PublishedEntry] = Field(default_factory=list)


class ComparableSetting(FrozenModel):
    """The settings of a protocol that a published number records too."""

    dataset: str
    backbone: str
    embedding_size: int
    normalized: bool | None = None
    image_size: int | None = None
    batch_size: int | None = None
    pretrained: str | None = None


def published_protocols() -> tuple[str, ...]:
    """Shipped protocols with published counterparts (their numbers are paired by data set,
    method, backbone and embedding size; every other recorded setting is compared and marked):
    each data set's ``About.published_protocols``, read from the registry."""
    from dmlbench.data import DATASETS

    return tuple(p for n in DATASETS.list() for p in DATASETS.get(n).about.published_protocols)


#: Derived names that keep every setting of their base protocol (the budget only).
_SAME_SETTING = re.compile(r"@(defaults|trials=\d+)$")


def _backbone(name: str) -> str:
    return name.split(":", 1)[-1]  # torchvision:resnet34 is the papers' resnet34


def load_published_file(path: Path) -> PublishedFile:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        return PublishedFile.model_validate(data)
    except (OSError, UnicodeDecodeError) as err:
        raise DmlbenchError(f"{path}: cannot read ({err})") from err
    except yaml.YAMLError as err:  # its message spans lines: keep the problem and its line
        mark = getattr(err, "problem_mark", None)
        where = f" line {mark.line + 1}:" if mark is not None else ""
        raise DmlbenchError(
            f"{path}:{where} {getattr(err, 'problem', None) or 'invalid YAML'}"
        ) from err
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise DmlbenchError(f"{path}: {where}: {first['msg']}") from err


def load_published(directory: Path | None) -> list[PublishedEntry]:
    """Every entry of every ``*.yaml`` in ``directory`` (none when it does not exist)."""
    if directory is None or not directory.is_dir():
        return []
    return [e for p in sorted(directory.glob("*.yaml")) for e in load_published_file(p).entries]


def setting_for(protocol_name: str) -> ComparableSetting | None:
    """The comparable setting of a shipped protocol (or of one derived from it by budget)."""
    from dmlbench.protocol import load_protocol

    base = _SAME_SETTING.sub("", protocol_name)
    if base not in published_protocols():
        return None
    p = load_protocol(base)
    crop = p.images.train.random_crop or p.images.train.random_resized_crop
    return ComparableSetting(
        dataset=p.data.dataset,
        backbone=_backbone(p.model.backbone),
        embedding_size=p.model.embedding_size,
        normalized=p.model.normalize,
        image_size=crop or p.images.test.center_crop,
        batch_size=p.batch.size,
        pretrained=p.model.pretrained,
    )


def matching(entries: list[PublishedEntry], protocol_name: str) -> list[PublishedEntry]:
    """The published entries whose data set, backbone and embedding size are the protocol's."""
    s = setting_for(protocol_name)
    if s is None:
        return []
    return [
        e
        for e in entries
        if (e.dataset, _backbone(e.backbone), e.embedding_size)
        == (s.dataset, s.backbone, s.embedding_size)
    ]


def differences(entry: PublishedEntry, ours: ComparableSetting) -> list[str]:
    """Each setting both sides record and that differs, in words (empty: like with like)."""
    out = []
    if None not in (entry.normalized, ours.normalized) and entry.normalized != ours.normalized:
        word = {True: "L2-normalised", False: "not normalised"}
        out.append(
            f"normalisation: ours {word[bool(ours.normalized)]}, published "
            f"{word[bool(entry.normalized)]}"
        )
    for key, label in (("image_size", "image size"), ("batch_size", "batch size")):
        a, b = getattr(ours, key), getattr(entry, key)
        if None not in (a, b) and a != b:
            out.append(f"{label}: ours {a}, published {b}")
    if entry.pretrained is not None and entry.pretrained != ours.pretrained:
        out.append(f"pretraining: ours {ours.pretrained or 'none'}, published {entry.pretrained}")
    return out


def reported_vs_reproduced(
    entries: list[PublishedEntry], protocol_name: str, table: pd.DataFrame
) -> pd.DataFrame:
    """Published value, ours (mean and std over seeds, in %; std NaN for one seed, with
    ``n_seeds``) and ours − published.

    ``table`` is :func:`dmlbench.report.tables.summary_table` of one protocol hash (metrics as
    fractions). One row per (method, published entry, metric) where both sides have a number;
    empty when nothing matches.
    """
    rows: dict[tuple[str, str, str, float, str], dict[str, object]] = {}
    setting = setting_for(protocol_name)
    for e in matching(entries, protocol_name):
        assert setting is not None  # matching() found entries for it
        differs = "; ".join(differences(e, setting))
        if e.method not in table.index:
            continue
        for metric, value in e.values.items():
            if value is None or metric not in table.columns or np.isnan(table.at[e.method, metric]):
                continue
            key = (e.method, metric, e.kind, value, differs)
            if key in rows:  # the same number quoted by two papers: one row, both sources
                rows[key]["source"] = f"{rows[key]['source']}; {e.source}"
                continue
            scale = catalogue.scale(metric)
            ours = float(table.at[e.method, metric]) * scale
            rows[key] = {
                "method": e.method,
                "metric": metric,
                "kind": e.kind,
                "source": e.source,
                "published": value,
                "ours": ours,
                "ours_std": float(table.at[e.method, f"{metric}_std"]) * scale,  # NaN: 1 seed
                "n_seeds": int(table.at[e.method, "seeds"]),
                "difference": ours - value,
                "settings_differ": differs,
            }
    columns = [
        "method", "metric", "kind", "source", "published", "ours", "ours_std", "n_seeds",
        "difference", "settings_differ",
    ]  # fmt: skip
    out = pd.DataFrame(list(rows.values()), columns=columns)
    order = {m: i for i, m in enumerate(table.index)}
    cols = {c: i for i, c in enumerate(table.columns)}
    triples = zip(out["method"], out["kind"], out["metric"], strict=True)
    keys = [(order[m], k, cols[c]) for m, k, c in triples]
    return out.iloc[sorted(range(len(out)), key=keys.__getitem__)].reset_index(drop=True)
