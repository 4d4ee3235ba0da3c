"""One conversation's pace is kept in the store, so replicas together send no faster than one."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from watchkeeper.clock import ManualClock
from watchkeeper.notify.channels.base import Channel, SendOutcome, SendResult
from watchkeeper.notify.deliverer import Deliverer
from watchkeeper.notify.message import Message, Target
from watchkeeper.store import Store
from watchkeeper.store.outbox import DeliveryStatus
from watchkeeper.store.queueing import NewDelivery

from ...support.waiting import wait_for_async

RATE = 2.0  # posts per second to one chat: slots half a second apart
BUSY = Target("log", "busy")
QUIET = Target("log", "quiet")


def test_slots_follow_one_another_and_a_far_slot_is_not_taken(store: Store) -> None:
    pacing = store.pacing
    assert pacing.reserve("log:a/", 1000.0, 0.5, 2.0) == 0.0
    assert pacing.reserve("log:a/", 1000.0, 0.5, 2.0) == 0.5
    assert pacing.reserve("log:a/", 1000.25, 0.5, 2.0) == 0.75
    assert pacing.reserve("log:b/", 1000.25, 0.5, 2.0) == 0.0  # another chat is not held up
    # Slots up to 1001.5 are taken; the next one, at 1001.5, is more than 1 s away.
    assert pacing.reserve("log:a/", 1000.0, 0.5, 1.0) is None
    assert pacing.reserve("log:a/", 1000.0, 0.5, 1.5) == 1.5  # the refusal took nothing
    # A chat quiet for a while sends at once.
    assert pacing.reserve("log:a/", 1010.0, 0.5, 2.0) == 0.0


def test_replicas_racing_for_one_chat_each_get_a_slot_of_their_own(db_url: str) -> None:
    if db_url.startswith("sqlite"):
        pytest.skip("one writer at a time on SQLite: there is no race to lose")
    racers = 6
    stores = [Store(db_url, migrate=False) for _ in range(racers)]
    try:
        for round_ in range(5):
            place = f"log:race{round_}/"
            barrier = threading.Barrier(racers)

            def race(store: Store, place: str, barrier: threading.Barrier) -> float | None:
                barrier.wait()
                return store.pacing.reserve(place, 1000.0, 1.0, 100.0)

            with ThreadPoolExecutor(racers) as pool:
                waits = list(pool.map(race, stores, [place] * racers, [barrier] * racers))
            assert sorted(w for w in waits if w is not None) == [float(i) for i in range(racers)]
    finally:
        for store in stores:
            store.close()


class Recording(Channel):
    """A chat platform that notes, by the pace clock, when each message reached it."""

    name = "log"
    per_chat_rate = RATE

    def __init__(
        self, pace: ManualClock, calls: list[tuple[float, str, str]], ids: list[int], who: str
    ) -> None:
        self.pace = pace
        self.calls = calls
        self.ids = ids
        self.who = who

    async def send(self, target: Target, message: Message, idempotency_key: str) -> SendResult:
        self.calls.append((self.pace.now(), target.place, self.who))
        self.ids.append(int(idempotency_key.removeprefix("wk")))
        return SendResult(SendOutcome.SENT, message_id=idempotency_key)

    async def edit(self, target: Target, message: Message) -> SendResult:
        raise AssertionError("no edits here")


def notes(place: Target, count: int, prefix: str) -> list[NewDelivery]:
    return [
        NewDelivery(
            f"{prefix}-{i}",
            None,
            "note",
            "log",
            place.as_dict(),
            Message(f"{prefix} {i}").as_dict(),
        )
        for i in range(count)
    ]


def replicas(
    store: Store, clock: ManualClock, pace: ManualClock
) -> tuple[list[Deliverer], list[tuple[float, str, str]], list[int]]:
    """Two deliverers on one store, as two replicas run them, each with a channel of its own."""
    calls: list[tuple[float, str, str]] = []
    sent: list[int] = []
    return (
        [
            Deliverer(store, {"log": Recording(pace, calls, sent, name)}, clock, pace, claimer=name)
            for name in ("r1", "r2")
        ],
        calls,
        sent,
    )


def test_replicas_taking_turns_keep_one_chats_pace(store: Store, clock: ManualClock) -> None:
    count = 9
    ids = store.outbox.enqueue(notes(BUSY, count, "busy"), clock())
    pace = ManualClock(1000.0, autojump=True)
    (first, second), calls, sent = replicas(store, clock, pace)

    async def in_turns() -> None:
        # A few messages a pass, so each replica picks up where the other left off.
        while len(calls) < count:
            await first.deliver_due(limit=3)
            await second.deliver_due(limit=3)

    asyncio.run(in_turns())

    assert [at for at, _, _ in calls] == [1000.0 + i / RATE for i in range(count)]
    assert [who for _, _, who in calls] == ["r1"] * 3 + ["r2"] * 3 + ["r1"] * 3
    assert sent == ids


def test_a_busy_chat_does_not_hold_up_another(store: Store, clock: ManualClock) -> None:
    (quiet,) = store.outbox.enqueue(notes(QUIET, 1, "quiet"), clock())
    store.outbox.enqueue(notes(BUSY, 2, "busy"), clock())
    pace = ManualClock(1000.0)  # moves only when told
    # Another replica just sent to the busy chat: its next slot is a second away.
    assert store.pacing.reserve(BUSY.place, 1000.0, 1.0, 2.0) == 0.0
    (first, _), calls, sent = replicas(store, clock, pace)

    async def go() -> None:
        passing = asyncio.create_task(first.deliver_due())
        await wait_for_async(lambda: quiet in sent, what="the quiet chat's message sent")
        assert calls == [(1000.0, QUIET.place, "r1")]  # the busy chat is still waiting
        await pace.wait_for_timers()
        pace.advance(1.0)
        await wait_for_async(lambda: len(sent) == 2, what="the busy chat's first message sent")
        await pace.wait_for_timers()
        pace.advance(1 / RATE)
        assert await passing == 3

    asyncio.run(go())
    assert [(at, place) for at, place, _ in calls] == [
        (1000.0, QUIET.place),
        (1001.0, BUSY.place),
        (1001.0 + 1 / RATE, BUSY.place),
    ]


def test_replicas_delivering_together_send_each_message_once(
    store: Store, clock: ManualClock
) -> None:
    items = notes(BUSY, 8, "busy") + notes(QUIET, 3, "quiet")
    ids = store.outbox.enqueue(items, clock())
    pace = ManualClock(1000.0, autojump=True)
    # A third replica booked the busy chat three seconds ahead: the first passes must give up.
    assert store.pacing.reserve(BUSY.place, 1000.0, 3.0, 3.0) == 0.0
    both, calls, sent = replicas(store, clock, pace)

    async def until_all_sent() -> None:
        while len(calls) < len(items):
            before = len(calls)
            await asyncio.gather(*(r.deliver_due() for r in both))
            if len(calls) == before:
                pace.advance(1.0)  # as the wall clock would move between passes

    asyncio.run(until_all_sent())

    assert sorted(sent) == sorted(ids)
    # One claim each: a claim whose slot was too far off was undone, not counted as a try.
    for delivery_id in ids:
        delivery = store.outbox.get(delivery_id)
        assert (delivery.status, delivery.attempts) == (DeliveryStatus.SENT, 1)
