"""Half-open: one probe in flight until it ends, however long it takes, or until its
probe timeout; on a ManualClock, with sync callers in threads and async callers in tasks."""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import Awaitable, Callable

import pytest

from watchkeeper.supervise import (
    CircuitBreaker,
    CircuitOpenError,
    CircuitState,
    ConfigurationError,
    ManualClock,
)

RESET_S = 10.0


class Boom(Exception):
    pass


def breaker(clock: ManualClock, **kwargs: object) -> CircuitBreaker:
    settings: dict[str, object] = {"fail_max": 3, "reset_timeout_s": RESET_S, "clock": clock}
    settings.update(kwargs)
    return CircuitBreaker("payments", **settings)  # type: ignore[arg-type]


def fail() -> None:
    raise Boom("dependency down")


def state(b: CircuitBreaker) -> CircuitState:
    return b.state  # a call, so a type checker does not narrow it between asserts


def failing() -> str:
    raise Boom("dependency down")


def trip(b: CircuitBreaker) -> None:
    for _ in range(b.fail_max):
        with pytest.raises(Boom):
            b.call(fail)


class HeldProbe:
    """A probe that runs until the test lets it end, in a thread (sync) or a task (async)."""

    def __init__(self, b: CircuitBreaker, kind: str) -> None:
        self.kind = kind
        self.started = threading.Event()
        self._release = threading.Event()
        self._outcome: Callable[[], str] = lambda: "ok"
        self.result: object = None
        self._thread: threading.Thread | None = None
        self._task: asyncio.Task[str] | None = None
        if kind == "sync":
            self._thread = threading.Thread(target=self._run_sync, args=(b,), daemon=True)
            self._thread.start()
        else:
            self._task = asyncio.create_task(b.call_async(self._body_async))

    def _body_sync(self) -> str:
        self.started.set()
        assert self._release.wait(30), "the test never let the probe end"
        return self._outcome()

    async def _body_async(self) -> str:
        self.started.set()
        async with asyncio.timeout(30):  # a safety net only: the test lets it end
            while not self._release.is_set():
                await asyncio.sleep(0)
        return self._outcome()

    def _run_sync(self, b: CircuitBreaker) -> None:
        try:
            self.result = b.call(self._body_sync)
        except Boom as exc:  # the failing verdict; anything else fails the test
            self.result = exc

    async def wait_started(self) -> None:
        async with asyncio.timeout(10):
            while not self.started.is_set():
                await asyncio.sleep(0)

    async def end(self, outcome: Callable[[], str]) -> object:
        self._outcome = outcome
        self._release.set()
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, 30)
            assert not self._thread.is_alive()
            return self.result
        assert self._task is not None
        try:
            return await self._task
        except Boom as exc:
            return exc


