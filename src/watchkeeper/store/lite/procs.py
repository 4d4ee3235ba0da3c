"""A run's record on the embedded SQLite file through the standard library's ``sqlite3``.

``watchkeeper run`` records a run, starts it and settles it; loading SQLAlchemy for that
costs more than everything else the command does. :class:`LiteRuns` makes the same moves
as :class:`watchkeeper.store.procs.ProcStore` (the :class:`~watchkeeper.procs.moves.RunMoves`
protocol), with the same statements, on the same file, under the same locking rules
(``BEGIN IMMEDIATE`` for every write, the same busy timeout and pragmas), and stores the
same values: ``tests/integration/procs/test_lite_runs.py`` holds the two to equal rows.
It opens only a file that exists at the shipped schema (:func:`open_lite`); creating or
migrating one is left to the full store.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from watchkeeper.clock import to_epoch
from watchkeeper.errors import NotFound, StoreError, StoreUnavailable, ValueRefused
from watchkeeper.records.procs import (
    ACTIVE,
    HookState,
    NewProc,
    ProcRun,
    ProcStatus,
    Started,
    run_from_columns,
)

#: As :data:`watchkeeper.store.engine.SQLITE_BUSY_TIMEOUT_MS`, which loads SQLAlchemy.
BUSY_TIMEOUT_MS = 30_000
_ACTIVE = tuple(status.value for status in ACTIVE)
_IS_ACTIVE = f"status IN ({', '.join('?' * len(_ACTIVE))})"
#: A value that says "one more than now" in an update, as ``version + 1`` does.
_NEXT = object()


def open_lite(database: Path, shipped_head: str) -> LiteRuns | None:
    """The runs of the SQLite file ``database``; ``None`` when it does not exist or is not
    at ``shipped_head`` (the full store creates and migrates)."""
    if not database.is_file():
        return None
    try:
        connection = sqlite3.connect(database, isolation_level=None, check_same_thread=False)
    except sqlite3.Error:
        return None
    runs = LiteRuns(connection)
    try:
        revision = connection.execute("SELECT version_num FROM alembic_version").fetchone()
    except sqlite3.Error:
        revision = None
    if revision is None or revision[0] != shipped_head:
        runs.close()
        return None
    return runs


class LiteRuns:
    """Moves process runs on one SQLite connection; see the module."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._db = connection
        self._db.row_factory = sqlite3.Row
        self._db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        self._db.execute("PRAGMA journal_mode = WAL")
        self._db.execute("PRAGMA synchronous = NORMAL")
        self._db.execute("PRAGMA foreign_keys = ON")

    def close(self) -> None:
        """Close the connection."""
        self._db.close()

    @contextmanager
    def _write(self, action: str) -> Iterator[sqlite3.Connection]:
        with _told(action):
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _update(
        self, conn: sqlite3.Connection, values: dict[str, Any], where: str, *args: Any
    ) -> int:
        assignments = ", ".join(
            f"{name} = {name} + 1" if value is _NEXT else f"{name} = ?"
            for name, value in values.items()
        )
        given = [value for value in values.values() if value is not _NEXT]
        statement = f"UPDATE proc_runs SET {assignments} WHERE {where}"  # noqa: S608 - names ours
        return conn.execute(statement, (*given, *args)).rowcount

    def register(
        self,
        new: NewProc,
        now: datetime,
        *,
        engine_key: str | None = None,
        witness_key: str | None = None,
    ) -> ProcRun:
        """As :meth:`watchkeeper.store.procs.runs.Runs.register`."""
        at = to_epoch(now)
        hooks = HookState.WAITING if (new.on_done_cmd or new.on_done_url) else HookState.NONE
        values = {
            "run_id": new.run_id,
            "name": new.name,
            "argv": json.dumps(list(new.argv)),
            "cwd": new.cwd,
            "host": new.host,
            "engine_key": engine_key or new.host,
            "witness_key": witness_key,
            "username": new.user,
            "boot_id": new.boot_id,
            "status": ProcStatus.STARTING.value,
            "detach": int(new.detach),
            "budget_s": new.budget_s,
            "timeout_s": new.timeout_s,
            # SQLAlchemy's JSON column stores Python's None as JSON null, not SQL NULL.
            "origin": json.dumps(new.origin),
            "session": new.session,
            "on_done_cmd": new.on_done_cmd,
            "on_done_url": new.on_done_url,
            "created_at": at,
            "updated_at": at,
            "log_size": 0,
            "version": 1,
            "hook_state": hooks.value,
        }
        columns = ", ".join(values)
        marks = ", ".join("?" * len(values))
        with self._write("registering a process run") as conn:
            statement = f"INSERT INTO proc_runs ({columns}) VALUES ({marks})"  # noqa: S608 - ours
            conn.execute(statement, tuple(values.values()))
        return self.get(new.run_id)

    def mark_started(self, run_id: str, started: Started, now: datetime) -> None:
        """As :meth:`watchkeeper.store.procs.runs.Runs.mark_started`."""
        at = to_epoch(now)
        owner = {
            "shim_pid": started.shim_pid,
            "shim_start": started.shim_start,
            "pid": started.pid,
            "pid_start": started.pid_start,
            "pgid": started.pgid,
            "updated_at": at,
        }
        moved = {
            "status": ProcStatus.RUNNING.value,
            "started_at": at,
            "progress_at": at,
            "version": _NEXT,
        }
        with self._write("recording a started process") as conn:
            self._update(conn, owner, "run_id = ?", run_id)
            self._update(
                conn, moved, "run_id = ? AND status = ?", run_id, ProcStatus.STARTING.value
            )

    def finish(
        self,
        run_id: str,
        status: ProcStatus,
        now: datetime,
        *,
        exit_code: int | None = None,
        signal: int | None = None,
        reason: str | None = None,
        finished_at: datetime | None = None,
    ) -> bool:
        """As :meth:`watchkeeper.store.procs.runs.Runs.finish`."""
        at = to_epoch(now)
        values = {
            "status": status.value,
            "exit_code": exit_code,
            "signal": signal,
            "reason": reason,
            "finished_at": to_epoch(finished_at or now),
            "updated_at": at,
            "version": _NEXT,
        }
        with self._write("ending a process run") as conn:
            changed = self._move_active(conn, run_id, values)
            # Hooks become due in the same transaction that ends the run: none is ever lost.
            self._update(
                conn,
                {"hook_state": HookState.PENDING.value},
                "run_id = ? AND hook_state = ?",
                run_id,
                HookState.WAITING.value,
            )
        return changed

    def witness_key(self, run_id: str) -> str | None:
        """As :meth:`watchkeeper.store.procs.runs.Runs.witness_key`."""
        with _told("reading a witness key"):
            row = self._db.execute(
                "SELECT witness_key FROM proc_runs WHERE run_id = ?", (run_id,)
            ).fetchone()
        return None if row is None else row[0]

    def note_forged(self, run_id: str, note: str, now: datetime) -> bool:
        """As :meth:`watchkeeper.store.procs.runs.Runs.note_forged`."""
        values = {"reason": note, "updated_at": to_epoch(now), "version": _NEXT}
        with self._write("recording a forged witness") as conn:
            where = f"run_id = ? AND {_IS_ACTIVE} AND reason IS NULL"
            return self._update(conn, values, where, run_id, *_ACTIVE) == 1

    def set_started_at(self, run_id: str, started_at: datetime) -> None:
        """As :meth:`watchkeeper.store.procs.runs.Runs.set_started_at`."""
        values = {"started_at": to_epoch(started_at)}
        with self._write("recording a start time") as conn:
            self._update(conn, values, "run_id = ? AND started_at IS NULL", run_id)

    def observe_log(
        self, run_id: str, size: int, mtime: float, now: datetime, *, progressed: bool
    ) -> bool:
        """As :meth:`watchkeeper.store.procs.runs.Runs.observe_log`."""
        at = to_epoch(now)
        values: dict[str, Any] = {"log_size": size, "log_mtime": mtime}
        if progressed:
            values.update(progress_at=at, updated_at=at, version=_NEXT)
        with self._write("recording log growth") as conn:
            return self._move_active(conn, run_id, values)

    def request_abort(self, run_id: str, now: datetime, reason: str, *, cancel: bool) -> None:
        """As :meth:`watchkeeper.store.procs.runs.Runs.request_abort`."""
        at = to_epoch(now)
        values: dict[str, Any] = {"reason": reason, "updated_at": at}
        if cancel:
            values["abort_requested_at"] = at
        with self._write("recording an abort") as conn:
            self._move_active(conn, run_id, values)

    def get(self, run_id: str) -> ProcRun:
        """As :meth:`watchkeeper.store.procs.runs.Runs.get`."""
        with _told("reading a process run"):
            row = self._db.execute("SELECT * FROM proc_runs WHERE run_id = ?", (run_id,)).fetchone()
        if row is None:
            raise NotFound(f"no process run {run_id!r}: see `watchkeeper ps --all`")
        return _run(row)

    def active_on(self, engine_key: str) -> list[ProcRun]:
        """As :meth:`watchkeeper.store.procs.runs.Runs.active_on`."""
        # Runs recorded before data folders were named carry the bare host (see ``kept_by``).
        keys = (engine_key, engine_key.split(":", 1)[0])
        with _told("reading active process runs"):
            rows = self._db.execute(
                f"SELECT * FROM proc_runs WHERE {_IS_ACTIVE} AND engine_key IN (?, ?)",  # noqa: S608
                (*_ACTIVE, *keys),
            ).fetchall()
        return [_run(row) for row in rows]

    def hooks_due(self, engine_key: str) -> bool:
        """Whether an ended run of ``engine_key`` has completion hooks waiting to be fired."""
        keys = (engine_key, engine_key.split(":", 1)[0])
        with _told("reading due hooks"):
            row = self._db.execute(
                "SELECT 1 FROM proc_runs WHERE hook_state = ? AND engine_key IN (?, ?) LIMIT 1",
                (HookState.PENDING.value, *keys),
            ).fetchone()
        return row is not None

    def _move_active(self, conn: sqlite3.Connection, run_id: str, values: dict[str, Any]) -> bool:
        return self._update(conn, values, f"run_id = ? AND {_IS_ACTIVE}", run_id, *_ACTIVE) == 1


def _run(row: sqlite3.Row) -> ProcRun:
    columns = dict(zip(row.keys(), row, strict=True))
    # The JSON columns, as SQLAlchemy's JSON type decodes them for the full store.
    columns["argv"] = json.loads(columns["argv"])
    columns["origin"] = None if columns["origin"] is None else json.loads(columns["origin"])
    return run_from_columns(columns)


@contextmanager
def _told(action: str) -> Iterator[None]:
    """The driver's errors as the full store tells them (:func:`store.engine.translate_errors`)."""
    try:
        yield
    except (OverflowError, UnicodeEncodeError) as exc:
        raise ValueRefused(
            f"the database cannot store a value sent while {action}: {exc}; "
            "send a value within the field's documented range"
        ) from exc
    except sqlite3.OperationalError as exc:
        raise StoreUnavailable(f"database unavailable while {action}: {_first_line(exc)}") from exc
    except sqlite3.Error as exc:
        raise StoreError(f"database error while {action}: {_first_line(exc)}") from exc


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
