"""Rows that cannot be read: a listing leaves them out, a read of that one row refuses.

A row written by hand or restored from a bad copy may hold what no record can
(a time past any calendar, text in a number column, JSON that does not parse,
a status no one knows). One such row must not take every list with it: a
listing reads each row on its own and leaves the unreadable ones out
(:func:`each_readable`), while reading that very row says so plainly
(:func:`read_or_refuse`): :class:`StoredDataUnreadable`, a 500-class answer naming
the table and the row, never the caller's 422. Either way the row is logged once
per process (a page polled every second must not flood the log).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TypeVar

from sqlalchemy import Row

from watchkeeper.errors import StoredDataUnreadable

log = logging.getLogger(__name__)

T = TypeVar("T")
#: What reading a stored row may raise when the row, not the code, is at fault:
#: a record's ``UnreadableValue`` and ``from_epoch``'s are ``ValueError``s; drivers raise the
#: others.
UNREADABLE = (ValueError, TypeError, OverflowError, OSError)

#: Rows already logged, by table and key: each is told once per process. Bounded, so
#: rows that keep changing cannot grow it forever.
_told: set[tuple[str, str]] = set()
_TOLD_MAX = 1000


def each_readable(
    table: str,
    rows: Iterable[Any],
    convert: Callable[[Any], T],
    key: str = "id",
) -> Iterator[T]:
    """Each of ``rows`` converted, leaving out (and logging once) those that cannot be read."""
    for row in rows:
        try:
            yield convert(row)
        except UNREADABLE as exc:
            tell_unreadable(table, key_of(row, key), exc, left_out=True)


def read_or_refuse(table: str, row: Any, convert: Callable[[Any], T], key: str = "id") -> T:
    """``row`` converted, or :class:`StoredDataUnreadable` naming the table and the row."""
    try:
        return convert(row)
    except UNREADABLE as exc:
        row_id = key_of(row, key)
        tell_unreadable(table, row_id, exc, left_out=False)
        refused = unreadable(table, row_id, exc)
        refused.told = True
        raise refused from exc


def unreadable(table: str, row_id: object, error: BaseException) -> StoredDataUnreadable:
    """The refusal for ``table``'s row ``row_id``, saying what is wrong and what to do."""
    return StoredDataUnreadable(
        f"stored data could not be read: {table} row {row_id} holds {error}; "
        "the row was written outside watchkeeper or restored from a bad copy: "
        "fix or delete it",
        table,
        row_id,
    )


#: The epoch seconds of 0001-01-01 and of the last second of 9999: what a calendar holds.
_FIRST_EPOCH, _LAST_EPOCH = -62135596800.0, 253402300799.0


def is_epoch(value: Any) -> bool:
    """Whether ``value`` is epoch seconds a calendar holds (finite, years 1 to 9999): the
    check of a time a hot read passes on as a number, without making a time of it."""
    return (
        isinstance(value, float | int)
        and not isinstance(value, bool)
        and _FIRST_EPOCH <= value <= _LAST_EPOCH
    )


def key_of(row: Any, key: str) -> str:
    """The row's key as text, for the log and the answer."""
    mapping: Mapping[Any, Any] = row._mapping if isinstance(row, Row) else row
    return str(mapping.get(key, "?"))


#: What follows for a row, as the log says it.
LEFT_OUT = "It is left out of every listing"
REFUSED = "Reading it answers an error"


def tell_unreadable(table: str, row_id: str, error: BaseException, *, left_out: bool) -> None:
    """Log ``table``'s unreadable row ``row_id`` once per process."""
    outcome = LEFT_OUT if left_out else REFUSED
    tell_once(f"{table} row {row_id}", error, outcome, table=table, row_id=row_id)


def tell_moved(table: str, row_id: str, error: BaseException, outcome: str) -> None:
    """Log that ``table``'s unreadable row ``row_id`` was moved out of the way (``outcome``
    says how): always, since the move happens once, even when a read had told of the row
    before; the reads that meet the row afterwards do not tell of it again."""
    if len(_told) >= _TOLD_MAX:
        _told.clear()
    _told.add((f"{table} row {row_id}", ""))
    log.warning(
        "Stored data could not be read: %s row %s holds %s. %s. Fix the row, or delete it if "
        "what it stands for is gone",
        table,
        row_id,
        error,
        outcome,
        extra={"action": "store_row_set_aside", "table": table, "row_id": row_id},
    )


def tell_once(
    what: str,
    error: BaseException,
    outcome: str,
    *,
    table: str | None = None,
    row_id: str | None = None,
) -> None:
    """Log that ``what`` (a row, or where one was read) holds ``error`` and what follows
    (``outcome``), once per process."""
    told = (what, "" if row_id is not None else str(error))
    if told in _told:
        return
    if len(_told) >= _TOLD_MAX:
        _told.clear()
    _told.add(told)
    log.warning(
        "Stored data could not be read: %s holds %s. %s. Fix the row, or delete it if what "
        "it stands for is gone",
        what,
        error,
        outcome,
        extra={"action": "store_row_unreadable", "table": table, "row_id": row_id},
    )
