"""A claim is not a call: recovery sends again every row whose call provably never started.

A deliverer claims a row before it waits for its slot, its platform's calls in
flight and the send gate, and records the call's start right before the call.
A row whose claimer is gone goes back to pending when no start was recorded;
a started one is ``maybe_sent``, unless its platform recognises the resend
(Discord's nonce, within its window; an edit).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import timedelta

import pytest
from alembic import command
from sqlalchemy import select, text

from watchkeeper.clock import ManualClock, to_epoch
from watchkeeper.notify.channels.base import Channel, SendOutcome, SendResult
from watchkeeper.notify.channels.discord import DiscordChannel
from watchkeeper.notify.deliverer import MAX_SAFE_RESENDS, Deliverer
from watchkeeper.notify.message import Message, Target
from watchkeeper.store import Store
from watchkeeper.store.migrate import alembic_config, upgrade
from watchkeeper.store.outbox import DeliveryStatus, Recovered
from watchkeeper.store.outbox_batch import Exchange, Settlement
from watchkeeper.store.queueing import NewDelivery
from watchkeeper.store.schema.notify import deliveries

from ..fakes.discord import FakeDiscord, fake_discord
from .chat import CARD, config, send
from .test_owned_deliveries import GONE, LIVE, enqueue, incident

CLAIM = timedelta(minutes=1)


class Recording(Channel):
    """A platform that takes every message and remembers each send's key."""

    name = "log"
    per_chat_rate = 1000.0

    def __init__(self) -> None:
        self.keys: list[str] = []

    async def send(self, target: Target, message: Message, idempotency_key: str) -> SendResult:
        self.keys.append(idempotency_key)
        return SendResult(SendOutcome.SENT, message_id=f"m-{idempotency_key}")

    async def edit(self, target: Target, message: Message) -> SendResult:
        return SendResult(SendOutcome.SENT, message_id=target.message_id)


@pytest.fixture
def discord() -> Iterator[FakeDiscord]:
    with fake_discord() as started:
        started.per_channel_limit = None
        yield started


def deliver(deliverer: Deliverer) -> int:
    """One delivery pass in an event loop of its own; its channels closed after."""

    async def go() -> int:
        try:
            return await deliverer.deliver_due()
        finally:
            for channel in deliverer.channels.values():
                await channel.aclose()

    return asyncio.run(go())


def discord_card(store: Store, clock: ManualClock, key: str) -> int:
    item = NewDelivery(
        key, None, "card", "discord", Target("discord", FakeDiscord.CHAT).as_dict(), CARD.as_dict()
    )
    (delivery_id,) = store.outbox.enqueue([item], clock())
    return delivery_id


def test_a_claim_whose_call_never_started_is_sent_after_its_claimer_died(
    store: Store, clock: ManualClock
) -> None:
    incident_id = incident(store, clock)
    waiting, calling = enqueue(store, clock, incident_id, "k1", "k2")
    for delivery in (waiting, calling):
        assert store.outbox.claim(delivery, GONE, clock(), CLAIM)
    assert store.outbox.start(calling, GONE, clock())
    # GONE dies here: ``waiting`` was waiting for its slot, ``calling`` was on the wire.

    recovered = store.outbox.recover_orphaned(clock.advance(5), {LIVE})

    assert recovered == Recovered(never_started=[waiting], maybe_sent=[calling])
    row = store.outbox.get(waiting)
    assert (row.status, row.attempts) == (DeliveryStatus.PENDING, 0)  # the claim is given back
    assert store.outbox.get(calling).status is DeliveryStatus.MAYBE_SENT
    told = [e.type for _, i, e in store.incidents.events_after(0) if i == incident_id]
    assert told.count("delivery_maybe_sent") == 1  # only the started one may not have arrived
    platform = Recording()
    assert deliver(Deliverer(store, {"log": platform}, clock, claimer=LIVE)) == 1
    assert platform.keys == [f"wk{waiting}"]
    assert store.outbox.get(waiting).status is DeliveryStatus.SENT


