"""Conversations served at once share their claims' and settlements' transactions, and every
call still follows its own committed claim."""

from __future__ import annotations

import asyncio
import contextlib

from sqlalchemy import event

from watchkeeper.clock import ManualClock
from watchkeeper.errors import ValueRefused
from watchkeeper.notify.channels.base import Channel, SendOutcome, SendResult
from watchkeeper.notify.deliverer import Deliverer
from watchkeeper.notify.message import Message, Target
from watchkeeper.store import Store
from watchkeeper.store.outbox import DeliveryStatus
from watchkeeper.store.queueing import NewDelivery

CHATS = 20


class Recording(Channel):
    """Answers at once; at each call, notes the row's status as another reader sees it."""

    name = "log"

    def __init__(self, store: Store) -> None:
        self.store = store
        self.seen: dict[int, DeliveryStatus] = {}

    async def send(self, target: Target, message: Message, idempotency_key: str) -> SendResult:
        delivery_id = int(idempotency_key.removeprefix("wk"))
        self.seen[delivery_id] = self.store.outbox.get(delivery_id).status
        return SendResult(SendOutcome.SENT, message_id=f"m{delivery_id}")

    async def edit(self, target: Target, message: Message) -> SendResult:
        raise AssertionError("no edits here")


def enqueue(store: Store, clock: ManualClock, chats: int) -> list[int]:
    """One card to each of ``chats`` conversations."""
    return store.outbox.enqueue(
        [
            NewDelivery(
                f"k{chat}",
                None,
                "card",
                "log",
                Target("log", f"c{chat}").as_dict(),
                Message(f"card {chat}").as_dict(),
            )
            for chat in range(chats)
        ],
        clock(),
    )


def test_conversations_due_together_share_their_transactions(
    store: Store, clock: ManualClock
) -> None:
    ids = enqueue(store, clock, CHATS)
    channel = Recording(store)
    deliverer = Deliverer(store, {"log": channel}, clock)
    commits: list[object] = []
    count = commits.append
    event.listen(store.engine, "commit", count)
    try:
        assert asyncio.run(deliverer.deliver_due()) == CHATS
    finally:
        event.remove(store.engine, "commit", count)

    # A claim and a settlement each per card would be twice as many commits as cards.
    assert len(commits) < CHATS
    assert all(store.outbox.get(i).status is DeliveryStatus.SENT for i in ids)
    assert {store.outbox.get(i).platform_message_id for i in ids} == {f"m{i}" for i in ids}


def test_each_call_follows_its_own_committed_claim(store: Store, clock: ManualClock) -> None:
    ids = enqueue(store, clock, CHATS)
    channel = Recording(store)

    assert asyncio.run(Deliverer(store, {"log": channel}, clock).deliver_due()) == CHATS

    assert channel.seen == dict.fromkeys(ids, DeliveryStatus.SENDING)


class Garbling(Channel):
    """Refuses one conversation's card with an error text no PostgreSQL column takes."""

    name = "log"

    async def send(self, target: Target, message: Message, idempotency_key: str) -> SendResult:
        if target.chat_id == "c0":
            return SendResult(SendOutcome.FAILED, error="bad\x00byte")
        return SendResult(SendOutcome.SENT, message_id=idempotency_key)

    async def edit(self, target: Target, message: Message) -> SendResult:
        raise AssertionError("no edits here")


def test_a_settlement_the_database_refuses_holds_back_no_other(
    store: Store, clock: ManualClock
) -> None:
    bad, *good = enqueue(store, clock, 4)

    with contextlib.suppress(ValueRefused):  # PostgreSQL refuses the NUL; SQLite stores it
        asyncio.run(Deliverer(store, {"log": Garbling()}, clock).deliver_due())

    assert [store.outbox.get(i).status for i in good] == [DeliveryStatus.SENT] * len(good)
    assert store.outbox.get(bad).status in {DeliveryStatus.FAILED, DeliveryStatus.SENDING}
