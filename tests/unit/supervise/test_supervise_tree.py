"""The supervision tree with coroutine children on a ManualClock: no real delays."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable

import pytest

from watchkeeper.supervise import (
    Backoff,
    ChildContext,
    ChildExited,
    ChildRestarting,
    ChildStarted,
    ExitReason,
    ManualClock,
    Restart,
    RestartIntensityExceeded,
    StartError,
    Strategy,
    SupervisorBuilder,
    SupervisorGaveUp,
    Timer,
    TreeFixedError,
    coroutine_child,
    supervisor_child,
)
from watchkeeper.supervise.testing import drain, next_event

pytestmark = pytest.mark.anyio


class Crasher:
    """A child that runs until told to crash (or return); records its starts."""

    def __init__(self) -> None:
        self.starts = 0
        self.orders: asyncio.Queue[str] = asyncio.Queue()
        self.contexts: list[ChildContext] = []

    async def __call__(self, ctx: ChildContext) -> None:
        self.starts += 1
        self.contexts.append(ctx)
        ctx.started()
        order = await self.orders.get()
        if order == "crash":
            raise RuntimeError("told to crash")


async def entered(child: Crasher, starts: int) -> None:
    """Wait, in turns of the loop and not in time, until ``child`` has run ``starts`` times:
    ChildStarted is published once a coroutine child's task is made, before it first runs."""
    for _ in range(100):
        if child.starts >= starts:
            return
        await asyncio.sleep(0)
    raise AssertionError(f"the child ran {child.starts} times, not {starts}")


async def forever(ctx: ChildContext) -> None:
    await asyncio.Event().wait()


async def crash_now(ctx: ChildContext) -> None:
    raise RuntimeError("always fails")


def tree(name: str = "root", **backoff: float) -> SupervisorBuilder:
    return SupervisorBuilder(name).backoff(Backoff(**backoff) if backoff else Backoff.none())


async def test_permanent_child_is_restarted_even_after_a_normal_exit() -> None:
    clock = ManualClock()
    child = Crasher()
    sup = tree().child(coroutine_child("w", child)).build(clock)
    sub = sup.subscribe()
    async with await sup.start():
        child.orders.put_nowait("return")
        exited = await next_event(sub, ChildExited)
        assert (exited.reason, exited.will_restart) == (ExitReason.NORMAL, True)
        started = await next_event(sub, ChildStarted, lambda e: e.attempt == 1)
        assert started.child == "w"
        await entered(child, 2)


class TimerCountingClock(ManualClock):
    """A manual clock that keeps the deadline of every timer asked of it."""

    def __init__(self) -> None:
        super().__init__()
        self.deadlines: list[float] = []

    def call_at(self, deadline: float, callback: Callable[[], None]) -> Timer:
        self.deadlines.append(deadline)
        return super().call_at(deadline, callback)


async def test_a_restart_due_now_arms_no_timer() -> None:
    # A timer at delay 0 costs two turns of the loop between an exit and its restart.
    clock = TimerCountingClock()
    child = Crasher()
    sup = tree().child(coroutine_child("w", child)).build(clock)
    sub = sup.subscribe()
    async with await sup.start():
        await entered(child, 1)
        clock.deadlines.clear()
        child.orders.put_nowait("crash")
        assert (await next_event(sub, ChildRestarting)).delay_s == 0
        await next_event(sub, ChildStarted, lambda e: e.attempt == 1)
        await entered(child, 2)
        assert [d for d in clock.deadlines if d <= clock.now()] == []


async def test_transient_child_restarts_after_a_crash_but_not_after_a_normal_exit() -> None:
    clock = ManualClock()
    child = Crasher()
    sup = tree().child(coroutine_child("w", child, restart=Restart.TRANSIENT)).build(clock)
    sub = sup.subscribe()
    async with await sup.start() as handle:
        child.orders.put_nowait("crash")
        crashed = await next_event(sub, ChildExited)
        assert (crashed.reason, crashed.will_restart) == (ExitReason.ERROR, True)
        await next_event(sub, ChildStarted, lambda e: e.attempt == 1)
        child.orders.put_nowait("return")
        done = await next_event(sub, ChildExited)
        assert (done.reason, done.will_restart) == (ExitReason.NORMAL, False)
        assert handle.children()[0].state == "done"
        assert child.starts == 2


