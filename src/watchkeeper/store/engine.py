"""Engines for SQLite (WAL, busy timeout) and PostgreSQL, and the transaction helpers.

SQLite is driven with explicit ``BEGIN`` statements (the sqlite3 module's own
implicit transactions are switched off): writers take ``BEGIN IMMEDIATE`` so
two writers queue on the busy timeout instead of failing when a read lock
cannot be upgraded.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DataError, DBAPIError, OperationalError, SQLAlchemyError
from sqlalchemy.pool import ConnectionPoolEntry

from watchkeeper.errors import StoredDataUnreadable, StoreError, StoreUnavailable, ValueRefused
from watchkeeper.records.filling import UnreadableValue, tolerant_json_loads
from watchkeeper.store.fencing import check_fence
from watchkeeper.store.unreadable import REFUSED, tell_once

# Generous on purpose: with many processes on one file, SQLite's busy handler is not fair,
# and a write that waits is better than a press or report that fails.
SQLITE_BUSY_TIMEOUT_MS = 30_000


def _sqlite_on_connect(dbapi_connection: sqlite3.Connection, _record: ConnectionPoolEntry) -> None:
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA journal_mode = WAL")
    cursor.execute("PRAGMA synchronous = NORMAL")
    cursor.execute("PRAGMA foreign_keys = ON")
    cursor.close()


class _WriterGate:
    """One writer at a time per process, queued in Python rather than in SQLite's busy handler.

    SQLite makes a blocked writer sleep and poll (1 ms to 100 ms at a time);
    queueing on a lock hands the database to the next writer at once.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()

    def on_begin(self, connection: Connection) -> None:
        mode = connection.get_execution_options().get("sqlite_begin", "")
        # Bounded wait: should a holder ever leak, SQLite's own busy timeout still keeps order.
        if mode == "IMMEDIATE" and self.lock.acquire(timeout=SQLITE_BUSY_TIMEOUT_MS / 1000):
            connection.info["holds_writer_gate"] = True
        try:
            connection.exec_driver_sql(f"BEGIN {mode}".strip())
        except BaseException:
            self.release(connection)
            raise

    def release(self, connection: Connection) -> None:
        self._release_info(connection.info)

    def on_checkin(self, _dbapi: object, record: ConnectionPoolEntry) -> None:
        # A connection returned to the pool never keeps the gate, whatever ended its transaction.
        self._release_info(record.info)

    def _release_info(self, info: dict[Any, Any]) -> None:
        if info.pop("holds_writer_gate", False):
            self.lock.release()


def make_engine(url: str) -> Engine:
    """Create the engine for ``url``, creating a SQLite file's folder when needed."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database or ""
        if database and database != ":memory:" and not database.startswith("file:"):
            folder = Path(database).parent
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreUnavailable(
                    f"cannot create the data folder {folder}: {exc.strerror}; "
                    "choose a writable data_dir"
                ) from None
        engine = create_engine(
            url,
            connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000},
            pool_size=8,
            max_overflow=32,
            json_deserializer=tolerant_json_loads,
        )
        gate = _WriterGate()
        event.listen(engine, "connect", _sqlite_on_connect)
        event.listen(engine, "begin", gate.on_begin)
        event.listen(engine, "commit", gate.release)
        event.listen(engine, "rollback", gate.release)
        event.listen(engine.pool, "checkin", gate.on_checkin)
        return engine
    # No pre-ping: it costs a round trip on every checkout (most of a decision's time), and a
    # lost connection is found on first use anyway, which invalidates the whole pool.
    return create_engine(url, pool_size=8, max_overflow=32, json_deserializer=tolerant_json_loads)


def is_sqlite(engine: Engine) -> bool:
    """Whether ``engine`` talks to SQLite."""
    return engine.dialect.name == "sqlite"


@contextmanager
def write_transaction(engine: Engine) -> Iterator[Connection]:
    """A transaction that will write: ``BEGIN IMMEDIATE`` on SQLite, so it queues for the
    write lock up front instead of failing when a read lock cannot be upgraded."""
    with engine.connect() as connection:
        if is_sqlite(engine):
            connection = connection.execution_options(sqlite_begin="IMMEDIATE")
        with connection.begin():
            check_fence(connection)
            yield connection


@contextmanager
def translate_errors(action: str) -> Iterator[None]:
    """Turn driver errors into watchkeeper's own, naming what was being done.

    A value a column cannot hold becomes :class:`ValueRefused` (a 422 over the
    API): the HTTP layer validates ranges first, this is the second line. A
    stored value that cannot be read is no caller's fault: it becomes
    :class:`StoredDataUnreadable` (a 500), logged once.
    """
    try:
        yield
    except UnreadableValue as exc:
        # Reading a row outside ``store/unreadable.py``'s helpers: the table and row are
        # not known here, what was being read is.
        tell_once(f"a row read while {action}", exc, REFUSED)
        refused = StoredDataUnreadable(
            f"stored data could not be read while {action}: a row holds {exc}; it was "
            "written outside watchkeeper or restored from a bad copy: fix or delete it"
        )
        refused.told = True
        raise refused from exc
    except DataError as exc:
        # PostgreSQL: integer out of range, NUL in text, a string longer than its column.
        raise ValueRefused(
            f"the database cannot store a value sent while {action}: {_first_line(exc)}; "
            "send a value within the field's documented range"
        ) from exc
    except (OverflowError, UnicodeEncodeError) as exc:
        # Raised by the drivers themselves while binding: SQLite takes integers of 64 bits at
        # most, and neither driver encodes a lone surrogate.
        raise ValueRefused(
            f"the database cannot store a value sent while {action}: {exc}; "
            "send a value within the field's documented range"
        ) from exc
    except OperationalError as exc:
        raise StoreUnavailable(f"database unavailable while {action}: {_first_line(exc)}") from exc
    except DBAPIError as exc:
        if exc.connection_invalidated:
            raise StoreUnavailable(
                f"database connection lost while {action}: {_first_line(exc)}"
            ) from exc
        raise StoreError(f"database error while {action}: {_first_line(exc)}") from exc
    except SQLAlchemyError as exc:
        raise StoreError(f"database error while {action}: {_first_line(exc)}") from exc


def _first_line(exc: BaseException) -> str:
    original: Any = getattr(exc, "orig", None) or exc
    return str(original).strip().splitlines()[0] if str(original).strip() else type(exc).__name__
