"""Published numbers as data: schema, loader, matcher and the reported-vs-reproduced table.

``<results-dir>/published/*.yaml`` hold the numbers the seed papers print (Fehervari et al. 2019
Tables 1-4, the multi-similarity paper's Tables 1-3, Kim et al. 2019), one entry per (data set,
method, kind, source, setting) with the metric values in %, as printed. ``kind`` says who
obtained a number: ``reported`` by the method's original paper, or ``reproduced`` by someone
else (the ``source`` names who and where).

When is a published number comparable with ours? When the data set and the setting agree. A
protocol declares its comparable setting in :data:`PUBLISHED_SETTINGS`, keyed by protocol *name*
(records carry the name, not the protocol file): ``cub200`` is CUB-200-2011 with BN-Inception
and a 64-d embedding, ``cub200-ms512`` the same data with a 512-d embedding, and so on. A
protocol missing from the mapping (glyphs, poses, a user's own file) has no published
counterpart. Deliberately, only data set, backbone and embedding size are compared: image size,
batch size and schedule differ between papers even at the same backbone, and are shown (not
matched) so a reader can judge the gap.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from dmlbench.errors import DmlbenchError

MethodName = Literal[
    "triplet-semihard", "lifted", "npairs", "angular", "structured-clustering", "margin",
    "prototypical", "proxy-triplet", "proxy-nca", "proxy-softmax", "ranked-list", "dreml",
    "multi-similarity", "binomial", "contrastive", "log-ratio", "triplet-dense", "triplet-binary",
]  # fmt: skip
METRIC_KEY = re.compile(r"^(recall@\d+|ndcg@\d+|mld@\d+|nmi|map@r|r_precision)$")
NOT_PERCENT = ("mld@",)  # label distances: ours are not scaled by 100


class PublishedEntry(BaseModel):
    """One published row: a method's numbers on one data set under one setting."""

    model_config = ConfigDict(extra="forbid")
    dataset: str
    method: MethodName
    kind: Literal["reported", "reproduced"]
    source: str = Field(min_length=1)
    backbone: str
    embedding_size: int = Field(gt=0)
    image_size: int | None = None
    batch_size: int | None = None
    normalized: bool | None = None
    note: str | None = None
    values: dict[str, float | None] = Field(min_length=1)

    @field_validator("values")
    @classmethod
    def _check_values(cls, values: dict[str, float | None]) -> dict[str, float | None]:
        for key, v in values.items():
            if not METRIC_KEY.match(key):
                raise ValueError(f"unknown metric {key!r} (use recall@K, nmi, map@r, ...)")
            if v is not None and not 0.0 <= v <= 100.0:
                raise ValueError(f"{key}: {v} is not a percentage in [0, 100]")
        return values


class PublishedFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    paper: str
    seed: str | None = None
    entries: list[PublishedEntry] = Field(default_factory=list)


class ComparableSetting(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    dataset: str
    backbone: str
    embedding_size: int


def _s(dataset: str, backbone: str, embedding_size: int) -> ComparableSetting:
    return ComparableSetting(dataset=dataset, backbone=backbone, embedding_size=embedding_size)


#: protocol name -> the published setting its numbers are comparable with.
PUBLISHED_SETTINGS: dict[str, ComparableSetting] = {
    "cub200": _s("cub200", "bn-inception", 64),
    "cars196": _s("cars196", "bn-inception", 64),
    "sop": _s("sop", "bn-inception", 64),
    "inshop": _s("inshop", "bn-inception", 64),
    "cub200-ms512": _s("cub200", "bn-inception", 512),
    "cars196-ms512": _s("cars196", "bn-inception", 512),
    "sop-ms512": _s("sop", "bn-inception", 512),
    "inshop-ms512": _s("inshop", "bn-inception", 512),
    "mpii-pose": _s("mpii-pose", "resnet34", 128),
}


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
    return PUBLISHED_SETTINGS.get(protocol_name)


def matching(entries: list[PublishedEntry], protocol_name: str) -> list[PublishedEntry]:
    """The published entries whose data set, backbone and embedding size are the protocol's."""
    s = setting_for(protocol_name)
    if s is None:
        return []
    return [
        e
        for e in entries
        if (e.dataset, e.backbone, e.embedding_size) == (s.dataset, s.backbone, s.embedding_size)
    ]


def reported_vs_reproduced(
    entries: list[PublishedEntry], protocol_name: str, table: pd.DataFrame
) -> pd.DataFrame:
    """Published value, ours (mean ± std over seeds, in %) and ours − published.

    ``table`` is :func:`dmlbench.report.tables.summary_table` of one protocol hash (metrics as
    fractions). One row per (method, published entry, metric) where both sides have a number;
    empty when nothing matches.
    """
    rows: dict[tuple[str, str, str, float], dict[str, object]] = {}
    for e in matching(entries, protocol_name):
        if e.method not in table.index:
            continue
        for metric, value in e.values.items():
            if value is None or metric not in table.columns or np.isnan(table.at[e.method, metric]):
                continue
            key = (e.method, metric, e.kind, value)
            if key in rows:  # the same number quoted by two papers: one row, both sources
                rows[key]["source"] = f"{rows[key]['source']}; {e.source}"
                continue
            scale = 1.0 if metric.startswith(NOT_PERCENT) else 100.0
            ours = float(table.at[e.method, metric]) * scale
            rows[key] = {
                "method": e.method,
                "metric": metric,
                "kind": e.kind,
                "source": e.source,
                "published": value,
                "ours": ours,
                "ours_std": float(table.at[e.method, f"{metric}_std"]) * scale,
                "difference": ours - value,
            }
    columns = ["method", "metric", "kind", "source", "published", "ours", "ours_std", "difference"]
    out = pd.DataFrame(list(rows.values()), columns=columns)
    order = {m: i for i, m in enumerate(table.index)}
    cols = {c: i for i, c in enumerate(table.columns)}
    triples = zip(out["method"], out["kind"], out["metric"], strict=True)
    keys = [(order[m], k, cols[c]) for m, k, c in triples]
    return out.iloc[sorted(range(len(out)), key=keys.__getitem__)].reset_index(drop=True)
