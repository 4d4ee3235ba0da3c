"""Circuit breaker: closed, open, half-open with exactly one probe.

The probe holds the half-open slot until it returns or raises, however long
that takes, or until its ``probe_timeout_s`` (if set) elapses: then it counts
as a failed probe, the circuit opens for a reset timeout counted from that
deadline, and the probe's late result changes nothing. A probe whose process
died (state shared between processes) counts as failed when another notices.

Admission and bookkeeping are short compare-and-set steps on a
:class:`~watchkeeper.supervise.breaker_state.BreakerStateStore`; the protected
call runs outside any lock, so calls in the closed state run concurrently.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import itertools
import logging
import threading
from collections import deque
from collections.abc import Awaitable, Callable
from types import MappingProxyType, TracebackType
from typing import ParamSpec, TypeVar, cast, overload

from watchkeeper.clock import WallClock
from watchkeeper.supervise.breaker_calls import (
    RECENT_CALLS,
    CallLog,
    RecentCall,
    read_count,
    short_reason,
)
from watchkeeper.supervise.breaker_state import (
    BreakerState,
    BreakerStateStore,
    CircuitState,
    InMemoryStateStore,
    Prober,
)
from watchkeeper.supervise.breaker_types import (
    BreakerStateChange,
    BreakerStatistics,
    FailureRateWindow,
    Listener,
    NowSource,
)
from watchkeeper.supervise.errors import CircuitOpenError, ConfigurationError
from watchkeeper.supervise.scope import AsyncScope

logger = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")

_CAS_TRIES = 8
_CLOSED = CircuitState.CLOSED


class _Probe:
    """The one caller let through while half-open, and the state it was let in on."""

    __slots__ = ("reopen_at", "state")

    def __init__(self, state: BreakerState, reopen_at: float | None) -> None:
        self.state = state
        self.reopen_at = reopen_at


# A normal permit is the closed state it was admitted on: no allocation per call.
_Permit = BreakerState | _Probe


class CircuitBreaker(AsyncScope):
    """Protects calls to one dependency; see the module docstring.

    Use it as a decorator (sync or async functions), with ``call``/``call_async``,
    or as a context manager (``with breaker:`` / ``async with breaker:``).
    ``probe_timeout_s`` bounds how long the half-open probe may hold the slot
    (``None``, the default: until it ends); the call itself is never interrupted.
    ``exclude`` lists exceptions that are the caller's business, not the
    dependency's failure: they never count as failures (they prove the
    dependency answered). Cancellation and other non-``Exception`` errors
    never count at all. :meth:`recent_calls` gives the last ``recent_calls`` that counted.
    """

    def __init__(
        self,
        name: str,
        *,
        fail_max: int = 5,
        reset_timeout_s: float = 30.0,
        probe_timeout_s: float | None = None,
        window: FailureRateWindow | None = None,
        exclude: tuple[type[BaseException], ...] = (),
        store: BreakerStateStore | None = None,
        clock: NowSource | None = None,
        listeners: tuple[Listener, ...] = (),
        recent_calls: int = RECENT_CALLS,
    ) -> None:
        if fail_max < 1 or reset_timeout_s <= 0:
            raise ConfigurationError("breaker needs fail_max >= 1 and reset_timeout_s > 0")
        if probe_timeout_s is not None and not probe_timeout_s > 0:  # also refuses NaN
            raise ConfigurationError(
                f"breaker {name!r}: probe_timeout_s must be a number of seconds > 0, "
                f"or None for no limit; got {probe_timeout_s!r}"
            )
        self.name = name
        self.fail_max = fail_max
        self.reset_timeout_s = reset_timeout_s
        self.probe_timeout_s = probe_timeout_s
        self.window = window
        self.exclude = exclude
        self.store: BreakerStateStore = store or InMemoryStateStore()
        # Wall time by default, because the state may be shared between processes.
        self._clock: NowSource = clock or WallClock()
        self._listeners = list(listeners)
        self._outcomes: deque[bool] = deque(maxlen=window.size if window else 1)
        self._lock = threading.Lock()
        self._calls = CallLog(recent_calls)
        self._quiet: BreakerState | None = None
        self._rejections = itertools.count()
        self._ignored = itertools.count()
        self._seen = CircuitState.CLOSED
        self._seen_since = self._clock.now()
        self._state_changes = 0
        self._time_in: dict[CircuitState, float] = dict.fromkeys(CircuitState, 0.0)
        self._permits: contextvars.ContextVar[tuple[_Permit, ...]] = contextvars.ContextVar(
            f"breaker-{name}", default=()
        )

    # -- public API ------------------------------------------------------------

    @property
    def state(self) -> CircuitState:
        """The state in the store right now."""
        return self._observe(self.store.load(self.name))

    def stored(self) -> BreakerState:
        """The whole state in the store right now: counts and when it opened, as every
        process sharing the store sees it."""
        return self.store.load(self.name)

    def add_listener(self, listener: Listener) -> None:
        """Call ``listener`` on every state change this breaker sees."""
        self._listeners.append(listener)

    def force_open(self) -> None:
        """Open the circuit now, whatever its state (an operator's decision).

        Calls are rejected for a reset timeout from now, then one probe is let
        through as after any opening. A probe in flight is forgotten: its result
        no longer changes the state.
        """
        now = self._clock.now()
        self._update(None, lambda s: BreakerState(CircuitState.OPEN, s.failure_count, now))
        logger.warning(
            "breaker %s forced open; a probe will be let through in %g s",
            self.name,
            self.reset_timeout_s,
            extra={"action": "breaker_force_open"},
        )

    def call(self, func: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Run ``func`` through the breaker (sync)."""
        permit = self._acquire()
        try:
            result = func(*args, **kwargs)
        except BaseException as exc:
            self._settle(permit, exc)
            raise
        if permit is self._quiet:
            self._calls.succeeded(self._clock.now())  # closed, no failure on record: no write
        else:
            self._settle(permit, None)
        return result

    async def call_async(
        self, func: Callable[P, Awaitable[R]], *args: P.args, **kwargs: P.kwargs
    ) -> R:
        """Await ``func`` through the breaker."""
        permit = self._acquire()
        try:
            result = await func(*args, **kwargs)
        except BaseException as exc:
            self._settle(permit, exc)
            raise
        if permit is self._quiet:
            self._calls.succeeded(self._clock.now())
        else:
            self._settle(permit, None)
        return result

    @overload
    def __call__(self, func: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]: ...

    @overload
    def __call__(self, func: Callable[P, R]) -> Callable[P, R]: ...

    def __call__(self, func: Callable[P, R]) -> Callable[P, R]:
        """Decorate a sync or async function."""
        if inspect.iscoroutinefunction(func):
            async_func = cast(Callable[P, Awaitable[object]], func)

            @functools.wraps(func)
            async def async_wrapper(*args: P.args, **kwargs: P.kwargs) -> object:
                return await self.call_async(async_func, *args, **kwargs)

            return cast(Callable[P, R], async_wrapper)

        @functools.wraps(func)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            return self.call(func, *args, **kwargs)

        return wrapper

    def __enter__(self) -> CircuitBreaker:
        self._permits.set((*self._permits.get(), self._acquire()))
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._leave(exc)

    async def _enter(self) -> None:
        self.__enter__()

    async def _exit(self, exc: BaseException | None) -> None:
        self._leave(exc)

    def _leave(self, exc: BaseException | None) -> None:
        *rest, permit = self._permits.get()
        self._permits.set(tuple(rest))
        self._settle(permit, exc)

    def recent_calls(self) -> tuple[RecentCall, ...]:
        """Its latest successes and failures (this process's), newest first."""
        return self._calls.read().recent

    def statistics(self) -> BreakerStatistics:
        """An immutable snapshot of this breaker's counters and time in each state."""
        current = self.store.load(self.name)
        self._observe(current)
        now = self._clock.now()
        with self._lock:
            times = dict(self._time_in)
            times[self._seen] += max(now - self._seen_since, 0.0)
            return BreakerStatistics(
                name=self.name,
                state=current.state,
                failure_count=current.failure_count,
                state_changes=self._state_changes,
                time_in_state=MappingProxyType(times),
                successes=self._calls.successes,
                failures=self._calls.failures,
                rejections=read_count(self._rejections),
                ignored=read_count(self._ignored),
            )

    # -- admission -------------------------------------------------------------

    def _acquire(self) -> _Permit:
        current = self.store.load(self.name)
        if current.state is _CLOSED and self._seen is _CLOSED:
            self._quiet = current if not current.failure_count and self.window is None else None
            return current
        return self._acquire_slow(current)

    def _acquire_slow(self, current: BreakerState) -> _Permit:
        for _ in range(_CAS_TRIES):
            self._observe(current)
            if current.state is _CLOSED:
                return current
            now = self._clock.now()
            opened_at = now if current.opened_at is None else current.opened_at
            if current.state is CircuitState.HALF_OPEN:
                if current.prober is not None and current.prober.gone():
                    # Its process died mid-probe: a failed probe, from when that was seen.
                    current = self._expire(current, now)
                    continue
                deadline = self._probe_deadline(opened_at)
                if deadline is None or now < deadline:
                    # One probe until it ends: the earliest another can start is
                    # a reset timeout after it fails.
                    raise self._rejection(current.state, now + self.reset_timeout_s, now)
                # The probe ran out of time: a failed probe, wherever it runs.
                current = self._expire(current, deadline)
                continue
            retry_at = opened_at + self.reset_timeout_s
            if now < retry_at:
                raise self._rejection(current.state, retry_at, now)
            probe = BreakerState(
                CircuitState.HALF_OPEN, current.failure_count, now, prober=Prober.this_process()
            )
            stored = self.store.compare_and_set(self.name, current, probe)
            if stored is not None:
                self._observe(stored)
                return _Probe(stored, current.opened_at)
            current = self.store.load(self.name)
        now = self._clock.now()
        raise self._rejection(CircuitState.HALF_OPEN, now + self.reset_timeout_s, now)

    def _probe_deadline(self, started_at: float) -> float | None:
        return None if self.probe_timeout_s is None else started_at + self.probe_timeout_s

    def _expire(self, probing: BreakerState, at: float) -> BreakerState:
        """Record a timed-out or orphaned probe as failed at ``at``; the state now stored."""
        opened = BreakerState(CircuitState.OPEN, probing.failure_count, at)
        stored = self.store.compare_and_set(self.name, probing, opened)
        current = stored if stored is not None else self.store.load(self.name)
        self._observe(current)
        return current

    def _rejection(self, state: CircuitState, retry_at: float, now: float) -> CircuitOpenError:
        next(self._rejections)
        return CircuitOpenError(self.name, state.value, retry_at, retry_at - now)

    # -- outcomes --------------------------------------------------------------

    def _settle(self, permit: _Permit, exc: BaseException | None) -> None:
        if isinstance(permit, _Probe):
            deadline = self._probe_deadline(cast(float, permit.state.opened_at))
            if deadline is not None and self._clock.now() >= deadline:
                # Too late: whatever it says, it failed at its deadline (if no one
                # recorded that yet); the version check ignores it otherwise.
                self._calls.failed(self._clock.now(), "the probe outlived its probe timeout")
                self._update(
                    permit, lambda s: BreakerState(CircuitState.OPEN, s.failure_count, deadline)
                )
                return
        if exc is None:
            self._calls.succeeded(self._clock.now())
            self._on_success(permit)
        elif isinstance(exc, Exception) and isinstance(exc, self.exclude):
            next(self._ignored)
            self._on_success(permit)
        elif isinstance(exc, Exception):
            self._calls.failed(self._clock.now(), short_reason(exc))
            self._on_failure(permit)
        else:
            next(self._ignored)
            if isinstance(permit, _Probe):
                self._release_probe(permit)

    def _on_success(self, permit: _Permit) -> None:
        if isinstance(permit, _Probe):
            self._update(permit, lambda s: BreakerState(CircuitState.CLOSED, 0, None))
            return
        if self.window is not None:
            with self._lock:
                self._outcomes.append(True)
        if permit.failure_count and self.window is None:
            self._update(
                None,
                lambda s: (
                    BreakerState(s.state, 0, s.opened_at)
                    if s.state is CircuitState.CLOSED and s.failure_count
                    else None
                ),
            )

    def _on_failure(self, permit: _Permit) -> None:
        now = self._clock.now()
        if isinstance(permit, _Probe):
            self._update(permit, lambda s: BreakerState(CircuitState.OPEN, s.failure_count, now))
            return
        if self.window is not None:
            with self._lock:
                self._outcomes.append(False)
                trips = self._window_trips()
            if trips:
                self._update(None, lambda s: self._open_if_closed(s, now))
            return

        def bump(s: BreakerState) -> BreakerState | None:
            if s.state is not CircuitState.CLOSED:
                return None
            if s.failure_count + 1 >= self.fail_max:
                return BreakerState(CircuitState.OPEN, s.failure_count + 1, now)
            return BreakerState(CircuitState.CLOSED, s.failure_count + 1, None)

        self._update(None, bump)

    def _open_if_closed(self, s: BreakerState, now: float) -> BreakerState | None:
        if s.state is not CircuitState.CLOSED:
            return None
        return BreakerState(CircuitState.OPEN, s.failure_count + 1, now)

    def _window_trips(self) -> bool:
        assert self.window is not None
        calls = len(self._outcomes)
        if calls < self.window.min_calls:
            return False
        failures = calls - sum(self._outcomes)
        return failures / calls >= self.window.threshold

    def _release_probe(self, permit: _Probe) -> None:
        # A cancelled probe proves nothing: back to OPEN as it was, so the next caller probes.
        reopen = permit.reopen_at
        self._update(permit, lambda s: BreakerState(CircuitState.OPEN, s.failure_count, reopen))

    def _update(
        self, permit: _Probe | None, change: Callable[[BreakerState], BreakerState | None]
    ) -> None:
        """Apply ``change`` by compare-and-set; a probe's change applies only to its own probe."""
        for _ in range(_CAS_TRIES):
            current = self.store.load(self.name)
            if permit is not None and current.version != permit.state.version:
                self._observe(current)
                return
            new = change(current)
            if new is None:
                self._observe(current)
                return
            stored = self.store.compare_and_set(self.name, current, new)
            if stored is not None:
                self._observe(stored)
                return
        logger.warning(
            "breaker %s: state kept changing under us; giving up this update",
            self.name,
            extra={"action": "breaker_update"},
        )

    # -- bookkeeping -----------------------------------------------------------

    def _observe(self, current: BreakerState) -> CircuitState:
        new = current.state
        if new is self._seen:
            return new
        now = self._clock.now()
        with self._lock:
            old = self._seen
            if new is old:
                return new
            self._time_in[old] += max(now - self._seen_since, 0.0)
            self._seen, self._seen_since = new, now
            self._state_changes += 1
            self._outcomes.clear()
        change = BreakerStateChange(self.name, old, new, now)
        for listener in tuple(self._listeners):
            try:
                listener(change)
            except Exception:
                logger.exception(
                    "breaker %s: listener %r failed",
                    self.name,
                    listener,
                    extra={"action": "breaker_listener"},
                )
        return new
