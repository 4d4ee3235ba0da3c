from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from watchkeeper.clock import ManualClock as AppManualClock
from watchkeeper.supervise import ExitReason, ManualClock, Restart, Strategy
from watchkeeper.supervise.clock import wait_until_done
from watchkeeper.supervise.policy import IntensityWindow, should_restart
from watchkeeper.supervise.strategies import restart_group


def test_manual_clock_fires_due_timers_in_deadline_order() -> None:
    clock = ManualClock()
    fired: list[tuple[str, float]] = []
    clock.call_at(3.0, lambda: fired.append(("c", clock.now())))
    clock.call_at(1.0, lambda: fired.append(("a", clock.now())))
    cancelled = clock.call_at(2.0, lambda: fired.append(("b", clock.now())))
    cancelled.cancel()
    clock.advance(2.5)
    assert fired == [("a", 1.0)]
    assert clock.now() == 2.5
    assert clock.next_deadline() == 3.0
    clock.advance(10)
    assert fired == [("a", 1.0), ("c", 3.0)]
    assert clock.pending() == 0


def test_manual_clock_refuses_to_go_backwards() -> None:
    with pytest.raises(ValueError, match="backwards"):
        ManualClock().advance(-1)


@pytest.mark.anyio
async def test_wait_until_done_times_out_only_when_the_clock_moves() -> None:
    clock = ManualClock()
    fut: asyncio.Future[object] = asyncio.get_running_loop().create_future()
    waiter = asyncio.create_task(wait_until_done(fut, clock, deadline=5.0))
    await clock.wait_for_timers()
    assert not waiter.done()
    clock.advance(5.0)
    assert await waiter is False
    assert not fut.cancelled()


@pytest.mark.anyio
async def test_sleep_until_returns_when_advanced() -> None:
    clock = ManualClock()
    sleeper = asyncio.create_task(clock.sleep_until(10.0))
    await clock.wait_for_timers()
    clock.advance(9.0)
    await asyncio.sleep(0)
    assert not sleeper.done()
    clock.advance(1.0)
    await asyncio.wait_for(sleeper, 5)


@pytest.mark.parametrize(
    ("restart", "reason", "expected"),
    [
        (Restart.PERMANENT, ExitReason.NORMAL, True),
        (Restart.PERMANENT, ExitReason.ERROR, True),
        (Restart.TRANSIENT, ExitReason.NORMAL, False),
        (Restart.TRANSIENT, ExitReason.KILLED, True),
        (Restart.TRANSIENT, ExitReason.HUNG, True),
        (Restart.TEMPORARY, ExitReason.ERROR, False),
        (Restart.PERMANENT, ExitReason.SHUTDOWN, False),
    ],
)
def test_should_restart(restart: Restart, reason: ExitReason, expected: bool) -> None:
    assert should_restart(restart, reason) is expected


def test_intensity_window_allows_max_restarts_per_period() -> None:
    window = IntensityWindow(max_restarts=3, period_s=5.0)
    assert [window.record(t) for t in (0.0, 1.0, 2.0)] == [True, True, True]
    assert window.record(3.0) is False
    fresh = IntensityWindow(max_restarts=3, period_s=5.0)
    assert all(fresh.record(t) for t in (0.0, 1.0, 2.0, 5.5, 6.5))


@pytest.mark.parametrize(
    ("strategy", "failed", "expected"),
    [
        (Strategy.ONE_FOR_ONE, 1, [1]),
        (Strategy.ONE_FOR_ALL, 1, [0, 1, 2, 3]),
        (Strategy.REST_FOR_ONE, 1, [1, 2, 3]),
    ],
)
def test_restart_group(strategy: Strategy, failed: int, expected: list[int]) -> None:
    assert list(restart_group(strategy, 4, failed)) == expected


def test_one_manual_clock_reads_as_a_datetime_and_as_seconds() -> None:
    start = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    clock = ManualClock(start)
    assert clock() == start
    assert clock.now() == start.timestamp()
    assert clock.advance(1.5) == start + timedelta(seconds=1.5)
    assert clock.now() == start.timestamp() + 1.5
    assert ManualClock()() == datetime(1970, 1, 1, tzinfo=UTC)
    assert ManualClock is AppManualClock  # one class for the app and the supervision library


def test_set_fires_timers_going_forward_and_none_going_back() -> None:
    start = datetime(2025, 1, 2, tzinfo=UTC)
    clock = ManualClock(start)
    fired: list[float] = []
    clock.call_at(start.timestamp() + 10, lambda: fired.append(clock.now()))
    clock.set(start - timedelta(seconds=5))
    assert (clock(), fired) == (start - timedelta(seconds=5), [])
    clock.set(start + timedelta(seconds=20))
    assert fired == [start.timestamp() + 10]
    assert clock() == start + timedelta(seconds=20)


@pytest.mark.anyio
async def test_autojump_moves_time_only_when_every_task_waits() -> None:
    clock = ManualClock(autojump=True)
    order: list[tuple[str, float]] = []
    gate = asyncio.Event()

    async def sleeper(name: str, until: float) -> None:
        await clock.sleep_until(until)
        order.append((name, clock.now()))

    async def busy() -> None:
        await gate.wait()  # not on the clock: time must wait for it
        order.append(("busy", clock.now()))

    tasks = [
        asyncio.create_task(sleeper("late", 30.0)),
        asyncio.create_task(sleeper("early", 5.0)),
        asyncio.create_task(busy()),
    ]
    await asyncio.sleep(0)
    gate.set()
    await asyncio.wait_for(asyncio.gather(*tasks), 10)
    assert order == [("busy", 0.0), ("early", 5.0), ("late", 30.0)]
    assert clock.pending() == 0
