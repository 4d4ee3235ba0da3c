"""What every accessor of the store shares: its engine, its transactions, rows as records."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import Connection, Engine, Row, Table, and_, insert, update

from watchkeeper.records.filling import record_from_mapping
from watchkeeper.store.engine import is_sqlite, translate_errors, write_transaction

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    R = TypeVar("R", bound=DataclassInstance)
else:
    R = TypeVar("R")


class Accessor:
    """One aggregate's reads and moves over one engine; each call is one transaction."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._sqlite = is_sqlite(engine)

    @contextmanager
    def _read(self, action: str) -> Iterator[Connection]:
        """A connection for reads; driver errors name ``action``."""
        with translate_errors(action), self._engine.connect() as conn:
            yield conn

    @contextmanager
    def _write(self, action: str) -> Iterator[Connection]:
        """A write transaction (``BEGIN IMMEDIATE`` on SQLite); driver errors name ``action``."""
        with translate_errors(action), write_transaction(self._engine) as conn:
            yield conn


def record_from_row(
    record: type[R],
    row: Row[Any] | Mapping[str, Any],
    *,
    times: Collection[str] = (),
    check: bool = False,
    **given: Any,
) -> R:
    """``record`` filled from the row's columns of the same names (see
    :func:`watchkeeper.records.filling.record_from_mapping`; ``check`` checks each
    value against its field's type)."""
    m: Mapping[Any, Any] = row._mapping if isinstance(row, Row) else row
    return record_from_mapping(record, m, times=times, check=check, **given)


def upsert(
    conn: Connection, table: Table, key: Mapping[str, Any], values: Mapping[str, Any]
) -> None:
    """Update the row of ``key``, or insert it if absent: an upsert both dialects run alike."""
    where = and_(*(table.c[name] == value for name, value in key.items()))
    if not conn.execute(update(table).where(where).values(**values)).rowcount:
        conn.execute(insert(table).values(**key, **values))


def insert_ignoring_duplicates(engine: Engine, table: Table) -> Any:
    """An ``INSERT`` of the engine's dialect, to be finished with ``on_conflict_do_nothing``."""
    if is_sqlite(engine):
        from sqlalchemy.dialects.sqlite import insert as dialect_insert
    else:
        from sqlalchemy.dialects.postgresql import insert as dialect_insert  # type: ignore[assignment]
    return dialect_insert(table)