def test_a_deliverer_marks_each_call_started_before_making_it(
    store: Store, clock: ManualClock
) -> None:
    seen: list[tuple[str, float | None]] = []

    class Looking(Recording):
        async def send(self, target: Target, message: Message, idempotency_key: str) -> SendResult:
            delivery_id = int(idempotency_key.removeprefix("wk"))
            row = await asyncio.to_thread(store.outbox.get, delivery_id)
            started = await asyncio.to_thread(started_at, store, delivery_id)
            seen.append((row.status.value, started))
            return await super().send(target, message, idempotency_key)

    enqueue(store, clock, None, "k1", "k2")
    assert deliver(Deliverer(store, {"log": Looking()}, clock, claimer=LIVE)) == 2
    assert seen == [("sending", to_epoch(clock()))] * 2


def started_at(store: Store, delivery_id: int) -> float | None:
    """When the row's call was marked started."""
    with store.engine.connect() as conn:
        return conn.execute(
            select(deliveries.c.call_started_at).where(deliveries.c.id == delivery_id)
        ).scalar()


def test_a_started_discord_card_is_sent_again_and_discord_answers_with_the_first_message(
    store: Store, clock: ManualClock, discord: FakeDiscord
) -> None:
    delivery = discord_card(store, clock, "d1")
    assert store.outbox.claim(delivery, GONE, clock(), CLAIM)
    assert store.outbox.start(delivery, GONE, clock())
    # Its request reached Discord; GONE died before it read the answer.
    first = send(discord, CARD, f"wk{delivery}")
    assert first.outcome is SendOutcome.SENT

    deliverer = Deliverer(store, {"discord": DiscordChannel(config(discord))}, clock, claimer=LIVE)
    assert deliverer.recover_orphaned(clock.advance(30), {LIVE}) == []
    row = store.outbox.get(delivery)
    assert (row.status, row.unsure_since) == (
        DeliveryStatus.PENDING,
        clock() - timedelta(seconds=30),
    )
    assert deliver(deliverer) == 1

    row = store.outbox.get(delivery)
    assert (row.status, row.platform_message_id) == (DeliveryStatus.SENT, first.message_id)
    creates = [c for c in discord.calls if c.method == "POST"]
    assert [c.body["nonce"] for c in creates] == [f"wk{delivery}"] * 2
    assert len(discord.created_with(f"wk{delivery}")) == 1  # the resend made no second message


def test_a_started_discord_card_past_the_resend_window_is_maybe_sent(
    store: Store, clock: ManualClock, discord: FakeDiscord
) -> None:
    late, waited = discord_card(store, clock, "d1"), discord_card(store, clock, "d2")
    for delivery in (late, waited):
        assert store.outbox.claim(delivery, GONE, clock(), CLAIM)
        assert store.outbox.start(delivery, GONE, clock())
    window = DiscordChannel.resend_window
    deliverer = Deliverer(store, {"discord": DiscordChannel(config(discord))}, clock, claimer=LIVE)

    # Recovered past the window: Discord may no longer recognise the nonce.
    assert deliverer.recover_orphaned(clock.advance(window.total_seconds() + 1), {LIVE}) == [
        late,
        waited,
    ]
    assert deliver(deliverer) == 0
    assert discord.calls == []


def test_a_resend_that_waited_past_the_window_is_not_made(
    store: Store, clock: ManualClock, discord: FakeDiscord
) -> None:
    delivery = discord_card(store, clock, "d1")
    assert store.outbox.claim(delivery, GONE, clock(), CLAIM)
    assert store.outbox.start(delivery, GONE, clock())
    deliverer = Deliverer(store, {"discord": DiscordChannel(config(discord))}, clock, claimer=LIVE)
    assert deliverer.recover_orphaned(clock.advance(10), {LIVE}) == []  # to be sent again
    clock.advance(DiscordChannel.resend_window.total_seconds())  # ... but it waited too long

    assert deliver(deliverer) == 1
    row = store.outbox.get(delivery)
    assert row.status is DeliveryStatus.MAYBE_SENT
    assert "too long ago" in (row.error or "")
    assert discord.calls == []