async def test_temporary_child_is_never_restarted() -> None:
    clock = ManualClock()
    sup = tree().child(coroutine_child("t", crash_now, restart=Restart.TEMPORARY)).build(clock)
    sub = sup.subscribe()
    async with await sup.start() as handle:
        exited = await next_event(sub, ChildExited)
        assert (exited.reason, exited.will_restart) == (ExitReason.ERROR, False)
        assert handle.statistics().restarts == 0
        assert not any(isinstance(e, ChildRestarting) for e in drain(sub))


async def test_intensity_exceeded_stops_children_in_reverse_order_and_fails() -> None:
    clock = ManualClock()
    sup = (
        tree()
        .intensity(max_restarts=2, period_s=5.0)
        .child(coroutine_child("a", forever))
        .child(coroutine_child("b", forever))
        .child(coroutine_child("bad", crash_now))
        .child(coroutine_child("c", forever))
        .build(clock)
    )
    sub = sup.subscribe()
    handle = await sup.start()
    gave_up = await next_event(sub, SupervisorGaveUp)
    assert gave_up.path == "root"
    assert gave_up.restarts == 3
    with pytest.raises(RestartIntensityExceeded, match="more than 2 restarts"):
        await handle.wait()
    shutdown_order = [
        e.child for e in drain(sub) if isinstance(e, ChildExited) and e.reason == "shutdown"
    ]
    assert shutdown_order == ["c", "b", "a"]
    assert handle.finished


async def test_restarts_spread_beyond_the_period_do_not_exceed_intensity() -> None:
    clock = ManualClock()
    child = Crasher()
    sup = tree().intensity(max_restarts=1, period_s=5.0).child(coroutine_child("w", child))
    handle = await sup.build(clock).start()
    sub = handle.subscribe()
    for attempt in (1, 2, 3):
        child.orders.put_nowait("crash")
        await next_event(sub, ChildStarted, lambda e, a=attempt: e.attempt == a)
        clock.advance(6.0)
    assert not handle.finished
    await handle.stop()


async def test_nested_supervisor_giving_up_counts_as_one_restart_of_the_parent() -> None:
    clock = ManualClock()
    inner = (
        tree("inner")
        .intensity(max_restarts=1, period_s=5.0)
        .child(coroutine_child("bad", crash_now))
    )
    outer = (
        tree("root")
        .intensity(max_restarts=1, period_s=5.0)
        .child(coroutine_child("steady", forever))
        .child(supervisor_child(inner.spec()))
        .build(clock)
    )
    sub = outer.subscribe()
    handle = await outer.start()
    first = await next_event(sub, SupervisorGaveUp)
    assert first.path == "root/inner"
    exited = await next_event(sub, ChildExited, lambda e: e.child == "inner")
    assert (exited.path, exited.reason, exited.will_restart) == ("root", "gave_up", True)
    assert handle.statistics().restarts == 1
    # The restarted inner supervisor gives up again: the parent's second restart
    # within its period exceeds max_restarts=1, so the failure climbs to the root.
    root_gave_up = await next_event(sub, SupervisorGaveUp, lambda e: e.path == "root")
    assert root_gave_up.restarts == 2
    with pytest.raises(RestartIntensityExceeded) as info:
        await handle.wait()
    assert info.value.path == "root"


async def test_one_for_all_restarts_every_child_in_start_order() -> None:
    clock = ManualClock()
    children = {name: Crasher() for name in "abc"}
    builder = tree().strategy(Strategy.ONE_FOR_ALL)
    for name, child in children.items():
        builder.child(coroutine_child(name, child))
    sup = builder.build(clock)
    handle = await sup.start()
    sub = handle.subscribe()
    children["b"].orders.put_nowait("crash")
    restarted = [(await next_event(sub, ChildStarted)).child for _ in range(3)]
    assert restarted == ["a", "b", "c"]
    assert {n: c.starts for n, c in children.items()} == {"a": 2, "b": 2, "c": 2}
    await handle.stop()


