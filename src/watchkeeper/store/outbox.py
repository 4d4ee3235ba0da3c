"""The outbox: delivery rows and inbound dedup. Rows only move forward, one conditional update
at a time; the rules of what to send live in ``notify/``."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from sqlalchemy import Connection, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from watchkeeper.clock import from_epoch, to_epoch
from watchkeeper.store.base import Accessor, record_from_row
from watchkeeper.store.engine import translate_errors, write_transaction
from watchkeeper.store.incidents import _event
from watchkeeper.store.listen import announce
from watchkeeper.store.outbox_batch import (
    Exchange,
    Exchanged,
    claim_all,
    lock_paces,
    sent_many,
    start_all,
    write_paces,
)
from watchkeeper.store.queueing import NewDelivery, insert_deliveries
from watchkeeper.store.schema import incident_events
from watchkeeper.store.schema.notify import deliveries, inbound


class DeliveryStatus(StrEnum):
    """pending -> sending -> sent | failed | maybe_sent (-> pending only for definite non-sends,
    claims whose call never started, and resends the platform recognises)."""

    PENDING = "pending"
    SENDING = "sending"
    SENT = "sent"
    FAILED = "failed"
    MAYBE_SENT = "maybe_sent"


MAYBE_SENT_NOTE = "the message may not have arrived"
#: How long a claim lasts when its claimer does not say (the Deliverer always does).
DEFAULT_CLAIM = timedelta(minutes=1)
#: How long after its claim ran out a live replica's send in flight counts as orphaned.
DEFAULT_OVERDUE = timedelta(minutes=5)


@dataclass(frozen=True, slots=True)
class Delivery(NewDelivery):
    """One delivery row: the message as it was enqueued, and how far its sending got."""

    id: int
    status: DeliveryStatus
    attempts: int
    next_attempt_at: datetime
    platform_message_id: str | None
    error: str | None
    #: When the first call whose outcome nobody knows started (it is being sent again).
    unsure_since: datetime | None = None

    @classmethod
    def from_row(cls, row: Any) -> Delivery:
        """Build from a ``deliveries`` row."""
        status = DeliveryStatus(row._mapping["status"])
        return record_from_row(cls, row, times=("next_attempt_at", "unsure_since"), status=status)


@dataclass(frozen=True, slots=True)
class Interrupted:
    """A send in flight whose claimer is gone, as recovery judges it."""

    id: int
    channel: str
    purpose: str
    attempts: int
    #: When its call started; ``None``: it never did, so nothing can have reached the platform.
    call_started_at: datetime | None
    #: When an earlier call whose outcome nobody knows started, if one did.
    unsure_since: datetime | None


@dataclass(frozen=True, slots=True)
class Recovered:
    """What recovery did with the sends in flight of gone claimers, by delivery id."""

    #: Never called: pending again, their attempt given back.
    never_started: list[int] = field(default_factory=list)
    #: Called, to a platform that recognises a resend: pending again, to be sent once more.
    resent: list[int] = field(default_factory=list)
    #: Called, and nobody can tell whether the message arrived: never sent again.
    maybe_sent: list[int] = field(default_factory=list)


#: Says whether a started send may be made again (its platform recognises the resend).
ResendRule = Callable[[Interrupted], bool]


@dataclass(frozen=True, slots=True)
class PaceRequest:
    """The slot a claim takes: each pacing row and its gap, now, and how long it may wait."""

    gaps: dict[str, float]
    now_s: float
    max_wait_s: float
    #: Rows allowing a burst: how long before their ``next_at`` a send may go.
    bursts: dict[str, float] = field(default_factory=dict)


class OutboxStore(Accessor):
    """Enqueue, claim and settle deliveries; deduplicate inbound requests."""

    def enqueue(self, items: Sequence[NewDelivery], now: datetime) -> list[int]:
        """Insert the deliveries whose dedup key is new; returns the new ids.

        Each row is one insert that skips a known key, so two replicas routing
        the same event at once both succeed and only one of them adds the row.
        """
        if not items:
            return []
        with self._write("enqueueing messages") as conn:
            return insert_deliveries(conn, items, to_epoch(now))

    def route(self, event_ids: Sequence[int], items: Sequence[NewDelivery], now: datetime) -> int:
        """Enqueue ``items`` (in their order) and mark the incident events of ``event_ids``
        routed, in one transaction; returns how many deliveries were new.

        A delivery whose dedup key is already queued is skipped, so routing an
        event again (another replica, or a crash before the mark) sends nothing twice.
        """
        at = to_epoch(now)
        created = 0
        with self._write("routing incident events") as conn:
            if items:
                created = len(insert_deliveries(conn, items, at))
            if created:
                announce(conn)  # every replica delivers: wake their deliverers too
            for chunk in range(0, len(event_ids), 500):
                conn.execute(
                    update(incident_events)
                    .where(
                        incident_events.c.id.in_(event_ids[chunk : chunk + 500]),
                        incident_events.c.routed_at.is_(None),
                    )
                    .values(routed_at=at)
                )
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

    def claim(
        self,
        delivery_id: int,
        claimer: str,
        now: datetime,
        claim_for: timedelta = DEFAULT_CLAIM,
    ) -> bool:
        """pending -> sending, committed before the call; only the claimer may call the platform.

        The claim names its replica and lasts ``claim_for`` (the longest call
        and a margin), so other replicas know whose send is in flight.
        """
        statement = _claim(delivery_id, claimer, now, claim_for)
        with self._write("claiming a message") as conn:
            return conn.execute(statement).rowcount == 1

    def start(self, delivery_id: int, claimer: str, now: datetime) -> bool:
        """The claimed row's call starts now (committed before it goes): from here on it may
        reach the platform. False when the row is no longer ``sending`` under ``claimer``."""
        exchange = Exchange(claimer, now, DEFAULT_CLAIM, to_epoch(now), 0.0, starts=[delivery_id])
        with self._write("marking a call started") as conn:
            return bool(start_all(conn, exchange))

    def release(self, delivery_id: int, claimer: str, now: datetime) -> bool:
        """sending -> pending before any call was made: the claim is undone, attempts too.

        Only ``claimer`` may release its claim; False when the row is no longer its own.
        """
        statement = (
            update(deliveries)
            .where(
                deliveries.c.id == delivery_id,
                deliveries.c.status == DeliveryStatus.SENDING.value,
                deliveries.c.claimed_by == claimer[:200],
            )
            .values(
                status=DeliveryStatus.PENDING.value,
                claimed_by=None,
                claim_until=None,
                attempts=deliveries.c.attempts - 1,
                updated_at=to_epoch(now),
            )
        )
        with self._write("releasing a message") as conn:
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
        claimed_by: str | None = None,
    ) -> bool:
        """sending -> sent / failed / maybe_sent / pending; False if it was no longer sending
        (or, with ``claimed_by``, no longer held by that claimer)."""
        with self._write("settling a message") as conn:
            return settle_row(
                conn,
                delivery_id,
                status,
                now,
                message_id=message_id,
                error=error,
                next_attempt_at=next_attempt_at,
                claimed_by=claimed_by,
            )

    def exchange(self, exchange: Exchange) -> Exchanged:
        """Record ``exchange``'s settlements and pauses, mark its calls started, then make its
        claims, in one transaction: per claim, the moment (pace clock) its call may go,
        ``False`` when the row is no longer pending, ``NotYet`` when its slot is further off
        than ``exchange.max_wait_s`` (neither the row nor a slot taken then); and the rows
        whose start was recorded (the claimer's own, still ``sending``).

        Settlements and starts touch only rows the exchange's claimer holds. Every claim
        and start answered is committed before this returns, so each call follows its own
        durable claim and start.
        """
        places = {p[:400] for p in exchange.holds}
        places.update(p[:400] for ask in exchange.claims for p in ask.gaps)
        with self._write("claiming and settling messages") as conn:
            paces = lock_paces(conn, self._sqlite, sorted(places), exchange.now_s)
            before = dict(paces)
            for place, until in exchange.holds.items():
                paces[place[:400]] = max(paces[place[:400]], until)
            sent_many(conn, exchange.settlements, exchange.now, exchange.claimer)
            for s in exchange.settlements:
                if s.status != DeliveryStatus.SENT.value:
                    settle_row(
                        conn,
                        s.delivery_id,
                        DeliveryStatus(s.status),
                        exchange.now,
                        error=s.error,
                        next_attempt_at=s.next_attempt_at,
                        uncalled=s.uncalled,
                        claimed_by=exchange.claimer[:200],
                        unsure_since=s.unsure_since,
                    )
            started = start_all(conn, exchange)
            answers = claim_all(conn, exchange, paces)
            write_paces(conn, before, paces)
        return Exchanged(answers, started)

    def recover_interrupted(self, now: datetime, resend: ResendRule | None = None) -> Recovered:
        """At start-up of a lone process: every row still ``sending`` is recovered (see
        :meth:`recover_orphaned`)."""
        return self.recover_orphaned(now, set(), resend=resend)

    def recover_orphaned(
        self,
        now: datetime,
        live: Collection[str],
        *,
        overdue: timedelta = DEFAULT_OVERDUE,
        resend: ResendRule | None = None,
    ) -> Recovered:
        """The ``sending`` rows whose claimer is gone, each by how far its call got.

        - Its call never started: nothing can have reached the platform, so it goes
          back to ``pending`` (its attempt given back) and is sent as if never claimed.
        - Its call started and ``resend`` says the platform recognises a resend (a nonce
          it enforces, an edit): back to ``pending``, to be sent again, the first unsure
          call's start kept in ``unsure_since``.
        - Its call started otherwise: ``maybe_sent``, never sent again, told on its incident.

        ``live`` names the replicas with a fresh heartbeat: their sends in
        flight are theirs to settle, unless the claim ran out more than
        ``overdue`` ago (an owner stuck that long will not settle it).
        """
        stale_before = to_epoch(now - overdue)
        c = deliveries.c
        with self._read("reading interrupted messages") as conn:
            rows = conn.execute(
                select(
                    c.id,
                    c.claimed_by,
                    c.claim_until,
                    c.channel,
                    c.purpose,
                    c.attempts,
                    c.call_started_at,
                    c.unsure_since,
                )
                .where(c.status == DeliveryStatus.SENDING.value)
                .order_by(c.id)
            ).all()
        orphans = [
            row
            for row in rows
            if row.claimed_by not in live
            or row.claim_until is None
            or row.claim_until < stale_before
        ]
        recovered = Recovered()
        if not orphans:
            return recovered
        with self._write("recovering interrupted messages") as conn:
            for row in orphans:
                interrupted = Interrupted(
                    row.id,
                    row.channel,
                    row.purpose,
                    row.attempts,
                    from_epoch(row.call_started_at),
                    from_epoch(row.unsure_since),
                )
                # Each move holds only while the row is as read: its owner may have moved it on.
                if interrupted.call_started_at is None:
                    if _put_back(conn, row.id, row.claimed_by, now, started=False):
                        recovered.never_started.append(row.id)
                elif resend is not None and resend(interrupted):
                    if _put_back(conn, row.id, row.claimed_by, now, started=True):
                        recovered.resent.append(row.id)
                elif settle_row(
                    conn,
                    row.id,
                    DeliveryStatus.MAYBE_SENT,
                    now,
                    error="interrupted: the replica sending it stopped answering",
                    claimed_by=row.claimed_by,
                ):
                    recovered.maybe_sent.append(row.id)
        return recovered

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
        # A database that cannot be reached is StoreUnavailable, so a webhook can still answer.
        with translate_errors("recording a chat request"):
            try:
                # A duplicate's IntegrityError is the answer, not a failure.
                with write_transaction(self._engine) as conn:
                    conn.execute(
                        insert(inbound).values(
                            platform=platform,
                            external_id=external_id[:300],
                            received_at=to_epoch(now),
                        )
                    )
            except IntegrityError:
                return False
        return True


def _claim(delivery_id: int, claimer: str, now: datetime, claim_for: timedelta) -> Any:
    """pending -> sending for ``claimer`` until ``now + claim_for``; no row when not pending."""
    return (
        update(deliveries)
        .where(
            deliveries.c.id == delivery_id,
            deliveries.c.status == DeliveryStatus.PENDING.value,
        )
        .values(
            status=DeliveryStatus.SENDING.value,
            claimed_by=claimer[:200],
            claim_until=to_epoch(now + claim_for),
            attempts=deliveries.c.attempts + 1,
            updated_at=to_epoch(now),
            call_started_at=None,
        )
    )


def _put_back(
    conn: Connection, delivery_id: int, claimer: str | None, now: datetime, *, started: bool
) -> bool:
    """sending -> pending for a gone claimer's row, if still its own and (``started``) its call
    started or (not ``started``) never did; False otherwise."""
    c = deliveries.c
    values: dict[str, Any] = {
        "status": DeliveryStatus.PENDING.value,
        "claimed_by": None,
        "claim_until": None,
        "updated_at": to_epoch(now),
    }
    if started:
        values["unsure_since"] = func.coalesce(c.unsure_since, c.call_started_at)
        values["error"] = "interrupted mid-call: sent again, which the platform recognises"
    else:
        values["attempts"] = c.attempts - 1  # never called: the attempt is given back
    statement = (
        update(deliveries)
        .where(
            c.id == delivery_id,
            c.status == DeliveryStatus.SENDING.value,
            c.call_started_at.is_not(None) if started else c.call_started_at.is_(None),
            *([] if claimer is None else [c.claimed_by == claimer]),
        )
        .values(**values)
    )
    return conn.execute(statement).rowcount == 1


def settle_row(
    conn: Connection,
    delivery_id: int,
    status: DeliveryStatus,
    now: datetime,
    *,
    message_id: str | None = None,
    error: str | None = None,
    next_attempt_at: datetime | None = None,
    claimed_by: str | None = None,
    uncalled: bool = False,
    unsure_since: datetime | None = None,
) -> bool:
    """sending -> ``status`` on ``conn``, a failure or a maybe told on the incident; False
    if the row was no longer sending (or no longer held by ``claimed_by``). ``uncalled``
    gives back the attempt its claim counted: the platform was never called.
    ``unsure_since`` records when a call of unknown outcome started (an earlier one kept)."""
    values: dict[str, Any] = {
        "status": status.value,
        "updated_at": to_epoch(now),
        "error": error,
    }
    if unsure_since is not None:
        values["unsure_since"] = func.coalesce(deliveries.c.unsure_since, to_epoch(unsure_since))
    if uncalled:
        values["attempts"] = deliveries.c.attempts - 1
    if message_id is not None:
        values["platform_message_id"] = message_id
    if next_attempt_at is not None:
        values["next_attempt_at"] = to_epoch(next_attempt_at)
    statement = (
        update(deliveries)
        .where(
            deliveries.c.id == delivery_id,
            deliveries.c.status == DeliveryStatus.SENDING.value,
            *([] if claimed_by is None else [deliveries.c.claimed_by == claimed_by]),
        )
        .values(**values)
        .returning(deliveries.c.incident_id, deliveries.c.channel)
    )
    row = conn.execute(statement).first()
    bad = status in {DeliveryStatus.FAILED, DeliveryStatus.MAYBE_SENT}
    if row is not None and bad and row.incident_id is not None:
        note = MAYBE_SENT_NOTE if status is DeliveryStatus.MAYBE_SENT else "not delivered"
        detail = f"{row.channel}: {note}: {error or ''}".strip()
        _event(conn, row.incident_id, to_epoch(now), f"delivery_{status.value}", detail)
    return row is not None
