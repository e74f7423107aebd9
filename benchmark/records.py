"""Result records: one JSON file per (protocol hash, method, seed, stage).

A record carries everything needed to trust a number: the protocol's name, version and hash,
the data fingerprint, the method and its resolved hyper-parameters, the seed, the metrics and
per-epoch curve, timings, device, package versions, git commit and command line. Records are
written atomically (temp file, fsync, rename) so an interrupted run never leaves a torn file;
the reader reports damaged files instead of crashing on them.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from dmlbench.atomic import atomic_write
from dmlbench.errors import DmlbenchError
from dmlbench.metrics import catalogue
from dmlbench.protocol import Protocol, StrictModel
from dmlbench.provenance import command_line, environment

SCHEMA_VERSION = 1
# The rows that need no learning, which every seed of every run gets: nearest neighbours on
# the raw test pixels, the randomly initialised network, and (where the protocol starts from a
# trunk) the pretrained network's features without fine-tuning, the papers' "ImageNet" row.
# A board must beat the best of them by a wide margin (dmlbench.report.gate).
PIXELS = "pixels"
UNTRAINED = "untrained"
PRETRAINED = "pretrained"
BASELINES = (PIXELS, UNTRAINED, PRETRAINED)


def baselines_for(protocol: Protocol) -> list[str]:
    """The no-learning rows of ``protocol``: ``pretrained`` only where it names weights."""
    return [b for b in BASELINES if b != PRETRAINED or protocol.model.pretrained is not None]


def is_baseline(method: str) -> bool:
    return method in BASELINES


# ``external``: embeddings of a model trained elsewhere, scored on a protocol's test split
# (``dmlbench evaluate``); every table and ranking reads ``final`` records only.
Stage = Literal["final", "search-trial", "external"]


class ProtocolRef(StrictModel):
    name: str
    version: int
    hash: str


class Timings(StrictModel):
    wall_seconds: float
    train_seconds: float = 0.0
    eval_seconds: float = 0.0
    images_per_second: float = 0.0
    steps: int = 0


class Artifact(StrictModel):
    """A file a final run keeps next to its record (trained weights, test embeddings).

    The path is relative to the record's folder, so a results folder can be moved or copied
    as a whole; the SHA-256 lets a reader refuse a file that changed since the run.
    """

    path: str = Field(description="POSIX path relative to the record's folder")
    sha256: str
    bytes: int = Field(ge=0)


class QueryHits(StrictModel):
    """Recall@1 hit (0/1) of every scored test query, with the query's class, compactly.

    The paired comparisons of a board over *test queries* (two methods, the same queries) and
    the class bootstrap need the hits themselves, not only their mean; a leaderboard run keeps
    no embeddings, so the record carries them: ``hits`` is ``numpy.packbits`` of the 0/1 vector
    and ``classes`` the zlib-compressed int32 class of each query, both base64 (about 1 KB for
    glyphs-mini's test split). :meth:`decode` returns the arrays.
    """

    metric: str = Field(
        default=catalogue.HITS_METRIC,
        description="the metric the hits are of: the catalogue's HITS_METRIC, nothing else",
    )
    n: int = Field(ge=0, description="number of scored queries")
    hits: str = Field(description="base64 of numpy.packbits of the 0/1 hits")
    classes: str = Field(description="base64 of zlib-compressed int32 query classes")

    @field_validator("metric")
    @classmethod
    def _the_hits_metric(cls, value: str) -> str:
        """Only the catalogue's hits metric has per-query hits (a ``Literal`` of its name
        would spell the name a second time)."""
        if value != catalogue.HITS_METRIC:
            raise ValueError(f"must be {catalogue.HITS_METRIC!r}, the one metric hits are kept of")
        return value

    @classmethod
    def encode(cls, hits: Any, classes: Any) -> QueryHits:
        import base64
        import zlib

        import numpy as np

        h = np.asarray(hits).reshape(-1)
        c = np.asarray(classes).reshape(-1).astype("<i4")
        if h.shape != c.shape or not np.isin(h, (0, 1)).all():
            raise ValueError("hits must be 0/1 and match the classes in length")
        packed = np.packbits(h.astype(np.uint8)).tobytes()
        return cls(
            n=len(h),
            hits=base64.b64encode(packed).decode("ascii"),
            classes=base64.b64encode(zlib.compress(c.tobytes(), 9)).decode("ascii"),
        )

    def decode(self) -> tuple[Any, Any]:
        """``(hits, classes)``: float64 0/1 hits and int64 classes, one per scored query.

        Raises:
            ValueError: the stored bits or classes are not ``n`` long (a hand-edited ``n`` was
                once silently cut to the bits stored), or are not base64 / zlib.
        """
        import base64
        import binascii
        import zlib

        import numpy as np

        try:
            bits = np.frombuffer(base64.b64decode(self.hits, validate=True), dtype=np.uint8)
            raw = zlib.decompress(base64.b64decode(self.classes, validate=True))
        except (binascii.Error, zlib.error) as err:
            raise ValueError(f"query_hits: not base64 of packed bits and zlib ({err})") from None
        if len(bits) != -(-self.n // 8) or len(raw) != 4 * self.n:
            raise ValueError(
                f"query_hits.n is {self.n}, but {8 * len(bits)} bits (in {len(bits)} bytes) and "
                f"{len(raw) // 4} classes are stored"
            )
        hits = np.unpackbits(bits)[: self.n].astype(np.float64)
        return hits, np.frombuffer(raw, dtype="<i4").astype(np.int64)


class QueryValues(StrictModel):
    """Per-query values of the metrics averaged over queries on continuous labels, compactly.

    What :class:`QueryHits` is to Recall@1, this is to ``ndcg@K`` and ``mld@K``: each scored
    query's own value (its nDCG@K; its label distance to its top K, averaged over the K and
    scaled as the record's ``mld@K``), whose mean over the queries is the record's metric. The
    verdicts need them to count the test-query component of a board's uncertainty (seeds ×
    queries crossed). ``values`` maps a metric to base64 of the zlib-compressed little-endian
    float32 vector (about 0.5 KB per metric for poses-mini's 100 queries); the queries are the
    split's, in order, so every method and seed of a board shares them.
    """

    n: int = Field(ge=0, description="number of scored queries")
    values: dict[str, str] = Field(
        description="metric → base64 of zlib-compressed little-endian float32 per-query values"
    )

    @classmethod
    def encode(cls, values: dict[str, Any]) -> QueryValues:
        import base64
        import zlib

        import numpy as np

        arrays = {m: np.asarray(v, dtype="<f4").reshape(-1) for m, v in values.items()}
        sizes = {len(a) for a in arrays.values()}
        if len(sizes) > 1:
            raise ValueError("every metric's per-query values must cover the same queries")
        packed = {
            m: base64.b64encode(zlib.compress(a.tobytes(), 9)).decode("ascii")
            for m, a in sorted(arrays.items())
        }
        return cls(n=sizes.pop() if sizes else 0, values=packed)

    def decode(self, metric: str) -> Any:
        """The float64 per-query values of ``metric`` (``n`` of them).

        Raises:
            KeyError: the record keeps no per-query values of ``metric``.
            ValueError: not base64 / zlib, or not ``n`` values.
        """
        import base64
        import binascii
        import zlib

        import numpy as np

        try:
            raw = zlib.decompress(base64.b64decode(self.values[metric], validate=True))
        except (binascii.Error, zlib.error) as err:
            raise ValueError(f"query_values.{metric}: not base64 of zlib ({err})") from None
        if len(raw) != 4 * self.n:
            raise ValueError(
                f"query_values.n is {self.n}, but {len(raw) // 4} values of {metric} are stored"
            )
        return np.frombuffer(raw, dtype="<f4").astype(np.float64)


# Characters a free-text field must not hold: C0/C1 controls (a newline in ``--trained-by``
# once ended a table row and started a fabricated one), line and paragraph separators, and
# the bidirectional overrides that make a cell read other than it is stored.
CONTROL_CHARACTERS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
MAX_FREE_TEXT = 500  # characters: a table cell, not a document


def free_text(value: str, what: str = "text") -> str:
    """``value`` once it is one line a table can show as it is.

    Raises:
        ValueError: a control character (named by its code point) or more than
            :data:`MAX_FREE_TEXT` characters.
    """
    if m := CONTROL_CHARACTERS.search(value):
        raise ValueError(
            f"{what} holds the control character U+{ord(m.group()):04X} at position "
            f"{m.start()}: one line of printable text, please"
        )
    if len(value) > MAX_FREE_TEXT:
        raise ValueError(f"{what} is {len(value)} characters long; at most {MAX_FREE_TEXT}")
    return value


class ExternalModel(StrictModel):
    """Who made the model an ``external`` record scores, and from what.

    The protocol's budget did not train it, so a board shows it apart from the methods and
    never ranks it; these fields are what a reader needs to judge the number instead. They are
    free text shown in tables, so one printable line each (:func:`free_text`).
    """

    name: str = Field(min_length=1, description="the model's name, the record's method")
    trained_by: str = Field(min_length=1, description="who trained it (a person, a project)")
    trained_on: str = Field(min_length=1, description="the data it was trained on")
    embedding_size: int = Field(ge=1)
    embeddings_sha256: str | None = Field(
        None, description="SHA-256 of the scored .npz file; none when a Python callable embedded"
    )

    @field_validator("name", "trained_by", "trained_on")
    @classmethod
    def _one_printable_line(cls, value: str) -> str:
        return free_text(value, "the text")


class Record(StrictModel):
    """One run's result. ``overrides`` lists anything that departs from the protocol
    (``--max-steps``, a backbone override): such records can never enter a leaderboard."""

    schema_version: int = SCHEMA_VERSION
    protocol: ProtocolRef
    data_fingerprint: str
    method: str
    hparams: dict[str, Any] = Field(default_factory=dict)
    seed: int
    stage: Stage = "final"
    metrics: dict[str, float]
    curve: list[dict[str, float]] = Field(default_factory=list)
    overrides: dict[str, Any] = Field(default_factory=dict)
    trial: int | None = Field(None, description="Optuna trial number (stage search-trial)")
    search: dict[str, Any] = Field(
        default_factory=dict,
        description="final: how its hyper-parameters were selected (study, trial, validation "
        "score, epochs); search-trial: the trial's state and, when it failed, why",
    )
    timings: Timings
    env: dict[str, Any] = Field(default_factory=dict)
    command: str = ""
    artifacts: dict[str, Artifact] = Field(
        default_factory=dict,
        description="files kept by a final run (weights, embeddings, model card), by role; "
        "empty with --no-keep, for search trials and for records older than this field",
    )
    query_hits: QueryHits | None = Field(
        None,
        description="final runs on class labels: Recall@1 hit and class of every scored test "
        "query (paired comparisons over queries); absent for older records",
    )
    query_values: QueryValues | None = Field(
        None,
        description="final runs on continuous labels: each scored test query's nDCG@K and "
        "mean label distance@K (the test-query component of the verdicts); absent for older "
        "records",
    )
    external: ExternalModel | None = Field(
        None, description="stage external only: the model trained elsewhere that was scored"
    )
    created: str = Field(default_factory=lambda: datetime.now(timezone.utc).isoformat())

    @model_validator(mode="after")
    def _external_iff_stage(self) -> Record:
        if (self.stage == "external") != (self.external is not None):
            raise ValueError("an external record, and only one, names its external model")
        return self

    @property
    def leaderboard_eligible(self) -> bool:
        return not self.overrides and self.stage != "external"

    @property
    def study_index(self) -> int:
        """Which search study the record belongs to (its ``search``'s ``study_index``; absent:
        study 0, as in every record made before protocols had several)."""
        return int(self.search.get("study_index", 0))

    def filename(self) -> str:
        run = (
            trial_run(self.trial, self.study_index) if self.trial is not None
            else f"seed{self.seed}"
        )  # fmt: skip
        return f"{self.method}-{run}-{self.stage}.json"


def trial_run(trial: int, study: int = 0) -> str:
    """A search trial's part of a record's name: ``trial0003``, ``study1-trial0003``."""
    return f"study{study}-trial{trial:04d}" if study else f"trial{trial:04d}"


def record_path(
    results_dir: Path,
    protocol_name: str,
    protocol_hash: str,
    method: str,
    seed: int,
    stage: str = "final",
    overrides: dict[str, Any] | None = None,
    trial: int | None = None,
    study: int = 0,
) -> Path:
    """Where a record lives. Runs with overrides (``--max-steps``...) get their own file, so a
    smoke test can never overwrite, or be mistaken for, a real run. A search trial of study
    i > 0 (``search.studies``) is ``<method>-study<i>-trial<NNNN>``."""
    tag = ""
    if overrides:
        digest = hashlib.sha256(json.dumps(overrides, sort_keys=True).encode()).hexdigest()
        tag = f"-override-{digest[:8]}"
    folder = results_dir / protocol_name / protocol_hash[:12]
    run = trial_run(trial, study) if trial is not None else f"seed{seed}"
    path = folder / f"{method}-{run}-{stage}{tag}.json"
    # Names are validated as slugs; this is the last line of defence for any other caller: a
    # protocol or method name must never place a file outside the results folder.
    if not path.resolve().is_relative_to(results_dir.resolve()):
        raise DmlbenchError(
            f"{path}: protocol {protocol_name!r} / method {method!r} would write outside "
            f"the results folder {results_dir}; refused"
        )
    return path


def folder_problem(folder: Path, flag: str) -> str | None:
    """Why files cannot be written under ``folder``, given as ``flag`` (``None``: they can).

    The one check of every output folder (``--results-dir``, ``--reports-dir``, a data set's
    ``--root``), made before any work, so a command does not train or decode for an hour and
    then fail to save. The caller decides whether a folder that cannot be written is fatal:
    finished records can still be reused from a read-only results folder, so there it only is
    once something has to be computed; a path that is a file is always fatal.

    Raises:
        DmlbenchError: ``folder`` (or a parent) is a file, not a folder.
    """
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise DmlbenchError(f"{existing}: {flag} must be a folder, and this is a file")
    probe = existing / f".dmlbench-write-test-{os.getpid()}"
    try:  # os.access says yes to root on a read-only mount; only a real write tells
        probe.touch()
        probe.unlink()
    except OSError as err:
        return f"{existing} ({flag}) cannot be written ({err.strerror})"
    return None


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers see the old file or the new one, never half."""
    atomic_write(path, lambda fh: fh.write(text.encode("utf-8")))


def lock_path(path: Path) -> Path:
    """The lock file of ``path``'s run: in a hidden ``.locks`` folder beside the records, not
    one file next to each record. Lock files are left in place after use, as ``filelock``
    leaves them on POSIX: deleting a locked file lets a third process lock a new file of the
    same name while a second still waits on the old one, and two processes would then own
    one run."""
    return path.parent / ".locks" / f"{path.name}.lock"


@contextmanager
def record_lock(path: Path, enabled: bool = True, wait: bool = False) -> Iterator[bool]:
    """An exclusive lock on ``path``'s run across processes (``filelock``: ``flock`` on
    POSIX, ``LockFileEx`` on Windows).

    Yields ``True`` when this process owns the run, ``False`` when another process holds it
    (two ``dmlbench run`` processes on one results folder then share the work instead of
    computing, and writing, the same record twice). With ``wait`` it blocks until the other
    process lets go (a run waits at its end for the records it skipped, so its table is
    complete). The lock dies with its process.
    """
    from filelock import FileLock, Timeout

    if not enabled:  # DDP ranks other than 0 follow rank 0 and write nothing
        yield True
        return
    lock_file = lock_path(path)
    try:
        lock_file.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(lock_file, timeout=-1 if wait else 0)
        lock.acquire()
    except Timeout:
        yield False
        return
    except OSError:  # read-only storage: nobody can write this record, nothing to race over
        yield True
        return
    try:
        yield True
    finally:
        lock.release()


def save_record(record: Record, path: Path) -> Path:
    """Write ``record`` atomically. A record that keeps no files is written without the
    ``artifacts`` key, one of a run without the ``external`` key, and one without per-query
    values without the ``query_values`` key, exactly as before the keys existed: the
    committed leaderboard records do not change, and older readers
    (``extra="forbid"``) still read them."""
    exclude = {"artifacts"} if not record.artifacts else set()
    if record.external is None:
        exclude.add("external")
    if record.query_values is None:
        exclude.add("query_values")
    atomic_write_text(path, record.model_dump_json(indent=2, exclude=exclude or None) + "\n")
    return path


class DamagedRecord(ValueError):
    """A record file that parses as JSON but is not a record (``[1, 2]``, ``null``, ``42``), or
    whose metrics are not all finite numbers, or that disagrees with itself (a hand edit)."""


# The kind of every metric a record carries, by name (the catalogue's families): fractions
# (shown as %, in [0, 1]), label distances (``mld@K``, unbounded, never negative) and query
# counts (whole numbers). ``val_`` (a search trial's validation score) and ``ci_…_lo``/``_hi``
# (an interval's ends) keep the kind of the metric they qualify. A name not listed (a
# plugin's) is only required to be finite.
COUNT_METRICS = ("queries", "lone_queries")
# How far a fraction may stray from [0, 1] by float rounding (a mean of values in [0, 1] can
# land one ulp outside); a hand edit such as 1.70 or -3.0 is refused.
FRACTION_SLACK = 1e-9


def metric_kind(name: str) -> str | None:
    """``"fraction"``, ``"distance"``, ``"count"`` or ``None`` (a metric dmlbench does not
    compute, whose range it does not know)."""
    base = name.removeprefix("val_")
    base = catalogue.interval_of(base) or base
    if base in COUNT_METRICS:
        return "count"
    if (kind := catalogue.family(base)) is None:
        return None
    return "fraction" if kind.percent else "distance"


def record_problem(record: Record) -> str | None:
    """The first way ``record`` contradicts what dmlbench writes, naming the field; ``None``
    when it has none.

    Records are trusted by every table, so a hand edit must not pass as a result: an unknown
    ``schema_version``, a metric that is not finite or outside its kind's range (``recall@1:
    1.70`` printed as 170.0), a seed outside ``--seed``'s range, or query hits that disagree
    with the record's own ``recall@1`` and ``queries`` (the confidence table computes its
    interval from the hits, the main table shows the metric).
    """
    from dmlbench.protocol import MAX_SEED

    if record.schema_version != SCHEMA_VERSION:
        return (
            f"schema_version {record.schema_version}: this dmlbench reads version "
            f"{SCHEMA_VERSION} only (written by another dmlbench, or edited)"
        )
    if not 0 <= record.seed <= MAX_SEED:
        return f"seed {record.seed}: must be in [0, {MAX_SEED}]"
    for name, value in sorted(record.metrics.items()):
        if not math.isfinite(value):
            return f"metric {name} is {value}, not a finite number"
        kind = metric_kind(name)
        if kind == "fraction" and not -FRACTION_SLACK <= value <= 1 + FRACTION_SLACK:
            return f"metric {name} is {value}: a fraction, it must be in [0, 1]"
        if kind in ("distance", "count") and value < 0:
            return f"metric {name} is {value}: a {kind}, it cannot be negative"
        if kind == "count" and value != int(value):
            return f"metric {name} is {value}: a number of queries, it must be whole"
    lo_key, hi_key = catalogue.ci_keys(catalogue.HITS_METRIC)
    lo, hi = record.metrics.get(lo_key), record.metrics.get(hi_key)
    if lo is not None and hi is not None and lo > hi:
        return f"metric {lo_key} {lo} is above {hi_key} {hi}"
    return _hits_problem(record) or _values_problem(record)


# How far a per-query mean (float32 values) may stray from the record's float64 metric.
QUERY_VALUES_SLACK = 1e-5


def _values_problem(record: Record) -> str | None:
    """How ``query_values`` disagrees with the record's metrics and ``queries``, if it does."""
    if record.query_values is None:
        return None
    queries = record.metrics.get("queries")
    if queries is not None and queries != record.query_values.n:
        return f"query_values holds {record.query_values.n} queries, metric queries is {queries:g}"
    for metric in sorted(record.query_values.values):
        try:
            values = record.query_values.decode(metric)
        except ValueError as err:
            return str(err)
        value = record.metrics.get(metric)
        if value is None:
            return f"query_values.{metric}: the record has no metric {metric}"
        if len(values) and abs(float(values.mean()) - value) > QUERY_VALUES_SLACK * max(
            1.0, abs(value)
        ):
            return f"query_values give {metric} {values.mean():.6g}, metric {metric} is {value}"
    return None


def _hits_problem(record: Record) -> str | None:
    """How ``query_hits`` disagrees with the record's ``recall@1`` and ``queries``, if it does."""
    if record.query_hits is None:
        return None
    try:
        hits, _ = record.query_hits.decode()
    except ValueError as err:
        return str(err)
    n = len(hits)
    queries = record.metrics.get("queries")
    if queries is not None and queries != n:
        return f"query_hits holds {n} queries, metric queries is {queries:g}"
    recall = record.metrics.get(record.query_hits.metric)
    if recall is not None and n and abs(float(hits.sum()) - recall * n) >= 0.5:
        return (
            f"query_hits give {record.query_hits.metric} {hits.sum():g}/{n} = "
            f"{hits.sum() / n:.6g}, metric {record.query_hits.metric} is {recall}"
        )
    return None


def load_record(path: Path) -> Record:
    """The record at ``path``.

    A metric that is NaN or infinite (``NaN`` is valid to Python's JSON reader, though dmlbench
    never writes it) makes the file damaged: reused as finished it would stand in a table as
    "—" or poison a mean, and a run that ended that way has nothing to report.

    Raises:
        DamagedRecord: not a JSON object, or it contradicts itself (:func:`record_problem`).
    """
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise DamagedRecord(f"a JSON {type(data).__name__}, not a record object")
    record = Record.model_validate(data)
    if problem := record_problem(record):
        raise DamagedRecord(problem)
    return record


def load_records(root: Path, skip: tuple[str, ...] = ()) -> tuple[list[Record], list[str]]:
    """Every record under ``root`` (but its sub-folders named in ``skip`` and hidden ones, such
    as a leaderboard update's staging folder), and one line per file that could not be read."""
    records, problems = [], []
    for path in sorted(root.rglob("*.json")):
        parts = path.relative_to(root).parts
        if "published" in path.parts or parts[0] in skip or any(p.startswith(".") for p in parts):
            continue
        try:
            records.append(load_record(path))
        except (OSError, ValueError, ValidationError) as err:  # JSON, UTF-8, DamagedRecord
            problems.append(f"{path}: damaged record skipped ({why_damaged(err)})")
    return records, problems


def why_damaged(err: Exception) -> str:
    """One line saying why a record could not be read: the field and pydantic's reason for a
    record that does not validate (its first line, "1 validation error for Record", named
    neither), else the error's first line."""
    if isinstance(err, ValidationError) and err.errors():
        first = err.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "the record"
        return f"{field}: {first['msg']}"
    return str(err).splitlines()[0] if str(err) else type(err).__name__


def record_precision(record: Record) -> str:
    """``env.precision``; ``"fp32"`` for records made before it was recorded (all on the CPU,
    where autocast is off). Committed records are not rewritten: their SHA-256 is checked."""
    return str(record.env.get("precision") or "fp32")


def new_record(
    protocol: Protocol,
    *,
    device: str,
    precision: str,
    per_query: QueryHits | QueryValues | None = None,
    **fields: Any,
) -> Record:
    """A record of ``protocol`` made here: the one place a record gets its protocol reference,
    this machine's environment and the command line, whether a final run or a search trial
    writes it (``fields``: the rest of :class:`Record`). ``per_query``, what
    :func:`dmlbench.engine.evaluation.evaluate` returns beside the metrics, goes to
    ``query_hits`` (class labels) or ``query_values`` (continuous labels)."""
    ref = ProtocolRef(name=protocol.name, version=protocol.version, hash=protocol.hash)
    env = environment(device, precision)
    if isinstance(per_query, QueryHits):
        fields["query_hits"] = per_query
    elif isinstance(per_query, QueryValues):
        fields["query_values"] = per_query
    return Record(protocol=ref, env=env, command=command_line(), **fields)