async def test_rest_for_one_restarts_the_failed_child_and_those_after_it() -> None:
    clock = ManualClock()
    children = {name: Crasher() for name in "abc"}
    builder = tree().strategy(Strategy.REST_FOR_ONE)
    for name, child in children.items():
        builder.child(coroutine_child(name, child))
    handle = await builder.build(clock).start()
    sub = handle.subscribe()
    children["b"].orders.put_nowait("crash")
    stopped = await next_event(sub, ChildExited, lambda e: e.reason == "shutdown")
    assert (stopped.child, stopped.will_restart) == ("c", True)
    restarted = [(await next_event(sub, ChildStarted)).child for _ in range(2)]
    assert restarted == ["b", "c"]
    assert {n: c.starts for n, c in children.items()} == {"a": 1, "b": 2, "c": 2}
    await handle.stop()


async def test_one_for_one_leaves_siblings_alone() -> None:
    clock = ManualClock()
    children = {name: Crasher() for name in "ab"}
    builder = tree()
    for name, child in children.items():
        builder.child(coroutine_child(name, child))
    handle = await builder.build(clock).start()
    sub = handle.subscribe()
    children["a"].orders.put_nowait("crash")
    assert (await next_event(sub, ChildStarted)).child == "a"
    await entered(children["a"], 2)
    assert {n: c.starts for n, c in children.items()} == {"a": 2, "b": 1}
    await handle.stop()


async def test_backoff_grows_to_its_cap_and_resets_after_a_stable_period() -> None:
    clock = ManualClock()
    child = Crasher()
    sup = (
        SupervisorBuilder("root")
        .intensity(max_restarts=100, period_s=1.0)
        .backoff(Backoff(initial=1.0, factor=2.0, cap=4.0, jitter=0.0), stable_s=30.0)
        .child(coroutine_child("w", child))
        .build(clock)
    )
    handle = await sup.start()
    sub = handle.subscribe()
    delays = []
    for _ in range(4):
        child.orders.put_nowait("crash")
        restarting = await next_event(sub, ChildRestarting)
        delays.append(restarting.delay_s)
        clock.advance(restarting.delay_s - 0.001)
        assert child.starts == len(delays)  # not restarted a moment early
        clock.advance(0.001)
        await next_event(sub, ChildStarted)
    assert delays == [1.0, 2.0, 4.0, 4.0]
    clock.advance(30.0)  # stays up for the stable period
    child.orders.put_nowait("crash")
    assert (await next_event(sub, ChildRestarting)).delay_s == 1.0
    await handle.stop()


async def test_a_child_that_stops_beating_is_restarted_as_hung() -> None:
    clock = ManualClock()
    child = Crasher()
    sup = tree().child(coroutine_child("w", child, heartbeat_timeout_s=5.0)).build(clock)
    handle = await sup.start()
    sub = handle.subscribe()
    clock.advance(3.0)
    child.contexts[0].heartbeat("step 1")
    clock.advance(3.0)  # 6 s since start, 3 s since the beat: alive
    assert child.starts == 1
    assert handle.last_beat("w") == 3.0
    clock.advance(2.0)
    exited = await next_event(sub, ChildExited)
    assert exited.reason == ExitReason.HUNG
    assert exited.will_restart
    await next_event(sub, ChildStarted)
    await entered(child, 2)
    await handle.stop()


async def test_next_child_starts_only_after_the_previous_signals_ready() -> None:
    clock = ManualClock(autojump=True)
    ready = asyncio.Event()
    b_started = asyncio.Event()

    async def slow_starter(ctx: ChildContext) -> None:
        await ready.wait()
        ctx.started()
        await asyncio.Event().wait()

    async def second(ctx: ChildContext) -> None:
        b_started.set()
        await asyncio.Event().wait()

    sup = (
        tree()
        .child(coroutine_child("a", slow_starter, wait_ready=True))
        .child(coroutine_child("b", second))
        .build(clock)
    )
    sub = sup.subscribe()
    starting = asyncio.create_task(sup.start())
    await next_event(sub, ChildStarted, lambda e: e.child == "a")
    await clock.sleep_until(1.0)  # everything settles, well within a's start timeout
    assert not b_started.is_set()
    ready.set()
    handle = await asyncio.wait_for(starting, 10)
    assert b_started.is_set()
    await handle.stop()


