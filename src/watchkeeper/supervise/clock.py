"""Clocks: every delay in this package goes through one.

Production code uses :class:`MonotonicClock` (or :class:`WallClock` where a
time is shared between processes). Tests use :class:`ManualClock`, whose time
moves only when the test calls :meth:`ManualClock.advance` (or, with
``autojump``, whenever every task waits on it), so a test of a ten-second
backoff runs instantly and never depends on real time.

The protocol and the clocks live in the leaf :mod:`watchkeeper.clock`,
shared with the rest of the app; this module is their public home for the
supervision library.
"""

from __future__ import annotations

import asyncio

from watchkeeper.clock import Clock, ManualClock, MonotonicClock, Timer, WallClock, settle

__all__ = ["Clock", "ManualClock", "MonotonicClock", "Timer", "WallClock", "wait_until_done"]


async def wait_until_done(fut: asyncio.Future[object], clock: Clock, deadline: float) -> bool:
    """Wait for ``fut`` until ``deadline`` on ``clock``; True if it finished in time.

    ``fut`` is never cancelled: on timeout the caller decides what to do with it.
    """
    if fut.done():
        return True
    loop = asyncio.get_running_loop()
    expired: asyncio.Future[None] = loop.create_future()
    timer = clock.call_at(deadline, lambda: settle(expired))
    try:
        await asyncio.wait((fut, expired), return_when=asyncio.FIRST_COMPLETED)
    finally:
        timer.cancel()
        expired.cancel()
    return fut.done()
