"""The statements that move push runs: one ``UPDATE ... RETURNING`` per shape of move,
compiled once for the driver and sent through it as it is (both drivers prepare a
statement they see again).

A progress report's statement also tells, in the same ``UPDATE``, whether the report
repeats the one before it (:func:`report_values`): the hot path pays no read for it.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, Integer, and_, bindparam, case, literal, literal_column, update
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql.elements import BindParameter

from watchkeeper.contract import ACTIVE_STATUSES
from watchkeeper.store.schema import push_runs

ACTIVE = [status.value for status in ACTIVE_STATUSES]
#: What a progress report may name about where the work is: when each one it names is what
#: the run already holds, the report repeats the one before it.
SAID = ("step", "done", "total")


@contextmanager
def driver_errors(conn: Connection) -> Iterator[Any]:
    """A driver cursor on ``conn``'s transaction; its errors raised as SQLAlchemy raises them.

    A lost connection is invalidated, so the pool does not hand it out again.
    """
    dbapi_connection = conn.connection.driver_connection
    assert dbapi_connection is not None
    dialect = conn.dialect
    dbapi = dialect.loaded_dbapi
    cursor = dbapi_connection.cursor()
    try:
        yield cursor
    except dbapi.Error as exc:
        lost = dialect.is_disconnect(exc, dbapi_connection, cursor)
        if lost:
            conn.invalidate(exc)
        raise DBAPIError.instance(
            None, None, exc, dbapi.Error, connection_invalidated=lost, dialect=dialect
        ) from exc
    finally:
        if not conn.invalidated:
            cursor.close()


@functools.lru_cache(maxsize=128)
def move_sql(
    dialect: Dialect, keys: tuple[str, ...], counts_as_move: bool, report: bool = False
) -> tuple[str, tuple[str, ...], dict[str, Any]]:
    """A move's statement in the driver's own terms, made once per shape of move: its text,
    the order of its parameters (none: named) and the values it carries itself."""
    compiled = _move_statement(keys, counts_as_move, report).compile(dialect=dialect)
    names = tuple(compiled.positiontup or ()) if compiled.positional else ()
    return str(compiled), names, dict(compiled.params)


def _move_statement(keys: tuple[str, ...], counts_as_move: bool, report: bool = False) -> Any:
    """One UPDATE per shape of move."""
    values: dict[str, Any] = {key: bindparam(f"v_{key}") for key in keys}
    values.update(updated_at=bindparam("v_updated_at"), seen_at=bindparam("v_seen_at"))
    if report:
        values.update(report_values(keys))
    elif counts_as_move:
        values["version"] = push_runs.c.version + 1
    return (
        update(push_runs)
        .where(
            and_(
                push_runs.c.run_id == bindparam("w_run_id"),
                push_runs.c.kind == bindparam("w_kind"),
                # Plain parameters, not an expanding IN: that one is re-rendered on every call.
                push_runs.c.status.in_([literal(status) for status in ACTIVE]),
            )
        )
        .values(values)
        .returning(*push_runs.c)
    )


#: Constants written into a report's statement, never sent as parameters.
_ZERO = literal_column("0", Integer)
_ONE = literal_column("1", Integer)


def report_values(keys: tuple[str, ...]) -> dict[str, Any]:
    """What a progress report sets besides what it carries: it repeats the report before
    it when each of :data:`SAID` it names is what the run holds (an UPDATE's expressions
    read the row as it was) and the run holds a report to compare with; a repeat counts one
    more and moves nothing, anything else moves the run. A report that names none of them
    cannot be told from another: it moves the run and leaves nothing to compare with."""
    c = push_runs.c
    at: BindParameter[float] = bindparam("v_reported_at")
    named = [key for key in SAID if key in keys]
    if not named:
        return {
            "reported_at": at,
            "progress_at": at,
            "repeats": _ZERO,
            "version": c.version + 1,
        }
    same = and_(c.repeats > 0, *(c[key] == bindparam(f"v_{key}") for key in named))
    return {
        "reported_at": at,
        "progress_at": case((same, c.progress_at), else_=at),
        "repeats": case((same, c.repeats + 1), else_=_ONE),
        "version": c.version + case((same, _ZERO), else_=_ONE),
    }
