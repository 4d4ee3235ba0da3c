"""Queueing deliveries: the one insert every queueing transaction uses.

Routing queues an event's messages in the transaction that marks the event
routed, and a silence's end notice in the one that marks it announced, so
neither can go through a transaction of the outbox's own enqueue; all call
:func:`insert_deliveries` on the connection they hold.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from watchkeeper.store.schema.notify import deliveries

#: A new delivery's first status (the outbox's ``pending``).
PENDING = "pending"


@dataclass(frozen=True, slots=True)
class NewDelivery:
    """A message to enqueue; ``dedup_key`` makes enqueueing it twice a no-op."""

    dedup_key: str
    incident_id: int | None
    purpose: str
    channel: str
    target: dict[str, Any]
    payload: dict[str, Any]


def insert_deliveries(conn: Connection, items: Sequence[NewDelivery], at: float) -> list[int]:
    """Insert the deliveries whose dedup key is new, in order; returns the new ids, in order.

    Each row skips a known key as it goes in, so two replicas routing the same
    events at once both succeed and only one adds each row; the rows travel in a
    few multi-row statements (the driver's "insert many values"), not one each.
    """
    if not items:
        return []
    rows = [
        {
            "dedup_key": item.dedup_key[:300],
            "incident_id": item.incident_id,
            "purpose": item.purpose,
            "channel": item.channel,
            "target": item.target,
            "payload": item.payload,
            "status": PENDING,
            "attempts": 0,
            "next_attempt_at": at,
            "created_at": at,
            "updated_at": at,
        }
        for item in items
    ]
    statement = _NEW_ROWS[conn.dialect.name == "sqlite"]
    # Ids are handed out in the order of the rows; RETURNING need not keep that order.
    return sorted(int(new_id) for new_id in conn.execute(statement, rows).scalars())


_NEW_ROWS = {
    sqlite: dialect_insert(deliveries)
    .on_conflict_do_nothing(index_elements=[deliveries.c.dedup_key])
    .returning(deliveries.c.id)
    for sqlite, dialect_insert in ((True, sqlite_insert), (False, postgresql_insert))
}
