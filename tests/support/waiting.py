"""Wait for a state, never for a length of time.

Tests wait for something to become true (a file, a message, an exit) with a
generous timeout; they never assert how long it took. A timeout fails the test
with a message that names what it waited for.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

#: Generous: a loaded CI machine is slow, and a test that passes waits only as long as it must.
TIMEOUT_S = 30.0
INTERVAL_S = 0.02


def wait_for(
    predicate: Callable[[], T],
    *,
    what: str = "",
    timeout: float = TIMEOUT_S,
    interval: float = INTERVAL_S,
    changed: threading.Condition | None = None,
) -> T:
    """Wait until ``predicate()`` is truthy and return what it returned.

    With ``changed``, wait on that condition (whoever changes the state the
    predicate reads notifies it) instead of looking again every ``interval``.
    Fails with an ``AssertionError`` naming ``what`` (or the predicate) on timeout.
    """
    deadline = time.monotonic() + timeout
    if changed is not None:
        with changed:
            found = changed.wait_for(predicate, timeout)
    else:
        while not (found := predicate()) and time.monotonic() < deadline:
            time.sleep(interval)
    if not found:
        raise AssertionError(f"{_name(what, predicate)} did not happen within {timeout} s")
    return found


async def wait_for_async(
    predicate: Callable[[], T],
    *,
    what: str = "",
    timeout: float = TIMEOUT_S,
    interval: float = INTERVAL_S,
) -> T:
    """:func:`wait_for` on the event loop: looks again every ``interval`` without a thread."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not (found := predicate()) and loop.time() < deadline:
        await asyncio.sleep(interval)
    if not found:
        raise AssertionError(f"{_name(what, predicate)} did not happen within {timeout} s")
    return found


def _name(what: str, predicate: Callable[[], object]) -> str:
    return what or getattr(predicate, "__qualname__", repr(predicate))
