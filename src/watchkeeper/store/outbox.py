"""The outbox: delivery rows and inbound dedup. Rows only move forward, one conditional update
at a time; the rules of what to send live in ``notify/``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import func, insert, select, update
from sqlalchemy.exc import IntegrityError

from watchkeeper.clock import to_epoch
from watchkeeper.store.base import Accessor, record_from_row
from watchkeeper.store.engine import write_transaction
from watchkeeper.store.incidents import _event
from watchkeeper.store.schema_notify import deliveries, inbound


class DeliveryStatus(StrEnum):
    """pending -> sending -> sent | failed | maybe_sent (-> pending only for definite non-sends)."""

    PENDING = "pending"
    SENDING = "sending"
    SENT = "sent"
    FAILED = "failed"
    MAYBE_SENT = "maybe_sent"


MAYBE_SENT_NOTE = "the message may not have arrived"


@dataclass(frozen=True, slots=True)
class NewDelivery:
    """A message to enqueue; ``dedup_key`` makes enqueueing it twice a no-op."""

    dedup_key: str
    incident_id: int | None
    purpose: str
    channel: str
    target: dict[str, Any]
    payload: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Delivery(NewDelivery):
    """One delivery row: the message as it was enqueued, and how far its sending got."""

    id: int
    status: DeliveryStatus
    attempts: int
    next_attempt_at: datetime
    platform_message_id: str | None
    error: str | None

    @classmethod
    def from_row(cls, row: Any) -> Delivery:
        """Build from a ``deliveries`` row."""
        status = DeliveryStatus(row._mapping["status"])
        return record_from_row(cls, row, times=("next_attempt_at",), status=status)


class OutboxStore(Accessor):
    """Enqueue, claim and settle deliveries; deduplicate inbound requests."""

    def enqueue(self, items: Sequence[NewDelivery], now: datetime) -> list[int]:
        """Insert the deliveries whose dedup key is new; returns the new ids."""
        if not items:
            return []
        at = to_epoch(now)
        created: list[int] = []
        with self._write("enqueueing messages") as conn:
            keys = [item.dedup_key for item in items]
            known = set(
                conn.execute(
                    select(deliveries.c.dedup_key).where(deliveries.c.dedup_key.in_(keys))
                ).scalars()
            )
            for item in items:
                if item.dedup_key in known:
                    continue
                known.add(item.dedup_key)
                created.append(
                    int(
                        conn.execute(
                            insert(deliveries)
                            .values(
                                dedup_key=item.dedup_key[:300], incident_id=item.incident_id,
                                purpose=item.purpose, channel=item.channel, target=item.target,
                                payload=item.payload, status=DeliveryStatus.PENDING.value,
                                attempts=0, next_attempt_at=at, created_at=at, updated_at=at,
                            )
                            .returning(deliveries.c.id)
                        ).scalar_one()
                    )
                )  # fmt: skip
        return created

    def due(self, now: datetime, limit: int = 100) -> list[Delivery]:
        """Pending deliveries whose time has come, oldest first."""
        statement = (
            select(deliveries)
            .where(
                deliveries.c.status == DeliveryStatus.PENDING.value,
                deliveries.c.next_attempt_at <= to_epoch(now),
            )
            .order_by(deliveries.c.id)
            .limit(limit)
        )
        with self._read("reading due messages") as conn:
            return [Delivery.from_row(row) for row in conn.execute(statement)]

    def claim(self, delivery_id: int, claimer: str, now: datetime) -> bool:
        """pending -> sending, committed before the call; only the claimer may call the platform."""
        statement = (
            update(deliveries)
            .where(
                deliveries.c.id == delivery_id,
                deliveries.c.status == DeliveryStatus.PENDING.value,
            )
            .values(
                status=DeliveryStatus.SENDING.value,
                claimed_by=claimer[:200],
                attempts=deliveries.c.attempts + 1,
                updated_at=to_epoch(now),
            )
        )
        with self._write("claiming a message") as conn:
            return conn.execute(statement).rowcount == 1

    def settle(
        self,
        delivery_id: int,
        status: DeliveryStatus,
        now: datetime,
        *,
        message_id: str | None = None,
        error: str | None = None,
        next_attempt_at: datetime | None = None,
    ) -> bool:
        """sending -> sent / failed / maybe_sent / pending; False if it was no longer sending."""
        values: dict[str, Any] = {
            "status": status.value,
            "updated_at": to_epoch(now),
            "error": error,
        }
        if message_id is not None:
            values["platform_message_id"] = message_id
        if next_attempt_at is not None:
            values["next_attempt_at"] = to_epoch(next_attempt_at)
        statement = (
            update(deliveries)
            .where(
                deliveries.c.id == delivery_id,
                deliveries.c.status == DeliveryStatus.SENDING.value,
            )
            .values(**values)
            .returning(deliveries.c.incident_id, deliveries.c.channel)
        )
        with self._write("settling a message") as conn:
            row = conn.execute(statement).first()
            bad = status in {DeliveryStatus.FAILED, DeliveryStatus.MAYBE_SENT}
            if row is not None and bad and row.incident_id is not None:
                note = MAYBE_SENT_NOTE if status is DeliveryStatus.MAYBE_SENT else "not delivered"
                detail = f"{row.channel}: {note}: {error or ''}".strip()
                _event(conn, row.incident_id, to_epoch(now), f"delivery_{status.value}", detail)
        return row is not None

    def recover_interrupted(self, now: datetime) -> list[int]:
        """At start-up: every row still ``sending`` becomes ``maybe_sent`` (never resent)."""
        with self._read("reading interrupted messages") as conn:
            ids = list(
                conn.execute(
                    select(deliveries.c.id).where(
                        deliveries.c.status == DeliveryStatus.SENDING.value
                    )
                ).scalars()
            )
        return [
            i
            for i in ids
            if self.settle(i, DeliveryStatus.MAYBE_SENT, now, error="interrupted by a restart")
        ]

    def for_incident(self, incident_id: int) -> list[Delivery]:
        """Every delivery of an incident, oldest first."""
        statement = (
            select(deliveries)
            .where(deliveries.c.incident_id == incident_id)
            .order_by(deliveries.c.id)
        )
        with self._read("reading messages") as conn:
            return [Delivery.from_row(row) for row in conn.execute(statement)]

    def get(self, delivery_id: int) -> Delivery:
        """One delivery."""
        with self._read("reading a message") as conn:
            return Delivery.from_row(
                conn.execute(select(deliveries).where(deliveries.c.id == delivery_id)).one()
            )

    def counts(self) -> dict[str, int]:
        """Deliveries by status."""
        statement = select(deliveries.c.status, func.count()).group_by(deliveries.c.status)
        with self._read("counting messages") as conn:
            return {row[0]: int(row[1]) for row in conn.execute(statement)}

    def first_time(self, platform: str, external_id: str, now: datetime) -> bool:
        """Record an inbound request id; False when it was seen before (a platform retry)."""
        try:
            # No translation here: a duplicate's IntegrityError is the answer, not a failure.
            with write_transaction(self._engine) as conn:
                conn.execute(
                    insert(inbound).values(
                        platform=platform, external_id=external_id[:300], received_at=to_epoch(now)
                    )
                )
        except IntegrityError:
            return False
        return True