async def test_a_child_that_never_becomes_ready_fails_the_start_after_its_timeout() -> None:
    clock = ManualClock(autojump=True)
    sup = tree().child(coroutine_child("mute", forever, wait_ready=True, start_timeout_s=5.0))
    with pytest.raises(StartError, match="not ready within 5 s"):
        await asyncio.wait_for(sup.build(clock).start(), 10)
    assert clock.now() == 5.0


async def test_a_slow_subscriber_loses_events_but_never_blocks_the_child() -> None:
    clock = ManualClock()
    finished = asyncio.Event()

    async def chatty(ctx: ChildContext) -> None:
        for i in range(500):
            ctx.heartbeat(f"step {i}")
        finished.set()
        await asyncio.Event().wait()

    sup = tree().events(heartbeat_interval_s=0.0).child(coroutine_child("chatty", chatty))
    supervisor = sup.build(clock)
    slow = supervisor.subscribe(maxsize=2)
    handle = await supervisor.start()
    await asyncio.wait_for(finished.wait(), 10)
    assert slow.qsize() == 2
    assert slow.dropped == 500 + 1 - 2  # the started event and 500 beats, two kept
    assert handle.statistics().events_dropped == slow.dropped
    await handle.stop()


async def test_children_can_be_added_only_to_a_dynamic_supervisor() -> None:
    clock = ManualClock()
    fixed = await tree().child(coroutine_child("a", forever)).build(clock).start()
    with pytest.raises(TreeFixedError, match="dynamic"):
        await fixed.add_child(coroutine_child("b", forever))
    await fixed.stop()

    dynamic = await tree().dynamic().build(clock).start()
    sub = dynamic.subscribe()
    await dynamic.add_child(coroutine_child("late", forever))
    assert (await next_event(sub, ChildStarted)).child == "late"
    assert [c.name for c in dynamic.children()] == ["late"]
    await dynamic.stop()


async def test_stop_cancels_coroutines_and_abandons_one_that_ignores_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = ManualClock(autojump=True)
    release = asyncio.Event()

    async def stubborn(ctx: ChildContext) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await release.wait()

    sup = tree().child(coroutine_child("stubborn", stubborn, shutdown_timeout_s=2.0))
    handle = await sup.build(clock).start()
    stopping = asyncio.create_task(handle.stop())
    await clock.sleep_until(1.0)  # half the shutdown timeout
    assert not stopping.done()
    with caplog.at_level(logging.WARNING):
        await asyncio.wait_for(stopping, 10)
    assert clock.now() == 2.0
    assert any(getattr(r, "action", None) == "abandon_child" for r in caplog.records)
    release.set()


async def test_stop_goes_in_reverse_start_order() -> None:
    clock = ManualClock()
    builder = tree()
    for name in "abc":
        builder.child(coroutine_child(name, forever))
    sup = builder.build(clock)
    sub = sup.subscribe()
    handle = await sup.start()
    await handle.stop()
    order = [e.child for e in drain(sub) if isinstance(e, ChildExited)]
    assert order == ["c", "b", "a"]


async def test_events_are_frozen_records() -> None:
    clock = ManualClock()
    sup = tree().child(coroutine_child("a", forever)).build(clock)
    sub = sup.subscribe()
    handle = await sup.start()
    started = await next_event(sub, ChildStarted)
    with pytest.raises(dataclasses.FrozenInstanceError):
        started.child = "other"  # type: ignore[misc]
    await handle.stop()


async def test_an_idle_supervisor_schedules_no_timers() -> None:
    clock = ManualClock(autojump=True)
    builder = tree()
    for name in "abc":
        builder.child(coroutine_child(name, forever))
    handle = await builder.build(clock).start()
    await clock.sleep_until(60.0)  # a minute of idling, once every task has settled
    assert clock.pending() == 0
    await handle.stop()
