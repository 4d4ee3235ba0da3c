"""Time as watchkeeper reads it: UTC, timezone-aware, and always injectable.

Two shapes of clock read the same time. The app's services take a :data:`Now`
(a callable returning an aware datetime); the supervision library and
anything that waits take a :class:`Clock` (float seconds, timers and sleeps).
:class:`ManualClock` is both, so one test clock drives the whole program.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar, overload, runtime_checkable

# asyncio is imported where a coroutine needs it: `watchkeeper run` starts processes
# without an event loop, and loading asyncio was a tenth of its start-up.
if TYPE_CHECKING:
    import asyncio

#: What every service takes to read the time: ``utcnow`` in production, a
#: :class:`ManualClock` in tests.
Now = Callable[[], datetime]

_In = TypeVar("_In", contravariant=True)
_Out = TypeVar("_Out", covariant=True)
_A = TypeVar("_A")
_B = TypeVar("_B")

#: Spins without ``_ready`` to look at (another loop implementation) before the loop counts as idle.
_IDLE_SPINS = 100


def utcnow() -> datetime:
    """The current time in UTC, timezone-aware."""
    return datetime.now(UTC)


class _NonePasses(Protocol, Generic[_In, _Out]):
    @overload
    def __call__(self, value: _In) -> _Out: ...
    @overload
    def __call__(self, value: None) -> None: ...
    @overload
    def __call__(self, value: _In | None) -> _Out | None: ...


def _none_passes(convert: Callable[[_A], _B]) -> _NonePasses[_A, _B]:
    """``convert`` that lets ``None`` (a NULL column) through untouched."""

    @functools.wraps(convert)
    def wrapper(value: _A | None) -> _B | None:
        return None if value is None else convert(value)

    return wrapper  # type: ignore[return-value]


@_none_passes
def from_epoch(value: float) -> datetime:
    """A stored epoch second as an aware UTC datetime.

    With :func:`to_epoch`, the one pair of converters between a time and the
    column that stores it; ``None`` (a NULL) passes through both. A value no
    calendar holds (non-finite, past year 9999, no number) raises ``ValueError``,
    never the ``OverflowError`` a value sent to a column raises: a stored value is
    at fault, not a caller.
    """
    try:
        return datetime.fromtimestamp(value, UTC)
    except (OverflowError, OSError, ValueError, TypeError) as exc:
        raise ValueError(f"{value!r} is no time ({exc})") from None


@_none_passes
def to_epoch(value: datetime) -> float:
    """An aware datetime as stored epoch seconds; naive values are taken as UTC."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.timestamp()


def rfc3339(value: datetime | None) -> str | None:
    """RFC 3339 text in UTC, as the API speaks it."""
    if value is None:
        return None
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


@runtime_checkable
class Timer(Protocol):
    """A scheduled callback that can be cancelled before it fires."""

    def cancel(self) -> None:
        """Prevent the callback from running; harmless after it ran."""


@runtime_checkable
class Clock(Protocol):
    """Source of time and timers for code that waits: supervisors, breakers, retries."""

    def now(self) -> float:
        """Current time in seconds (only differences are meaningful)."""

    def call_at(self, deadline: float, callback: Callable[[], None]) -> Timer:
        """Run ``callback`` on the running event loop once ``now() >= deadline``."""

    async def sleep_until(self, deadline: float) -> None:
        """Return once ``now() >= deadline``."""


def settle(fut: asyncio.Future[None]) -> None:
    """Resolve ``fut`` unless something already did: a timer's usual callback."""
    if not fut.done():
        fut.set_result(None)


class _LoopClock:
    """Timers on the running asyncio loop, measured by ``_time``."""

    _time: Callable[[], float]

    def now(self) -> float:
        return self._time()

    def call_at(self, deadline: float, callback: Callable[[], None]) -> Timer:
        import asyncio

        loop = asyncio.get_running_loop()
        return loop.call_later(max(deadline - self._time(), 0.0), callback)

    async def sleep_until(self, deadline: float) -> None:
        import asyncio

        delay = deadline - self._time()
        if delay > 0:
            await asyncio.sleep(delay)


class MonotonicClock(_LoopClock):
    """Real time from ``time.monotonic``: for delays and timeouts within one process."""

    def __init__(self) -> None:
        self._time = time.monotonic


class WallClock(_LoopClock):
    """Real time from ``time.time``: for times shared across processes or hosts."""

    def __init__(self) -> None:
        self._time = time.time

    def __call__(self) -> datetime:
        return datetime.fromtimestamp(self._time(), UTC)