def test_an_edit_cut_off_mid_call_is_made_again_but_a_card_only_so_often(
    store: Store, clock: ManualClock
) -> None:
    edit = NewDelivery(
        "e1",
        None,
        "update",
        "log",
        Target("log", "ops", message_id="m1").as_dict(),
        Message("edited").as_dict(),
    )
    (edited,) = store.outbox.enqueue([edit], clock())
    for _ in range(MAX_SAFE_RESENDS):
        assert store.outbox.claim(edited, GONE, clock(), CLAIM)
        assert store.outbox.start(edited, GONE, clock())
        assert Deliverer(store, {}, clock, claimer=LIVE).recover_orphaned(clock(), {LIVE}) == []
        assert store.outbox.get(edited).status is DeliveryStatus.PENDING
    assert store.outbox.claim(edited, GONE, clock(), CLAIM)
    assert store.outbox.start(edited, GONE, clock())
    assert Deliverer(store, {}, clock, claimer=LIVE).recover_orphaned(clock(), {LIVE}) == [edited]


def test_a_restart_under_the_same_name_recovers_its_own_rows_until_it_claims(
    store: Store, clock: ManualClock
) -> None:
    waiting, calling, later = enqueue(store, clock, None, "k1", "k2", "k3")
    for delivery in (waiting, calling):
        assert store.outbox.claim(delivery, LIVE, clock(), CLAIM)
    assert store.outbox.start(calling, LIVE, clock())
    # The process named LIVE died and started again under the same name: its heartbeat is fresh.
    platform = Recording()
    restarted = Deliverer(store, {"log": platform}, clock, claimer=LIVE)

    assert restarted.recover_orphaned(clock(), {LIVE}) == [calling]
    assert store.outbox.get(waiting).status is DeliveryStatus.PENDING
    assert deliver(restarted) == 2
    assert platform.keys == [f"wk{waiting}", f"wk{later}"]
    # Once it has claimed, a row under its name is its own send in flight.
    (fresh,) = enqueue(store, clock, None, "k4")
    assert store.outbox.claim(fresh, LIVE, clock(), CLAIM)
    assert restarted.recover_orphaned(clock(), {LIVE}) == []
    assert store.outbox.get(fresh).status is DeliveryStatus.SENDING


def test_a_stuck_owner_can_neither_call_nor_settle_a_row_recovered_from_it(
    store: Store, clock: ManualClock
) -> None:
    (delivery,) = enqueue(store, clock, None, "k1")
    assert store.outbox.claim(delivery, LIVE, clock(), CLAIM)
    clock.advance(60 + 5 * 60 + 1)  # its claim ran out long ago
    assert store.outbox.recover_orphaned(clock(), {LIVE}) == Recovered(never_started=[delivery])
    assert store.outbox.claim(delivery, GONE, clock(), CLAIM)  # another replica takes it

    # LIVE wakes up: its start and its settlement find the row no longer its own.
    assert not store.outbox.start(delivery, LIVE, clock())
    answered = store.outbox.exchange(
        Exchange(
            LIVE,
            clock(),
            CLAIM,
            to_epoch(clock()),
            2.0,
            starts=[delivery],
            settlements=[Settlement(delivery, "sent", message_id="m-stale")],
        )
    )
    assert answered.started == set()
    row = store.outbox.get(delivery)
    assert (row.status, row.platform_message_id) == (DeliveryStatus.SENDING, None)
    assert store.outbox.start(delivery, GONE, clock())


def test_rows_in_flight_when_the_schema_is_upgraded_count_as_started(
    store: Store, clock: ManualClock
) -> None:
    waiting, idle = enqueue(store, clock, None, "k1", "k2")
    with store.engine.connect() as connection, connection.begin():
        config = alembic_config()
        config.attributes["connection"] = connection
        command.downgrade(config, "0023")
        # A server before 0024 claimed it; nobody knows whether its call went out.
        connection.execute(
            text(
                "UPDATE deliveries SET status = 'sending', claimed_by = :by, updated_at = 7 "
                "WHERE id = :id"
            ),
            {"by": GONE, "id": waiting},
        )
    upgrade(store.engine)

    assert started_at(store, waiting) == 7.0
    assert started_at(store, idle) is None
    assert store.outbox.recover_orphaned(clock(), set()) == Recovered(maybe_sent=[waiting])
