"""The circuit breaker's state machine, on a ManualClock."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
from pathlib import Path

import pytest

from watchkeeper.supervise import (
    BreakerState,
    BreakerStateChange,
    CircuitBreaker,
    CircuitOpenError,
    CircuitState,
    FailureRateWindow,
    FileStateStore,
    InMemoryStateStore,
    ManualClock,
)


class Boom(Exception):
    pass


class NotFound(Exception):
    pass


def fail() -> None:
    raise Boom("dependency down")


def ok() -> str:
    return "ok"


def breaker(clock: ManualClock, **kwargs: object) -> CircuitBreaker:
    settings: dict[str, object] = {"fail_max": 3, "reset_timeout_s": 10.0, "clock": clock}
    settings.update(kwargs)
    return CircuitBreaker("payments", **settings)  # type: ignore[arg-type]


def trip(b: CircuitBreaker) -> None:
    for _ in range(b.fail_max):
        with pytest.raises(Boom):
            b.call(fail)


def test_opens_after_fail_max_consecutive_failures() -> None:
    b = breaker(ManualClock())
    for _ in range(2):
        with pytest.raises(Boom):
            b.call(fail)
    assert b.state is CircuitState.CLOSED
    with pytest.raises(Boom):
        b.call(fail)
    assert b.state is CircuitState.OPEN


def test_a_success_resets_the_consecutive_count() -> None:
    b = breaker(ManualClock())
    for _ in range(5):
        with pytest.raises(Boom):
            b.call(fail)
        assert b.call(ok) == "ok"
    assert b.state is CircuitState.CLOSED
    assert b.statistics().failure_count == 0


def test_open_rejects_at_once_naming_the_breaker_and_the_retry_time() -> None:
    clock = ManualClock(100.0)
    b = breaker(clock)
    trip(b)
    clock.advance(4.0)
    calls: list[str] = []
    with pytest.raises(CircuitOpenError) as info:
        b.call(lambda: calls.append("ran"))
    assert calls == []
    assert info.value.name == "payments"
    assert info.value.retry_at == 110.0
    assert info.value.retry_in_s == pytest.approx(6.0)
    assert "'payments' is open" in str(info.value)
    assert "6.000 s" in str(info.value)


def test_after_the_reset_timeout_a_successful_probe_closes_it() -> None:
    clock = ManualClock()
    b = breaker(clock)
    trip(b)
    clock.advance(10.0)
    assert b.call(ok) == "ok"
    assert b.state is CircuitState.CLOSED


def test_a_failed_probe_reopens_it_for_another_timeout() -> None:
    clock = ManualClock()
    b = breaker(clock)
    trip(b)
    clock.advance(10.0)
    with pytest.raises(Boom):
        b.call(fail)
    assert b.state is CircuitState.OPEN
    clock.advance(9.0)
    with pytest.raises(CircuitOpenError):
        b.call(ok)
    clock.advance(1.0)
    assert b.call(ok) == "ok"


@pytest.mark.anyio
async def test_half_open_lets_exactly_one_probe_through_among_100_callers() -> None:
    clock = ManualClock()
    b = breaker(clock)
    trip(b)
    clock.advance(10.0)
    release = asyncio.Event()
    ran = 0

    async def probe() -> str:
        nonlocal ran
        ran += 1
        await release.wait()
        return "ok"

    tasks = [asyncio.create_task(b.call_async(probe)) for _ in range(100)]
    await asyncio.wait(tasks, timeout=10, return_when=asyncio.FIRST_COMPLETED)
    for _ in range(5):
        await asyncio.sleep(0)
    rejected = [t for t in tasks if t.done()]
    assert ran == 1
    assert len(rejected) == 99
    for task in rejected:
        error = task.exception()
        assert isinstance(error, CircuitOpenError)
        assert error.state == "half_open"
    assert b.state is CircuitState.HALF_OPEN
    release.set()
    results = await asyncio.gather(*(t for t in tasks if not t.done()))
    assert results == ["ok"]
    assert b.state is CircuitState.CLOSED
    assert b.statistics().rejections == 99


@pytest.mark.anyio
async def test_closed_calls_run_concurrently() -> None:
    b = breaker(ManualClock())
    in_flight = 0
    peak = 0
    gate = asyncio.Event()

    async def slow() -> None:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await gate.wait()
        in_flight -= 1

    tasks = [asyncio.create_task(b.call_async(slow)) for _ in range(20)]
    async with asyncio.timeout(10):  # a serialising breaker would never reach 20
        while peak < 20:
            await asyncio.sleep(0)
    gate.set()
    await asyncio.gather(*tasks)
    assert peak == 20


def test_sync_calls_in_threads_run_concurrently() -> None:
    b = breaker(ManualClock())
    barrier = threading.Barrier(4, timeout=10)  # breaks if calls were serialised
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            b.call(barrier.wait)
        except (threading.BrokenBarrierError, CircuitOpenError) as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(15)
    assert errors == []
    assert b.statistics().successes == 4


def test_excluded_exceptions_never_count_as_failures() -> None:
    b = breaker(ManualClock(), exclude=(NotFound,))

    def missing() -> None:
        raise NotFound("no such invoice")

    for _ in range(10):
        with pytest.raises(NotFound):
            b.call(missing)
    assert b.state is CircuitState.CLOSED
    stats = b.statistics()
    assert (stats.failures, stats.ignored) == (0, 10)


@pytest.mark.anyio
async def test_cancellation_never_counts_and_a_cancelled_probe_frees_the_slot() -> None:
    clock = ManualClock()
    b = breaker(clock)
    for _ in range(5):
        task = asyncio.create_task(b.call_async(asyncio.sleep, 3600))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert b.state is CircuitState.CLOSED
    trip(b)
    clock.advance(10.0)
    probe = asyncio.create_task(b.call_async(asyncio.sleep, 3600))
    await asyncio.sleep(0)
    assert b.state is CircuitState.HALF_OPEN
    probe.cancel()
    with pytest.raises(asyncio.CancelledError):
        await probe
    assert b.state is CircuitState.OPEN
    assert b.call(ok) == "ok"  # the next caller may probe at once
    assert b.state is CircuitState.CLOSED


def test_failure_rate_window_needs_min_calls_then_trips_on_rate() -> None:
    b = breaker(
        ManualClock(), fail_max=1000, window=FailureRateWindow(size=10, min_calls=6, threshold=0.5)
    )
    for _ in range(2):
        b.call(ok)
        with pytest.raises(Boom):
            b.call(fail)
    b.call(ok)
    assert b.state is CircuitState.CLOSED  # 2 of 5: too few calls to judge
    with pytest.raises(Boom):
        b.call(fail)  # 3 of 6 = 50%
    assert b.state is CircuitState.OPEN


def test_failure_rate_window_ignores_a_low_rate() -> None:
    b = breaker(
        ManualClock(), fail_max=1000, window=FailureRateWindow(size=10, min_calls=4, threshold=0.5)
    )
    for _ in range(20):
        b.call(ok)
        b.call(ok)
        with pytest.raises(Boom):
            b.call(fail)
    assert b.state is CircuitState.CLOSED


def test_decorator_and_context_managers_protect_sync_code() -> None:
    clock = ManualClock()
    b = breaker(clock)

    @b
    def flaky() -> None:
        raise Boom("x")

    for _ in range(2):
        with pytest.raises(Boom):
            flaky()
    with pytest.raises(Boom), b:
        raise Boom("y")
    with pytest.raises(CircuitOpenError), b:
        pytest.fail("the body must not run while open")


@pytest.mark.anyio
async def test_decorator_and_context_managers_protect_async_code() -> None:
    clock = ManualClock()
    b = breaker(clock)

    @b
    async def fetch(value: int) -> int:
        return value * 2

    assert await fetch(21) == 42
    for _ in range(3):
        with pytest.raises(Boom):
            async with b:
                raise Boom("z")
    with pytest.raises(CircuitOpenError):
        await fetch(1)


def test_listeners_hear_state_changes_and_a_broken_listener_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = ManualClock()
    heard: list[BreakerStateChange] = []

    def broken(change: BreakerStateChange) -> None:
        raise RuntimeError("listener bug")

    b = breaker(clock, listeners=(heard.append, broken))
    with caplog.at_level(logging.ERROR):
        trip(b)
    clock.advance(10.0)
    b.call(ok)
    assert [(c.old, c.new) for c in heard] == [
        (CircuitState.CLOSED, CircuitState.OPEN),
        (CircuitState.OPEN, CircuitState.HALF_OPEN),
        (CircuitState.HALF_OPEN, CircuitState.CLOSED),
    ]
    assert any(getattr(r, "action", None) == "breaker_listener" for r in caplog.records)


def test_statistics_is_an_immutable_snapshot_with_time_in_state() -> None:
    clock = ManualClock()
    b = breaker(clock)
    b.call(ok)
    clock.advance(5.0)
    trip(b)
    clock.advance(10.0)
    stats = b.statistics()
    assert (stats.successes, stats.failures, stats.state_changes) == (1, 3, 1)
    assert stats.time_in_state[CircuitState.CLOSED] == 5.0
    assert stats.time_in_state[CircuitState.OPEN] == 10.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        stats.successes = 0  # type: ignore[misc]
    with pytest.raises(TypeError):
        stats.time_in_state[CircuitState.OPEN] = 0.0  # type: ignore[index]
    b.call(ok)
    assert stats.successes == 1


def test_breakers_sharing_a_store_share_the_circuit() -> None:
    clock = ManualClock()
    store = InMemoryStateStore()
    first = breaker(clock, store=store)
    second = breaker(clock, store=store)
    trip(first)
    with pytest.raises(CircuitOpenError):
        second.call(ok)


@pytest.mark.parametrize("kind", ["memory", "file"])
def test_compare_and_set_refuses_a_stale_version(kind: str, tmp_path: Path) -> None:
    store = InMemoryStateStore() if kind == "memory" else FileStateStore(tmp_path / "b.json")
    start = store.load("x")
    assert start == BreakerState()
    opened = BreakerState(CircuitState.OPEN, 3, 12.5)
    stored = store.compare_and_set("x", start, opened)
    assert stored is not None
    assert stored.version == 1
    assert store.compare_and_set("x", start, BreakerState()) is None
    assert store.load("x") == stored
    assert store.load("other") == BreakerState()


def test_a_corrupt_state_file_reads_as_closed_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "b.json"
    path.write_text("{not json")
    with caplog.at_level(logging.WARNING):
        assert FileStateStore(path).load("x") == BreakerState()
    assert any(getattr(r, "action", None) == "load_breaker_state" for r in caplog.records)
