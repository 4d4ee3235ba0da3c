"""Helpers for testing code that uses supervision trees.

Pair them with :class:`~watchkeeper.supervise.clock.ManualClock` so restart
delays and timeouts pass only when the test says so.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

from watchkeeper.supervise.events import Event, Subscription

E = TypeVar("E", bound=Event)


async def next_event(
    sub: Subscription,
    kind: type[E],
    where: Callable[[E], bool] = lambda _: True,
    *,
    timeout_s: float = 10.0,
) -> E:
    """The next event of type ``kind`` matching ``where``, skipping others.

    ``timeout_s`` is real time and only a safety net against a hung test: the
    test's verdict comes from the event, never from how long it took.
    """
    async with asyncio.timeout(timeout_s):
        while True:
            event = await sub.get()
            if isinstance(event, kind) and where(event):
                return event


def drain(sub: Subscription) -> list[Event]:
    """Every event queued in ``sub`` right now."""
    events: list[Event] = []
    while (event := sub.get_nowait()) is not None:
        events.append(event)
    return events
