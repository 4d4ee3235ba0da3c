"""Deliveries in flight belong to the replica that claimed them.

A replica starting up, or any replica looking for orphans, recovers only the
``sending`` rows whose claimer is gone (or whose claim ran out long ago): a
started call becomes ``maybe_sent`` (one never started is sent again, see
``test_unstarted_sends.py``); a live replica's sends in flight are left to it.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from sqlalchemy import select

from watchkeeper.clock import ManualClock, to_epoch
from watchkeeper.notify.channels.base import Channel, SendOutcome, SendResult
from watchkeeper.notify.deliverer import CLAIM_FOR, Deliverer
from watchkeeper.notify.message import Message, Target
from watchkeeper.store import Store
from watchkeeper.store.incidents import Changes, IncidentKey, Opening
from watchkeeper.store.outbox import DeliveryStatus, Recovered
from watchkeeper.store.queueing import NewDelivery
from watchkeeper.store.schema.notify import deliveries

LIVE = "host-a:101:aaaaaa"
GONE = "host-b:202:bbbbbb"


def incident(store: Store, clock: ManualClock) -> int:
    """An open incident for the deliveries to tell about."""
    key = IncidentKey("crawl", "r1", "stalled")
    opening = Opening(key, "crawl r1", "no progress", clock(), "t1", None, "none")
    (incident_id,) = store.incidents.apply(Changes([opening]), clock()).opened
    return incident_id


def enqueue(store: Store, clock: ManualClock, incident_id: int | None, *keys: str) -> list[int]:
    items = [
        NewDelivery(
            key,
            incident_id,
            "card",
            "log",
            Target("log", "ops").as_dict(),
            Message(f"about {key}").as_dict(),
        )
        for key in keys
    ]
    return store.outbox.enqueue(items, clock())


def claim_columns(store: Store, delivery_id: int) -> tuple[str | None, float | None]:
    with store.engine.connect() as conn:
        row = conn.execute(
            select(deliveries.c.claimed_by, deliveries.c.claim_until).where(
                deliveries.c.id == delivery_id
            )
        ).one()
    return row.claimed_by, row.claim_until


def test_a_claim_names_its_replica_and_lasts_the_given_time(
    store: Store, clock: ManualClock
) -> None:
    (delivery,) = enqueue(store, clock, None, "k1")
    assert store.outbox.claim(delivery, LIVE, clock(), timedelta(seconds=45))
    assert claim_columns(store, delivery) == (LIVE, to_epoch(clock()) + 45)


def test_recovery_leaves_a_live_replicas_sends_alone(store: Store, clock: ManualClock) -> None:
    incident_id = incident(store, clock)
    mine, theirs, orphan = enqueue(store, clock, incident_id, "k1", "k2", "k3")
    for delivery, claimer in ((mine, LIVE), (theirs, LIVE), (orphan, GONE)):
        assert store.outbox.claim(delivery, claimer, clock(), timedelta(minutes=1))
        assert store.outbox.start(delivery, claimer, clock())

    assert store.outbox.recover_orphaned(clock.advance(5), {LIVE}) == Recovered(maybe_sent=[orphan])

    assert store.outbox.get(mine).status is DeliveryStatus.SENDING
    assert store.outbox.get(theirs).status is DeliveryStatus.SENDING
    assert store.outbox.get(orphan).status is DeliveryStatus.MAYBE_SENT
    # The orphan is told on its incident, as an interrupted send always was.
    told = [e.type for _, i, e in store.incidents.events_after(0) if i == incident_id]
    assert told.count("delivery_maybe_sent") == 1
    # The live owner settles its own rows as usual.
    assert store.outbox.settle(theirs, DeliveryStatus.SENT, clock(), message_id="m2")


def test_a_claim_that_ran_out_long_ago_is_recovered_even_from_a_live_replica(
    store: Store, clock: ManualClock
) -> None:
    (delivery,) = enqueue(store, clock, None, "k1")
    assert store.outbox.claim(delivery, LIVE, clock(), timedelta(minutes=1))
    assert store.outbox.start(delivery, LIVE, clock())
    overdue = timedelta(minutes=5)

    # Past its claim, but not long past: the owner may still settle it.
    clock.advance(60 + 299)
    assert store.outbox.recover_orphaned(clock(), {LIVE}, overdue=overdue) == Recovered()
    clock.advance(2)
    recovered = store.outbox.recover_orphaned(clock(), {LIVE}, overdue=overdue)
    assert recovered == Recovered(maybe_sent=[delivery])
    assert store.outbox.get(delivery).status is DeliveryStatus.MAYBE_SENT


def test_a_lone_process_still_recovers_every_send_in_flight(
    store: Store, clock: ManualClock
) -> None:
    first, second = enqueue(store, clock, None, "k1", "k2")
    for delivery, claimer in ((first, LIVE), (second, GONE)):
        assert store.outbox.claim(delivery, claimer, clock(), timedelta(minutes=1))
        assert store.outbox.start(delivery, claimer, clock())
    assert store.outbox.recover_interrupted(clock()).maybe_sent == [first, second]


class Inspecting(Channel):
    """Looks at its own row while sending: claimed, by whom, until when."""

    name = "log"

    def __init__(self, store: Store) -> None:
        self.store = store
        self.seen: list[tuple[str | None, float | None]] = []

    async def send(self, target: Target, message: Message, idempotency_key: str) -> SendResult:
        delivery_id = int(idempotency_key.removeprefix("wk"))
        self.seen.append(await asyncio.to_thread(claim_columns, self.store, delivery_id))
        return SendResult(SendOutcome.SENT, message_id="m1")

    async def edit(self, target: Target, message: Message) -> Any:
        raise AssertionError("no edits here")


def test_the_deliverer_claims_in_its_replicas_name_for_the_call_and_a_margin(
    store: Store, clock: ManualClock
) -> None:
    (delivery,) = enqueue(store, clock, None, "k1")
    channel = Inspecting(store)
    deliverer = Deliverer(store, {"log": channel}, clock, ManualClock(100.0), claimer=LIVE)

    assert asyncio.run(deliverer.deliver_due()) == 1

    assert channel.seen == [(LIVE, to_epoch(clock() + CLAIM_FOR))]
    assert CLAIM_FOR.total_seconds() > 30.0  # longer than a call may take
    assert store.outbox.get(delivery).status is DeliveryStatus.SENT
