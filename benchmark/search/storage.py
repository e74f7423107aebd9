"""Where a study lives: SQLite or any Optuna RDB URL (PostgreSQL), and the lock on its budget.

SQLite (``results/optuna.db``, WAL) is the default, any Optuna RDB URL (``postgresql://…``)
works with ``--storage``. Trials are claimed under a lock (a file lock for SQLite, a PostgreSQL
advisory lock), so N workers on any number of machines run exactly the budget. A database
that cannot be opened is one line naming it and what to do.
"""

from __future__ import annotations

import hashlib
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dmlbench.errors import DmlbenchError
from dmlbench.options import SearchOptions

if TYPE_CHECKING:
    import optuna


class SearchError(DmlbenchError):
    """A search could not produce hyper-parameters (e.g. every trial failed)."""


def storage_url(search_options: SearchOptions, results_dir: Path) -> str:
    """``--storage``, or the SQLite database ``<results_dir>/optuna.db`` (created in WAL mode).

    The URL is built with SQLAlchemy's URL API, never by concatenation: a folder named ``x?1``
    would otherwise put the study in ``x`` (``?`` starts the query string) and ``a%20b`` would
    name another file. A damaged database is one line naming it and what to do.
    """
    if search_options.storage:
        return search_options.storage
    import sqlite3

    from sqlalchemy.engine import URL

    path = Path(results_dir).resolve() / "optuna.db"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(path)
        try:  # WAL persists in the file: readers never block writers
            db.execute("PRAGMA journal_mode=WAL")
            if db.execute("PRAGMA quick_check(1)").fetchone() != ("ok",):
                raise sqlite3.DatabaseError("database disk image is malformed")
            tables = db.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()
            for (table,) in tables:  # every row decoded once: a study holds kilobytes
                db.execute(f'SELECT * FROM "{table}"').fetchall()
        finally:
            db.close()
    except (sqlite3.DatabaseError, UnicodeDecodeError) as err:  # "file is not a database"...
        raise damaged_database(path, err) from None
    except OSError as err:
        raise SearchError(f"{path}: cannot create the study database ({err.strerror})") from None
    return URL.create("sqlite", database=str(path)).render_as_string(hide_password=False)


def damaged_database(path: Path | str, err: BaseException) -> SearchError:
    """The one line for a damaged SQLite study database: which file, and what to do."""
    first = f"{err}".splitlines()[0][:200] if str(err) else type(err).__name__
    return SearchError(
        f"{path}: damaged study database ({first}); move it aside and run again: the "
        f"searches start over, and the trial records under {Path(path).parent} say which "
        "trials ran"
    )


@contextmanager
def storage_errors(url: str) -> Iterator[None]:
    """Reading a study from a damaged SQLite file fails deep in SQLAlchemy or Optuna: say
    which file is damaged instead (other storages keep their own errors)."""
    import optuna
    from sqlalchemy.exc import SQLAlchemyError

    path = sqlite_path(url)
    try:
        yield
    except (
        SQLAlchemyError,
        optuna.exceptions.StorageInternalError,
        ValueError,  # a flipped byte in a stored JSON column or enum (only storage runs here)
        KeyError,
    ) as err:
        if path is None:
            raise
        raise damaged_database(path, err) from None


def sqlite_path(url: str) -> str | None:
    """The database file of a ``sqlite:`` URL (decoded: ``%3F`` is ``?``), else ``None``."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    return parsed.database if parsed.get_backend_name() == "sqlite" else None


def open_storage(url: str, search_options: SearchOptions) -> optuna.storages.RDBStorage:
    import optuna

    quiet_optuna()
    engine_kwargs = {"connect_args": {"timeout": 60}} if url.startswith("sqlite") else {}
    for attempt in range(5):
        try:
            return optuna.storages.RDBStorage(
                url,
                engine_kwargs=engine_kwargs,
                heartbeat_interval=search_options.heartbeat,
                grace_period=4 * search_options.heartbeat,
                heartbeat_stale_trial_callback=optuna.storages.RetryHeartbeatStaleTrialCallback(
                    max_retry=search_options.max_retry
                ),
            )
        except ImportError as err:
            raise SearchError(
                f"storage {url}: {err} (PostgreSQL needs `pip install dmlbench[postgres]`)"
            ) from err
        except Exception as err:  # sqlalchemy errors: say which URL failed
            # Two workers creating the tables of a fresh database race; the loser retries
            # (PostgreSQL reports an IntegrityError, SQLite "table ... already exists").
            race = "IntegrityError" in type(err).__name__ or "already exists" in str(err)
            if race and attempt < 4:
                time.sleep(1.0 + attempt)
                continue
            raise SearchError(
                f"storage {url}: {type(err).__name__}: {err}".splitlines()[0]
            ) from err
    raise AssertionError("unreachable")


@contextmanager
def claim_lock(storage: Any, url: str, name: str) -> Iterator[None]:
    """One worker at a time looks at the budget and claims a trial."""
    if url.startswith("postgresql"):
        from sqlalchemy import text

        key = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)
        with storage.engine.connect() as conn:
            conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": key})
            try:
                yield
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": key})
        return
    from filelock import FileLock

    # one lock file per study, in a hidden .locks folder beside the database (as the records'
    # locks are); filelock works on every platform the studies may be shared from
    db = Path(sqlite_path(url) or Path(tempfile.gettempdir()) / "dmlbench-optuna")
    locks = db.parent / ".locks"
    locks.mkdir(parents=True, exist_ok=True)
    with FileLock(locks / f"{db.name}.{hashlib.sha256(name.encode()).hexdigest()[:12]}.lock"):
        yield


def quiet_optuna() -> None:
    """Our own one line per trial replaces Optuna's log; its API notes are not for users."""
    import warnings

    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used")
