"""Supervision events and the bus that fans them out without ever blocking.

Events are frozen records. A supervisor publishes them to its own bus, which
forwards them to its parent's bus; each subscriber reads from a bounded queue.
A full queue drops the event and counts it, so a slow reader never holds up a
child or the supervisor.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Union

logger = logging.getLogger(__name__)


class ExitReason(enum.StrEnum):
    """Why a child stopped running."""

    NORMAL = "normal"
    """Returned, or exited with status 0."""
    ERROR = "error"
    """Raised an exception, or exited with a non-zero status."""
    KILLED = "killed"
    """Terminated by a signal it did not receive from its supervisor."""
    HUNG = "hung"
    """Stopped sending heartbeats within its heartbeat timeout."""
    START_TIMEOUT = "start_timeout"
    """Did not signal ready within its start timeout."""
    START_FAILED = "start_failed"
    """Exited before it had run ``ready_after_s``: a failed start, whatever its status."""
    UNHEALTHY = "unhealthy"
    """Stopped by its supervisor because a health check found it failing."""
    GAVE_UP = "gave_up"
    """A nested supervisor exceeded its restart intensity."""
    SHUTDOWN = "shutdown"
    """Stopped by its supervisor."""

    @property
    def abnormal(self) -> bool:
        """True for every reason except a normal exit or a requested shutdown."""
        return self not in (ExitReason.NORMAL, ExitReason.SHUTDOWN)


@dataclass(frozen=True)
class ChildStarted:
    """A child started (``attempt`` 0) or restarted."""

    path: str
    child: str
    at: float
    attempt: int
    pid: int | None
    title: str | None = None


@dataclass(frozen=True)
class ChildExited:
    """A child stopped; ``will_restart`` tells whether a restart follows."""

    path: str
    child: str
    at: float
    reason: ExitReason
    detail: str
    exit_code: int | None
    will_restart: bool


@dataclass(frozen=True)
class ChildRestarting:
    """A child will be started again after ``delay_s`` on the supervisor's clock."""

    path: str
    child: str
    at: float
    delay_s: float
    attempt: int


@dataclass(frozen=True)
class ChildHeartbeat:
    """A child proved its loop alive (published at most once per interval)."""

    path: str
    child: str
    at: float
    step: str | None


@dataclass(frozen=True)
class ChildHeld:
    """A child due to start is held: its ``hold`` gave ``reason``, so it waits for release."""

    path: str
    child: str
    at: float
    reason: str


@dataclass(frozen=True)
class SupervisorGaveUp:
    """A supervisor exceeded its restart intensity and stopped all its children."""

    path: str
    at: float
    restarts: int
    period_s: float
    children: tuple[str, ...]


Event = Union[  # noqa: UP007
    ChildStarted, ChildExited, ChildRestarting, ChildHeartbeat, ChildHeld, SupervisorGaveUp
]


class Subscription:
    """A bounded queue of events; iterate it with ``async for``."""

    def __init__(self, bus: EventBus, maxsize: int) -> None:
        self._bus = bus
        self._queue: asyncio.Queue[Event] = asyncio.Queue(maxsize)
        self.dropped = 0
        """Events lost because this subscriber was not reading fast enough."""
        self.delivered = 0

    def offer(self, event: Event) -> None:
        try:
            self._queue.put_nowait(event)
        except asyncio.QueueFull:
            self.dropped += 1
        else:
            self.delivered += 1

    async def get(self) -> Event:
        """Wait for the next event."""
        return await self._queue.get()

    def get_nowait(self) -> Event | None:
        """The next event if one is queued, else ``None``."""
        try:
            return self._queue.get_nowait()
        except asyncio.QueueEmpty:
            return None

    def qsize(self) -> int:
        """Events queued and not yet read."""
        return self._queue.qsize()

    def close(self) -> None:
        """Stop receiving events."""
        self._bus.unsubscribe(self)

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Event]:
        while True:
            yield await self._queue.get()


class EventBus:
    """Fans events out to subscribers and up to the parent supervisor's bus."""

    def __init__(self, parent: EventBus | None = None) -> None:
        self._parent = parent
        self._subscribers: list[Subscription] = []

    def subscribe(self, maxsize: int = 1000) -> Subscription:
        """A new subscription holding at most ``maxsize`` unread events."""
        if maxsize <= 0:
            raise ValueError("a subscription needs room for at least one event")
        sub = Subscription(self, maxsize)
        self._subscribers.append(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        if sub in self._subscribers:
            self._subscribers.remove(sub)

    @property
    def dropped(self) -> int:
        """Events dropped across all current subscribers."""
        return sum(s.dropped for s in self._subscribers)

    def publish(self, event: Event) -> None:
        """Deliver ``event`` to every subscriber and the parent; never blocks."""
        for sub in self._subscribers:
            sub.offer(event)
        if self._parent is not None:
            self._parent.publish(event)
