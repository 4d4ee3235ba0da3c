"""A platform that keeps failing opens its breaker: its messages then wait, uncalled.

A refusal of the message (4xx) or a rate limit (429) is the platform answering:
those never open it. The store is real (SQLite and PostgreSQL).
"""

from __future__ import annotations

import asyncio

from watchkeeper.clock import ManualClock
from watchkeeper.notify.channels.base import Channel, SendOutcome, SendResult
from watchkeeper.notify.deliverer import MAX_ATTEMPTS, Deliverer
from watchkeeper.notify.message import Message, Target
from watchkeeper.store import Store
from watchkeeper.store.outbox import DeliveryStatus
from watchkeeper.store.queueing import NewDelivery
from watchkeeper.supervise import CircuitBreaker, CircuitState
from watchkeeper.supervise import ManualClock as BreakerClock


class Platform(Channel):
    """A platform answering every call with ``result``; counts the calls."""

    name = "webhook"

    def __init__(self, result: SendResult) -> None:
        self.result = result
        self.calls = 0

    async def send(self, target: Target, message: Message, idempotency_key: str) -> SendResult:
        self.calls += 1
        return self.result

    async def edit(self, target: Target, message: Message) -> SendResult:
        raise AssertionError("no edits here")


def _enqueue(store: Store, clock: ManualClock, key: str) -> int:
    (delivery_id,) = store.outbox.enqueue(
        [
            NewDelivery(
                key,
                None,
                "note",
                "webhook",
                Target("webhook", "ops").as_dict(),
                Message(f"hello {key}").as_dict(),
            )
        ],
        clock(),
    )
    return delivery_id


def _pace() -> ManualClock:
    """The conversation's pace on a clock that jumps to each slot: every pass takes the
    conversation's next slot (a second after the last), which the wall clock would sit out."""
    return ManualClock(1000.0, autojump=True)


def _deliverer(
    store: Store, clock: ManualClock, platform: Platform, pace: ManualClock | None = None
) -> Deliverer:
    # Deliverers of one test share its pace clock, as they share the pacing rows in the store.
    pace = pace or _pace()
    deliverer = Deliverer(store, {"webhook": platform}, clock, pace, claimer="replica-a")
    breaker = CircuitBreaker("notify:webhook", fail_max=2, reset_timeout_s=30, clock=BreakerClock())
    deliverer.breakers["webhook"] = breaker
    return deliverer


def test_server_errors_open_the_breaker_and_later_messages_wait_uncalled(
    store: Store, clock: ManualClock
) -> None:
    platform = Platform(SendResult(SendOutcome.MAYBE_SENT, error="HTTP 503: down"))
    deliverer = _deliverer(store, clock, platform)
    breaker = deliverer.breakers["webhook"]
    for key in ("a", "b"):
        _enqueue(store, clock, key)
        asyncio.run(deliverer.deliver_due())
    assert platform.calls == 2
    assert breaker.state is CircuitState.OPEN
    waiting = _enqueue(store, clock, "c")
    asyncio.run(deliverer.deliver_due())
    assert platform.calls == 2  # not called
    row = store.outbox.get(waiting)
    assert row.status is DeliveryStatus.PENDING
    assert "circuit breaker 'notify:webhook' is open" in (row.error or "")
    assert breaker.statistics().rejections == 1


def test_refusals_and_rate_limits_do_not_open_it(store: Store, clock: ManualClock) -> None:
    pace = _pace()
    for answer in (
        SendResult(SendOutcome.FAILED, error="HTTP 400: chat not found"),
        SendResult(SendOutcome.RETRY, error="HTTP 429: slow down", retry_after_s=1.0),
    ):
        platform = Platform(answer)
        deliverer = _deliverer(store, clock, platform, pace)
        for key in ("d", "e", "f"):
            _enqueue(store, clock, f"{key}{answer.outcome}")
            asyncio.run(deliverer.deliver_due())
        assert platform.calls == 3
        assert deliverer.breakers["webhook"].state is CircuitState.CLOSED


def test_a_message_kept_waiting_by_an_open_breaker_spends_none_of_its_attempts(
    store: Store, clock: ManualClock
) -> None:
    platform = Platform(SendResult(SendOutcome.MAYBE_SENT, error="HTTP 503: down"))
    deliverer = Deliverer(store, {"webhook": platform}, clock, _pace(), claimer="replica-a")
    breaker_clock = BreakerClock()
    deliverer.breakers["webhook"] = CircuitBreaker(
        "notify:webhook", fail_max=2, reset_timeout_s=30, clock=breaker_clock
    )
    for key in ("a", "b"):
        _enqueue(store, clock, key)
        asyncio.run(deliverer.deliver_due())
    waiting = _enqueue(store, clock, "c")
    for _ in range(MAX_ATTEMPTS + 4):  # the platform stays down longer than eight tries
        asyncio.run(deliverer.deliver_due())
        row = store.outbox.get(waiting)
        assert row.status is DeliveryStatus.PENDING, row.error
        assert row.attempts == 0
        clock.advance(31)
    assert platform.calls == 2
    platform.result = SendResult(SendOutcome.SENT, message_id="m-1")
    breaker_clock.advance(31)  # the breaker lets its probe through
    asyncio.run(deliverer.deliver_due())
    row = store.outbox.get(waiting)
    assert row.status is DeliveryStatus.SENT and row.attempts == 1