async def others_are_refused(b: CircuitBreaker, ran: list[str]) -> list[CircuitOpenError]:
    """Every other kind of caller, at once: 4 threads, 4 tasks, both context managers."""
    errors: list[CircuitOpenError] = []
    lock = threading.Lock()

    def record(exc: CircuitOpenError) -> None:
        with lock:
            errors.append(exc)

    def sync_caller() -> None:
        try:
            b.call(ran.append, "thread")
        except CircuitOpenError as exc:
            record(exc)

    async def async_body() -> None:
        ran.append("task")

    async def async_caller(call: Callable[[], Awaitable[None]]) -> None:
        try:
            await call()
        except CircuitOpenError as exc:
            record(exc)

    async def async_with() -> None:
        async with b:
            ran.append("async with")

    def sync_with() -> None:
        try:
            with b:
                ran.append("with")
        except CircuitOpenError as exc:
            record(exc)

    threads = [threading.Thread(target=sync_caller) for _ in range(4)]
    threads.append(threading.Thread(target=sync_with))
    for t in threads:
        t.start()
    await asyncio.gather(
        *(async_caller(lambda: b.call_async(async_body)) for _ in range(4)),
        async_caller(async_with),
    )
    for t in threads:
        await asyncio.to_thread(t.join, 30)
    return errors


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["sync", "async"])
@pytest.mark.parametrize("verdict", ["success", "failure"])
async def test_one_probe_in_flight_past_three_reset_timeouts_refuses_everyone_else(
    kind: str, verdict: str
) -> None:
    clock = ManualClock(100.0)
    b = breaker(clock)
    trip(b)
    clock.advance(RESET_S)
    probe = HeldProbe(b, kind)
    await probe.wait_started()
    assert state(b) is CircuitState.HALF_OPEN
    ran: list[str] = []
    for timeouts in (0.5, 1, 2, 3, 3.5):
        clock.advance(110.0 + timeouts * RESET_S - clock.now())
        errors = await others_are_refused(b, ran)
        assert ran == [], f"a second call ran beside the probe after {timeouts} reset timeouts"
        assert len(errors) == 10
        assert {e.state for e in errors} == {"half_open"}
        assert state(b) is CircuitState.HALF_OPEN
    ended_at = clock.now()
    if verdict == "success":
        assert await probe.end(lambda: "ok") == "ok"
        assert state(b) is CircuitState.CLOSED
        await others_are_refused(b, ran)
        assert sorted(ran) == sorted(["thread"] * 4 + ["task"] * 4 + ["with", "async with"])
        return
    assert isinstance(await probe.end(failing), Boom)
    assert state(b) is CircuitState.OPEN
    clock.advance(RESET_S - 0.5)
    errors = await others_are_refused(b, ran)
    assert ran == []
    assert {e.state for e in errors} == {"open"}
    assert {e.retry_at for e in errors} == {ended_at + RESET_S}
    clock.advance(0.5)
    assert b.call(lambda: "probe") == "probe"
    assert state(b) is CircuitState.CLOSED


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_a_probe_past_its_probe_timeout_counts_as_failed_and_its_late_result_is_ignored(
    kind: str,
) -> None:
    clock = ManualClock(100.0)
    b = breaker(clock, probe_timeout_s=25.0)
    trip(b)
    clock.advance(RESET_S)  # the probe starts at 110 and times out at 135
    probe = HeldProbe(b, kind)
    await probe.wait_started()
    ran: list[str] = []
    clock.advance(24.5)
    errors = await others_are_refused(b, ran)
    assert ran == []
    assert {e.state for e in errors} == {"half_open"}
    clock.advance(0.5)
    # Timed out: a failed probe, so open for a reset timeout counted from 135.
    errors = await others_are_refused(b, ran)
    assert ran == []
    assert {e.state for e in errors} == {"open"}
    assert {e.retry_at for e in errors} == {135.0 + RESET_S}
    assert state(b) is CircuitState.OPEN
    clock.advance(5.0)
    assert await probe.end(lambda: "ok") == "ok"  # the caller still gets its answer
    assert state(b) is CircuitState.OPEN  # but a late success closes nothing
    clock.advance(RESET_S - 5.0)
    assert b.call(lambda: "next probe") == "next probe"
    assert state(b) is CircuitState.CLOSED
    assert b.statistics().failures == 3 + 1


@pytest.mark.anyio
async def test_a_timed_out_probe_that_no_one_noticed_reopens_when_it_reports_late() -> None:
    clock = ManualClock(100.0)
    b = breaker(clock, probe_timeout_s=25.0)
    trip(b)
    clock.advance(RESET_S)
    probe = HeldProbe(b, "async")
    await probe.wait_started()
    clock.advance(30.0)  # nobody calls in between
    assert await probe.end(lambda: "ok") == "ok"
    assert state(b) is CircuitState.OPEN
    with pytest.raises(CircuitOpenError) as info:
        b.call(lambda: "too soon")
    assert info.value.retry_at == 135.0 + RESET_S


@pytest.mark.anyio
async def test_a_late_probe_is_ignored_while_the_next_probe_runs() -> None:
    clock = ManualClock(100.0)
    b = breaker(clock, probe_timeout_s=5.0)
    trip(b)
    clock.advance(RESET_S)
    first = HeldProbe(b, "async")
    await first.wait_started()
    clock.advance(5.0 + RESET_S)  # the first timed out at 115; a new probe is due at 125
    second = HeldProbe(b, "sync")
    await second.wait_started()
    assert isinstance(await first.end(failing), Boom)
    assert state(b) is CircuitState.HALF_OPEN  # the second probe still owns the slot
    with pytest.raises(CircuitOpenError, match="half_open"):
        b.call(lambda: "no")
    assert await second.end(lambda: "ok") == "ok"
    assert state(b) is CircuitState.CLOSED


@pytest.mark.parametrize("bad", [0, -1.0, math.nan])
def test_a_bad_probe_timeout_is_refused_with_a_clear_error(bad: float) -> None:
    with pytest.raises(ConfigurationError, match="probe_timeout_s"):
        breaker(ManualClock(), probe_timeout_s=bad)


def test_the_default_probe_timeout_is_none_meaning_no_limit() -> None:
    assert breaker(ManualClock()).probe_timeout_s is None
