"""Cold starts of runners: begun, failed, and answered by a new runner."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Connection, Table, delete, insert, select, update

from watchkeeper.clock import from_epoch, to_epoch
from watchkeeper.records.queue import Provision
from watchkeeper.store.queue.base import Part
from watchkeeper.store.schema.queue import queue_provisions

_P = queue_provisions.c
# Stored times are microsecond datetimes as float seconds; a stored value
# matches the one read back within half a microsecond, whatever the rounding.
_SAME_TIME_S = 5e-7


class Provisions(Part):
    """One row per (org, fleet) cold start under way or failed."""

    def record_provision(
        self, org: str, fleet: str, state: str, reason: str | None, now: datetime
    ) -> Provision:
        """Record a cold start beginning (``provisioning``) or failing (``failed``)."""
        at = to_epoch(now)
        key = (_P.org == org) & (_P.fleet == fleet)
        with self._write("recording a provision") as conn:
            row = conn.execute(select(queue_provisions).where(key)).first()
            started = at if row is None or state == "provisioning" else row.started_at
            values = {"state": state, "reason": reason, "started_at": started, "updated_at": at}
            if row is None:
                conn.execute(insert(queue_provisions).values(org=org, fleet=fleet, **values))
            else:
                conn.execute(update(queue_provisions).where(key).values(**values))
        return Provision(org, fleet, state, reason, from_epoch(started), now)

    def claim_provision(self, org: str, fleet: str, seen: Provision | None, now: datetime) -> bool:
        """Begin a cold start if the row is still as ``seen`` (absent when ``None``).

        The sweep decides on what it read; between its read and this write
        another replica may have decided the same. One conditional write
        settles it: only one caller gets ``True``, and only that one launches.
        """
        at = to_epoch(now)
        values = {"state": "provisioning", "reason": None, "started_at": at, "updated_at": at}
        with self._write("claiming a provision") as conn:
            if seen is None:
                statement = (
                    _insert_ignoring_duplicates(self._sqlite, queue_provisions)
                    .values(org=org, fleet=fleet, **values)
                    .on_conflict_do_nothing()
                    .returning(_P.org)
                )
                return conn.execute(statement).first() is not None
            unchanged = (
                (_P.org == org)
                & (_P.fleet == fleet)
                & (_P.state == seen.state)
                & _same_time(_P.started_at, seen.started_at)
                & _same_time(_P.updated_at, seen.updated_at)
            )
            done = conn.execute(update(queue_provisions).where(unchanged).values(**values))
            return int(done.rowcount) == 1

    def clear_provisions(self, fleet: str, org: str | None) -> int:
        """Forget the cold starts a new runner of ``fleet`` (tied to ``org``, if any) answers."""
        key = _P.fleet == fleet
        if org is not None:
            key = key & (_P.org == org)
        with self._write("clearing provisions") as conn:
            return int(conn.execute(delete(queue_provisions).where(key)).rowcount)

    def provisions(self) -> list[Provision]:
        """Every recorded cold start."""
        with self._read("reading provisions") as conn:
            return read_provisions(conn)


def read_provisions(conn: Connection) -> list[Provision]:
    """Every recorded cold start, read on ``conn``."""
    return [
        Provision(
            row.org,
            row.fleet,
            row.state,
            row.reason,
            from_epoch(row.started_at),
            from_epoch(row.updated_at),
        )
        for row in conn.execute(select(queue_provisions))
    ]


def _same_time(column: ColumnElement[float], value: datetime) -> ColumnElement[bool]:
    at = to_epoch(value)
    return column.between(at - _SAME_TIME_S, at + _SAME_TIME_S)


def _insert_ignoring_duplicates(sqlite: bool, table: Table) -> Any:
    if sqlite:
        from sqlalchemy.dialects.sqlite import insert as dialect_insert
    else:
        from sqlalchemy.dialects.postgresql import insert as dialect_insert  # type: ignore[assignment]
    return dialect_insert(table)
