"""Queueing deliveries: the one insert both the outbox and routing use.

Routing queues an event's messages in the transaction that marks the event
routed, so it cannot go through the outbox's own transaction; both call
:func:`insert_deliveries` on the connection they hold.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from watchkeeper.store.schema_notify import deliveries

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
    """Insert the deliveries whose dedup key is new, in order; returns the new ids.

    Each row is one insert that skips a known key, so two replicas routing the
    same event at once both succeed and only one of them adds the row.
    """
    dialect_insert = postgresql_insert if conn.dialect.name == "postgresql" else sqlite_insert
    created: list[int] = []
    for item in items:
        statement = (
            dialect_insert(deliveries)
            .values(
                dedup_key=item.dedup_key[:300], incident_id=item.incident_id,
                purpose=item.purpose, channel=item.channel, target=item.target,
                payload=item.payload, status=PENDING, attempts=0,
                next_attempt_at=at, created_at=at, updated_at=at,
            )
            .on_conflict_do_nothing(index_elements=[deliveries.c.dedup_key])
            .returning(deliveries.c.id)
        )  # fmt: skip
        new_id = conn.execute(statement).scalar_one_or_none()
        if new_id is not None:
            created.append(int(new_id))
    return created
