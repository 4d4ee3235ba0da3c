"""Restarting or stopping one child on demand, the last exit of each, forcing a breaker open."""

from __future__ import annotations

import asyncio

import pytest

from watchkeeper.supervise import (
    Backoff,
    ChildContext,
    ChildExited,
    ChildStarted,
    CircuitBreaker,
    CircuitOpenError,
    CircuitState,
    ExitReason,
    ManualClock,
    SupervisorBuilder,
    coroutine_child,
)
from watchkeeper.supervise.errors import UnknownChild
from watchkeeper.supervise.testing import next_event

pytestmark = pytest.mark.anyio


class Loop:
    """A child that runs until told to crash; counts its starts."""

    def __init__(self) -> None:
        self.starts = 0
        self.crash = asyncio.Event()

    async def __call__(self, ctx: ChildContext) -> None:
        self.starts += 1
        ctx.started()
        await self.crash.wait()
        self.crash.clear()
        raise RuntimeError("store went away")


def two_loops(a: Loop, b: Loop) -> SupervisorBuilder:
    return (
        SupervisorBuilder("server")
        .backoff(Backoff.none())
        .child(coroutine_child("a", a))
        .child(coroutine_child("b", b))
    )


async def test_restart_child_stops_and_starts_only_that_child_and_counts_it() -> None:
    a, b = Loop(), Loop()
    sup = two_loops(a, b).build(ManualClock())
    async with await sup.start():
        sub = sup.subscribe()
        await sup.restart_child("a")
        exited = await next_event(sub, ChildExited)
        assert (exited.child, exited.reason, exited.will_restart) == ("a", "shutdown", True)
        assert (await next_event(sub, ChildStarted)).child == "a"
        assert (a.starts, b.starts) == (2, 1)
        info = {c.name: c for c in sup.children()}
        assert info["a"].restarts == 1 and info["a"].state == "running"
        assert info["a"].last_exit == "shutdown: restart requested"
        assert info["b"].restarts == 0 and info["b"].last_exit is None
        # A requested restart is not a failure: the intensity window stays empty.
        assert sup.statistics().restarts_in_window == 0


async def test_stop_child_leaves_it_stopped_until_restarted() -> None:
    a, b = Loop(), Loop()
    sup = two_loops(a, b).build(ManualClock())
    sub = sup.subscribe()
    async with await sup.start():
        await sup.stop_child("a")
        exited = await next_event(sub, ChildExited, lambda e: e.child == "a")
        assert (exited.reason, exited.will_restart) == (ExitReason.SHUTDOWN, False)
        info = {c.name: c for c in sup.children()}
        assert info["a"].state == "done"
        assert info["a"].last_exit == "shutdown: stop requested"
        assert info["b"].state == "running"
        await sup.restart_child("a")
        assert {c.name: c.state for c in sup.children()}["a"] == "running"
        assert a.starts == 2


async def test_a_crash_is_recorded_as_the_last_exit() -> None:
    a, b = Loop(), Loop()
    sup = two_loops(a, b).build(ManualClock())
    sub = sup.subscribe()
    async with await sup.start():
        a.crash.set()
        await next_event(sub, ChildStarted, lambda e: e.child == "a" and e.attempt > 0)
        info = {c.name: c for c in sup.children()}["a"]
        assert info.restarts == 1
        assert info.last_exit == "error: raised RuntimeError('store went away')"


async def test_an_unknown_child_is_refused_by_name() -> None:
    sup = two_loops(Loop(), Loop()).build(ManualClock())
    async with await sup.start():
        with pytest.raises(UnknownChild, match=r"no child 'c'.*a, b"):
            await sup.restart_child("c")
        with pytest.raises(UnknownChild, match="no child 'c'"):
            await sup.stop_child("c")


async def test_force_open_rejects_calls_until_the_reset_timeout() -> None:
    clock = ManualClock()
    breaker = CircuitBreaker("telegram", reset_timeout_s=30, clock=clock)
    seen = []
    breaker.add_listener(lambda change: seen.append((change.old, change.new)))
    breaker.force_open()
    assert breaker.state is CircuitState.OPEN
    assert seen == [(CircuitState.CLOSED, CircuitState.OPEN)]
    with pytest.raises(CircuitOpenError):
        breaker.call(lambda: None)
    assert breaker.statistics().rejections == 1
    clock.advance(30)
    assert breaker.call(lambda: "probe") == "probe"
    assert breaker.state is CircuitState.CLOSED
