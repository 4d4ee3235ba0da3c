"""Clocks: every delay in this package goes through one.

Production code uses :class:`MonotonicClock` (or :class:`WallClock` where a
time is shared between processes). Tests use :class:`ManualClock`, whose time
moves only when the test calls :meth:`ManualClock.advance`, so a test of a
ten-second backoff runs instantly and never depends on real time.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable
from typing import Protocol, runtime_checkable


@runtime_checkable
class Timer(Protocol):
    """A scheduled callback that can be cancelled before it fires."""

    def cancel(self) -> None:
        """Prevent the callback from running; harmless after it ran."""


@runtime_checkable
class Clock(Protocol):
    """Source of time and timers for supervisors, breakers and health checks."""

    def now(self) -> float:
        """Current time in seconds (only differences are meaningful)."""

    def call_at(self, deadline: float, callback: Callable[[], None]) -> Timer:
        """Run ``callback`` on the running event loop once ``now() >= deadline``."""

    async def sleep_until(self, deadline: float) -> None:
        """Return once ``now() >= deadline``."""


def _settle(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class _LoopClock:
    """Timers on the running asyncio loop, measured by ``_time``."""

    _time: Callable[[], float]

    def now(self) -> float:
        return self._time()

    def call_at(self, deadline: float, callback: Callable[[], None]) -> Timer:
        loop = asyncio.get_running_loop()
        return loop.call_later(max(deadline - self._time(), 0.0), callback)

    async def sleep_until(self, deadline: float) -> None:
        delay = deadline - self._time()
        if delay > 0:
            await asyncio.sleep(delay)


class MonotonicClock(_LoopClock):
    """Real time from ``time.monotonic``: the default for supervisors and health."""

    def __init__(self) -> None:
        self._time = time.monotonic


class WallClock(_LoopClock):
    """Real time from ``time.time``: for state shared across processes or hosts."""

    def __init__(self) -> None:
        self._time = time.time


class _ManualTimer:
    __slots__ = ("callback", "cancelled", "deadline")

    def __init__(self, deadline: float, callback: Callable[[], None]) -> None:
        self.deadline = deadline
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualClock:
    """A virtual clock for tests: time stands still until :meth:`advance` moves it.

    Callbacks whose deadline is reached run synchronously inside ``advance``,
    in deadline order, with ``now()`` set to their deadline. A callback that is
    already due when scheduled runs soon on the event loop.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._heap: list[tuple[float, int, _ManualTimer]] = []
        self._seq = itertools.count()
        self._waiters: list[asyncio.Future[None]] = []

    def now(self) -> float:
        return self._now

    def call_at(self, deadline: float, callback: Callable[[], None]) -> Timer:
        if deadline <= self._now:
            # Already due: like a real clock, run it on the loop without waiting for advance().
            return asyncio.get_running_loop().call_soon(callback)
        timer = _ManualTimer(deadline, callback)
        heapq.heappush(self._heap, (deadline, next(self._seq), timer))
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)
        return timer

    async def sleep_until(self, deadline: float) -> None:
        if deadline <= self._now:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        timer = self.call_at(deadline, lambda: _settle(fut))
        try:
            await fut
        finally:
            timer.cancel()

    async def wait_for_timers(self, count: int = 1) -> None:
        """Wait until at least ``count`` timers are pending (for tests that then advance)."""
        while self.pending() < count:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            await waiter

    def pending(self) -> int:
        """Number of timers still waiting to fire."""
        return sum(1 for _, _, t in self._heap if not t.cancelled)

    def next_deadline(self) -> float | None:
        """Deadline of the earliest live timer, or ``None`` if nothing is due."""
        self._drop_cancelled()
        return self._heap[0][0] if self._heap else None

    def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds``, firing every timer that falls due."""
        if seconds < 0:
            raise ValueError("a clock cannot go backwards")
        target = self._now + seconds
        while True:
            self._drop_cancelled()
            if not self._heap or self._heap[0][0] > target:
                break
            deadline, _, timer = heapq.heappop(self._heap)
            self._now = max(self._now, deadline)
            timer.callback()
        self._now = target

    def _drop_cancelled(self) -> None:
        while self._heap and self._heap[0][2].cancelled:
            heapq.heappop(self._heap)


async def wait_until_done(fut: asyncio.Future[object], clock: Clock, deadline: float) -> bool:
    """Wait for ``fut`` until ``deadline`` on ``clock``; True if it finished in time.

    ``fut`` is never cancelled: on timeout the caller decides what to do with it.
    """
    if fut.done():
        return True
    loop = asyncio.get_running_loop()
    expired: asyncio.Future[None] = loop.create_future()
    timer = clock.call_at(deadline, lambda: _settle(expired))
    try:
        await asyncio.wait((fut, expired), return_when=asyncio.FIRST_COMPLETED)
    finally:
        timer.cancel()
        expired.cancel()
    return fut.done()
