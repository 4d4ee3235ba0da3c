"""Starting in the background, holding a child until released, and restarting one as unhealthy."""

from __future__ import annotations

import asyncio

import pytest

from watchkeeper.supervise import (
    Backoff,
    ChildContext,
    ChildExited,
    ChildHeld,
    ChildRestarting,
    ChildStarted,
    ExitReason,
    ManualClock,
    RestartIntensityExceeded,
    Strategy,
    SupervisorBuilder,
    SupervisorGaveUp,
    coroutine_child,
)
from watchkeeper.supervise.spec import Hold
from watchkeeper.supervise.testing import drain, next_event

pytestmark = pytest.mark.anyio


class Child:
    """A coroutine child that fails its start while ``failing`` is set, else runs until told."""

    def __init__(self, starts: list[str], name: str) -> None:
        self.starts = starts
        self.name = name
        self.failing = False
        self.crash = asyncio.Event()

    async def __call__(self, ctx: ChildContext) -> None:
        self.starts.append(self.name)
        if self.failing:
            raise RuntimeError(f"{self.name} cannot start")
        ctx.started()
        await self.crash.wait()
        self.crash.clear()
        raise RuntimeError(f"{self.name} crashed")


def three(
    strategy: Strategy, starts: list[str], holds: dict[str, Hold] | None = None
) -> tuple[SupervisorBuilder, dict[str, Child]]:
    children = {name: Child(starts, name) for name in ("a", "b", "c")}
    builder = (
        SupervisorBuilder("group")
        .strategy(strategy)
        .start_in_background()
        .intensity(3, 60.0)
        .backoff(Backoff(initial=1.0, factor=2.0, cap=10.0, jitter=0.0))
    )
    for name, child in children.items():
        hold = (holds or {}).get(name)
        builder.child(coroutine_child(name, child, wait_ready=True, hold=hold))
    return builder, children


async def test_start_returns_at_once_and_the_children_start_in_order_after_it() -> None:
    starts: list[str] = []
    builder, _ = three(Strategy.ONE_FOR_ONE, starts)
    sup = builder.build(ManualClock())
    events = sup.subscribe()
    handle = await sup.start()
    assert starts == []  # nothing has started yet: start() did not wait
    for name in ("a", "b", "c"):
        assert (await next_event(events, ChildStarted)).child == name
    assert starts == ["a", "b", "c"]
    await handle.stop()


async def test_a_failed_start_is_restarted_by_the_policy_instead_of_failing_start() -> None:
    starts: list[str] = []
    builder, children = three(Strategy.REST_FOR_ONE, starts)
    children["b"].failing = True
    clock = ManualClock()
    sup = builder.build(clock)
    events = sup.subscribe()
    handle = await sup.start()
    exited = await next_event(events, ChildExited, lambda e: e.child == "b")
    assert (exited.reason, exited.will_restart) == (ExitReason.ERROR, True)
    restarting = await next_event(events, ChildRestarting)
    assert (restarting.child, restarting.delay_s) == ("b", 1.0)
    # rest-for-one: c depends on b and waits for it; b waits out its backoff.
    assert starts == ["a", "b"]
    info = {c.name: c for c in handle.children()}
    assert info["b"].restart_at == clock.now() + 1.0
    assert info["c"].state == "restart_pending"
    children["b"].failing = False
    clock.advance(1.0)
    assert (await next_event(events, ChildStarted, lambda e: e.child == "c")).attempt == 0
    assert starts == ["a", "b", "b", "c"]
    assert handle.statistics().restarts == 1  # the failed start counted
    await handle.stop()


async def test_one_for_one_starts_the_others_while_one_keeps_failing_to_start() -> None:
    starts: list[str] = []
    builder, children = three(Strategy.ONE_FOR_ONE, starts)
    children["a"].failing = True
    sup = builder.build(ManualClock())
    events = sup.subscribe()
    handle = await sup.start()
    started = [(await next_event(events, ChildStarted, lambda e: e.child != "a")).child]
    started.append((await next_event(events, ChildStarted, lambda e: e.child != "a")).child)
    assert started == ["b", "c"]
    await handle.stop()


