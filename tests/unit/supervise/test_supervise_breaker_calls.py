"""A breaker's recent calls: newest first, bounded, each failure with its short reason,
on a ManualClock (no test sleeps)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from watchkeeper.supervise import (
    CircuitBreaker,
    CircuitOpenError,
    CircuitState,
    ConfigurationError,
    ManualClock,
    RecentCall,
)
from watchkeeper.supervise.breaker_calls import MAX_REASON, RECENT_CALLS, CallLog, short_reason


class Boom(Exception):
    pass


class NotFound(Exception):
    pass


def boom(message: str) -> None:
    raise Boom(message)


def breaker(clock: ManualClock, **kwargs: object) -> CircuitBreaker:
    settings: dict[str, object] = {"fail_max": 3, "reset_timeout_s": 10.0, "clock": clock}
    settings.update(kwargs)
    return CircuitBreaker("payments", **settings)  # type: ignore[arg-type]


def test_calls_are_kept_newest_first_with_their_times_and_a_failures_reason() -> None:
    clock = ManualClock(1000.0)
    b = breaker(clock)
    b.call(lambda: "ok")
    clock.advance(1.5)
    with pytest.raises(Boom):
        b.call(boom, "connection refused")
    clock.advance(2.0)
    b.call(lambda: "ok")
    assert b.recent_calls() == (
        RecentCall(1003.5, True, None),
        RecentCall(1001.5, False, "Boom: connection refused"),
        RecentCall(1000.0, True, None),
    )
    stats = b.statistics()
    assert (stats.successes, stats.failures) == (2, 1)


def test_the_ring_keeps_the_last_calls_only_while_the_totals_count_them_all() -> None:
    clock = ManualClock(0.0)
    b = breaker(clock, recent_calls=3, fail_max=100)
    for index in range(5):
        clock.advance(1.0)
        with pytest.raises(Boom):
            b.call(boom, f"failure {index}")
    b.call(lambda: None)
    assert [(c.at, c.reason) for c in b.recent_calls()] == [
        (5.0, None),
        (5.0, "Boom: failure 4"),
        (4.0, "Boom: failure 3"),
    ]
    stats = b.statistics()
    assert (stats.successes, stats.failures) == (1, 5)


def test_by_default_a_breaker_keeps_its_last_twenty_calls() -> None:
    clock = ManualClock(0.0)
    b = breaker(clock)
    for _ in range(RECENT_CALLS + 5):
        clock.advance(1.0)
        b.call(lambda: None)
    calls = b.recent_calls()
    assert RECENT_CALLS == 20
    assert len(calls) == 20
    assert [c.at for c in calls] == [float(t) for t in range(25, 5, -1)]


def test_rejected_excluded_and_cancelled_calls_are_not_kept() -> None:
    clock = ManualClock(0.0)
    b = breaker(clock, exclude=(NotFound,))

    def not_found() -> None:
        raise NotFound("no such invoice")

    def interrupted() -> None:
        raise KeyboardInterrupt

    with pytest.raises(NotFound):
        b.call(not_found)
    with pytest.raises(KeyboardInterrupt):
        b.call(interrupted)
    for _ in range(3):
        with pytest.raises(Boom):
            b.call(boom, "down")
    assert b.state is CircuitState.OPEN
    with pytest.raises(CircuitOpenError):
        b.call(lambda: None)
    assert [c.reason for c in b.recent_calls()] == ["Boom: down"] * 3
    stats = b.statistics()
    assert (stats.ignored, stats.rejections) == (2, 1)


@pytest.mark.anyio
async def test_async_calls_context_managers_and_probes_are_kept_too() -> None:
    clock = ManualClock(0.0)
    b = breaker(clock, fail_max=1)

    async def fine() -> str:
        return "ok"

    assert await b.call_async(fine) == "ok"
    clock.advance(1.0)
    with pytest.raises(Boom), b:
        boom("in a with block")
    clock.advance(10.0)
    async with b:  # the probe, after the reset timeout
        await asyncio.sleep(0)
    assert b.state is CircuitState.CLOSED
    assert b.recent_calls() == (
        RecentCall(11.0, True),
        RecentCall(1.0, False, "Boom: in a with block"),
        RecentCall(0.0, True),
    )


def test_a_probe_past_its_timeout_is_kept_as_a_failure_saying_so() -> None:
    clock = ManualClock(0.0)
    b = breaker(clock, fail_max=1, probe_timeout_s=5.0)
    with pytest.raises(Boom):
        b.call(boom, "down")
    clock.advance(10.0)

    def slow() -> str:
        clock.advance(6.0)
        return "ok, but late"

    assert b.call(slow) == "ok, but late"
    assert b.state is CircuitState.OPEN
    assert b.recent_calls()[0] == RecentCall(16.0, False, "the probe outlived its probe timeout")


class Unprintable(Exception):
    def __str__(self) -> str:
        raise ValueError("no words for it")


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (Boom("refused\nTraceback (most recent call last): ..."), "Boom: refused"),
        (Boom("  \n  timed out after 30 s  \nmore"), "Boom: timed out after 30 s"),
        (Boom(""), "Boom"),
        (Unprintable(), "Unprintable"),
        (Boom("x" * (MAX_REASON * 2)), ("Boom: " + "x" * MAX_REASON)[:MAX_REASON]),
    ],
)
def test_a_reason_is_the_type_and_the_first_line_of_the_message(
    error: BaseException, reason: str
) -> None:
    assert short_reason(error) == reason


def test_a_log_of_size_zero_counts_but_keeps_nothing_and_a_negative_size_is_refused() -> None:
    log = CallLog(0)
    log.succeeded(1.0)
    log.failed(2.0, None)
    read = log.read()
    assert (read.successes, read.failures, read.recent) == (1, 1, ())
    with pytest.raises(ConfigurationError, match="0 or more"):
        CircuitBreaker("payments", recent_calls=-1)


def test_calls_from_many_threads_are_all_counted_and_the_ring_stays_bounded() -> None:
    b = breaker(ManualClock(0.0), recent_calls=5)
    readers_saw: list[int] = []

    def calls() -> None:
        for _ in range(2000):
            b.call(lambda: None)
            readers_saw.append(len(b.recent_calls()))

    threads = [threading.Thread(target=calls) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert b.statistics().successes == 8000
    assert len(b.recent_calls()) == 5
    assert max(readers_saw) <= 5