class _ManualTimer:
    __slots__ = ("callback", "cancelled", "deadline")

    def __init__(self, deadline: float, callback: Callable[[], None]) -> None:
        self.deadline = deadline
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualClock:
    """A virtual clock for tests and benchmarks: time moves only when told to.

    Called, it returns an aware datetime (a :data:`Now`); :meth:`now` gives the
    same instant as float seconds (a :class:`Clock`). ``start`` is either.

    Callbacks whose deadline is reached run synchronously inside
    :meth:`advance`, in deadline order, with ``now()`` set to their deadline.
    A callback that is already due when scheduled runs soon on the event loop.

    With ``autojump``, nobody has to advance it: whenever every other task on
    the loop is waiting (on the clock, a future or I/O), time jumps to the
    next deadline. Code whose waits are all on this clock then runs as fast as
    the loop can go; code that waits on real I/O should advance by hand.
    """

    def __init__(self, start: datetime | float = 0.0, *, autojump: bool = False) -> None:
        if isinstance(start, datetime):
            self._at, self._now = start, start.timestamp()
        else:
            self._at, self._now = datetime.fromtimestamp(start, UTC), float(start)
        self._heap: list[tuple[float, int, _ManualTimer]] = []
        self._seq = itertools.count()
        self._waiters: list[asyncio.Future[None]] = []
        self._autojump = autojump
        self._driver: asyncio.Task[None] | None = None

    def __call__(self) -> datetime:
        return self._at

    def now(self) -> float:
        """The current time in seconds."""
        return self._now

    @property
    def autojump(self) -> bool:
        """Whether time jumps to the next deadline whenever the loop is idle."""
        return self._autojump

    @autojump.setter
    def autojump(self, value: bool) -> None:
        self._autojump = value
        self._drive_if_needed()

    def call_at(self, deadline: float, callback: Callable[[], None]) -> Timer:
        """Run ``callback`` once the clock reaches ``deadline``."""
        import asyncio

        if deadline <= self._now:
            # Already due: like a real clock, run it on the loop without waiting for advance().
            return asyncio.get_running_loop().call_soon(callback)
        timer = _ManualTimer(deadline, callback)
        heapq.heappush(self._heap, (deadline, next(self._seq), timer))
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            settle(waiter)
        self._drive_if_needed()
        return timer

    async def sleep_until(self, deadline: float) -> None:
        """Return once the clock reaches ``deadline``."""
        import asyncio

        if deadline <= self._now:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        timer = self.call_at(deadline, lambda: settle(fut))
        try:
            await fut
        finally:
            timer.cancel()

    async def wait_for_timers(self, count: int = 1) -> None:
        """Wait until at least ``count`` timers are pending (for tests that then advance)."""
        import asyncio

        while self.pending() < count:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            await waiter

    def pending(self) -> int:
        """Number of timers still waiting to fire."""
        return sum(1 for _, _, t in self._heap if not t.cancelled)

    def next_deadline(self) -> float | None:
        """Deadline of the earliest live timer, or ``None`` if nothing is due."""
        while self._heap and self._heap[0][2].cancelled:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    def advance(self, seconds: float) -> datetime:
        """Move time forward by ``seconds``, firing every timer that falls due."""
        if seconds < 0:
            raise ValueError("a clock cannot go backwards")
        # Both views move from where they started, so each keeps its own exact arithmetic.
        start_at, start = self._at, self._now
        target = start + seconds
        while (deadline := self.next_deadline()) is not None and deadline <= target:
            _, _, timer = heapq.heappop(self._heap)
            self._now = max(self._now, deadline)
            self._at = start_at + timedelta(seconds=self._now - start)
            timer.callback()
        self._at, self._now = start_at + timedelta(seconds=seconds), target
        return self._at

    def set(self, value: datetime) -> None:
        """Jump to ``value``; timers fall due on the way forward, none fire going back."""
        seconds = value.timestamp() - self._now
        if seconds > 0:
            self.advance(seconds)
        self._at, self._now = value, value.timestamp()

    def _drive_if_needed(self) -> None:
        import asyncio

        if not self._autojump or (self._driver is not None and not self._driver.done()):
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop yet: the first timer scheduled on one starts the driver
        self._driver = loop.create_task(self._drive(), name="ManualClock autojump")

    async def _drive(self) -> None:
        while self._autojump and self.next_deadline() is not None:
            await _loop_idle()
            deadline = self.next_deadline()
            if deadline is not None and self._autojump:
                self.advance(deadline - self._now)


async def _loop_idle() -> None:
    """Return once no other callback on the running loop is ready to run."""
    import asyncio

    ready = getattr(asyncio.get_running_loop(), "_ready", None)
    if ready is None:  # a loop that hides its queue: give the others a fair number of turns
        for _ in range(_IDLE_SPINS):
            await asyncio.sleep(0)
        return
    await asyncio.sleep(0)
    while ready:  # a loop that is never idle leaves time standing still, as it should
        await asyncio.sleep(0)