async def test_failed_starts_beyond_the_intensity_make_it_give_up() -> None:
    starts: list[str] = []
    builder, children = three(Strategy.ONE_FOR_ONE, starts)
    children["c"].failing = True
    clock = ManualClock(autojump=True)
    sup = builder.build(clock)
    events = sup.subscribe()
    handle = await sup.start()
    gave_up = await next_event(events, SupervisorGaveUp)
    assert gave_up.restarts == 4  # more than 3 within 60 s
    with pytest.raises(RestartIntensityExceeded):
        await handle.wait()
    assert starts.count("c") == 4


async def test_a_held_child_waits_with_those_after_it_until_released() -> None:
    starts: list[str] = []
    gate: list[str] = ["disk /srv has 0.5 GiB free"]
    builder, _ = three(Strategy.REST_FOR_ONE, starts, {"b": lambda: gate[0] if gate else None})
    sup = builder.build(ManualClock())
    events = sup.subscribe()
    handle = await sup.start()
    held = await next_event(events, ChildHeld)
    assert (held.child, held.reason) == ("b", "disk /srv has 0.5 GiB free")
    info = {c.name: c for c in handle.children()}
    assert (info["b"].state, info["b"].held) == ("held", "disk /srv has 0.5 GiB free")
    assert starts == ["a"]
    handle.release_held()  # still held: nothing starts, nothing more is said
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert starts == ["a"] and drain(events) == []
    gate.clear()
    handle.release_held()
    assert (await next_event(events, ChildStarted)).child == "b"
    assert (await next_event(events, ChildStarted)).child == "c"
    await handle.stop()


async def test_a_held_restart_waits_and_a_stop_request_ends_the_wait() -> None:
    starts: list[str] = []
    gate: list[str] = []
    child = Child(starts, "a")
    spec = coroutine_child("a", child, wait_ready=True, hold=lambda: gate[0] if gate else None)
    sup = SupervisorBuilder("g").backoff(Backoff.none()).child(spec).build(ManualClock())
    events = sup.subscribe()
    handle = await sup.start()
    gate.append("memory is low")
    child.crash.set()
    assert (await next_event(events, ChildHeld)).reason == "memory is low"
    await handle.stop_child("a")
    assert [c.state for c in handle.children()] == ["done"]
    gate.clear()
    handle.release_held()
    await asyncio.sleep(0)
    assert starts == ["a"]  # stopped on request: the release does not start it
    await handle.stop()


async def test_fail_child_restarts_it_as_unhealthy_and_counts_it_in_the_intensity() -> None:
    starts: list[str] = []
    child = Child(starts, "web")
    sup = (
        SupervisorBuilder("g")
        .intensity(1, 60.0)
        .backoff(Backoff.none())
        .child(coroutine_child("web", child, wait_ready=True))
        .build(ManualClock())
    )
    events = sup.subscribe()
    handle = await sup.start()
    await handle.fail_child("web", "http probe answered 500 three times")
    exited = await next_event(events, ChildExited)
    assert (exited.reason, exited.detail, exited.will_restart) == (
        ExitReason.UNHEALTHY,
        "http probe answered 500 three times",
        True,
    )
    await next_event(events, ChildStarted)
    await handle.fail_child("web", "still failing")
    await next_event(events, SupervisorGaveUp)
    with pytest.raises(RestartIntensityExceeded):
        await handle.wait()


async def test_stop_does_not_wait_for_a_child_still_becoming_ready() -> None:
    async def never_ready(_ctx: ChildContext) -> None:
        await asyncio.Event().wait()

    spec = coroutine_child("slow", never_ready, wait_ready=True, start_timeout_s=3600)
    sup = SupervisorBuilder("g").start_in_background().child(spec).build(ManualClock())
    events = sup.subscribe()
    handle = await sup.start()
    await next_event(events, ChildStarted)
    await handle.stop()  # the clock never moves: only the interrupt can end the wait
    exited = await next_event(events, ChildExited)
    assert (exited.reason, exited.detail) == (ExitReason.SHUTDOWN, "stopped while starting")
    assert handle.finished


async def test_stop_child_does_not_wait_for_that_child_to_become_ready() -> None:
    async def never_ready(_ctx: ChildContext) -> None:
        await asyncio.Event().wait()

    spec = coroutine_child("slow", never_ready, wait_ready=True, start_timeout_s=3600)
    sup = SupervisorBuilder("g").start_in_background().child(spec).build(ManualClock())
    events = sup.subscribe()
    handle = await sup.start()
    await next_event(events, ChildStarted)
    await handle.stop_child("slow")
    assert [c.state for c in handle.children()] == ["done"]
    await handle.stop()
