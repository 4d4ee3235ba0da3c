"""ChildReporter against a real HTTP server on loopback that records what it gets."""

from __future__ import annotations

import asyncio
import socket
from typing import TYPE_CHECKING

import pytest

from watchkeeper.supervise import (
    Backoff,
    ChildContext,
    ChildReporter,
    ChildStarted,
    ManualClock,
    Restart,
    SupervisorBuilder,
    SupervisorGaveUp,
    coroutine_child,
)
from watchkeeper.supervise.testing import next_event

if TYPE_CHECKING:
    from conftest import RecordingServer

pytestmark = pytest.mark.anyio


async def idle(ctx: ChildContext) -> None:
    await asyncio.Event().wait()


async def crash(ctx: ChildContext) -> None:
    raise RuntimeError("broken config")


async def test_a_child_life_becomes_run_reports(recording_server: RecordingServer) -> None:
    clock = ManualClock()
    contexts: list[ChildContext] = []

    async def worker(ctx: ChildContext) -> None:
        contexts.append(ctx)
        await asyncio.Event().wait()

    sup = (
        SupervisorBuilder("tree")
        .events(heartbeat_interval_s=0.0)
        .child(coroutine_child("indexer", worker, title="Index documents"))
        .build(clock)
    )
    reporter = ChildReporter(recording_server.url, "s3cret", lease_s=90, progress_interval_s=10)
    reporter.attach(sup)
    handle = await sup.start()
    for step in ("page 1", "page 2", "page 3"):  # one report: the rest fall in the interval
        contexts[0].heartbeat(step)
    clock.advance(10)
    contexts[0].heartbeat("page 4")
    await handle.stop()
    await reporter.drain()
    await reporter.aclose()

    got = recording_server.wait_for(4)
    assert [(r.method, r.path) for r in got] == [
        ("POST", "/api/v1/runs"),
        ("POST", "/api/v1/runs/child/tree:indexer/progress"),
        ("POST", "/api/v1/runs/child/tree:indexer/progress"),
        ("POST", "/api/v1/runs/child/tree:indexer/finish"),
    ]
    assert got[0].body == {
        "kind": "child",
        "run_id": "tree:indexer",
        "title": "Index documents",
        "lease_s": 90,
    }
    assert [r.body for r in got[1:]] == [{"step": "page 1"}, {"step": "page 4"}, {}]
    assert {r.headers["authorization"] for r in got} == {"Bearer s3cret"}
    stats = reporter.statistics()
    assert (stats.sent, stats.failed, stats.throttled) == (4, 0, 2)


async def test_giving_up_fails_every_run_of_the_tree(recording_server: RecordingServer) -> None:
    sup = (
        SupervisorBuilder("tree")
        .backoff(Backoff.none())
        .intensity(max_restarts=0, period_s=5)
        .child(coroutine_child("steady", idle))
        .child(coroutine_child("broken", crash))
        .build(ManualClock())
    )
    reporter = ChildReporter(recording_server.url, "t")
    reporter.attach(sup)
    sub = sup.subscribe()
    await sup.start()
    await next_event(sub, SupervisorGaveUp)
    await reporter.drain()
    await reporter.aclose()
    fails = {r.path: r.body for r in recording_server.requests if r.path.endswith("/fail")}
    assert set(fails) == {
        "/api/v1/runs/child/tree:steady/fail",
        "/api/v1/runs/child/tree:broken/fail",
    }
    for body in fails.values():
        assert isinstance(body, dict)
        assert body["fingerprint"] == "gave_up"
        assert "gave up after 1 restarts within 5 s" in body["reason"]
    assert not any(r.path.endswith("/finish") for r in recording_server.requests)


async def test_a_temporary_child_that_crashes_fails_with_its_reason(
    recording_server: RecordingServer,
) -> None:
    sup = (
        SupervisorBuilder("tree")
        .child(coroutine_child("once", crash, restart=Restart.TEMPORARY))
        .build(ManualClock())
    )
    reporter = ChildReporter(recording_server.url, "t")
    reporter.attach(sup)
    handle = await sup.start()
    await reporter.drain()
    got = recording_server.wait_for(2)
    assert got[1].path == "/api/v1/runs/child/tree:once/fail"
    assert got[1].body == {
        "reason": "error: raised RuntimeError('broken config')",
        "fingerprint": "error",
    }
    await handle.stop()
    await reporter.aclose()


async def test_an_unreachable_server_is_counted_and_never_blocks_the_tree() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
        sup = SupervisorBuilder("tree").child(coroutine_child("a", idle)).build(ManualClock())
        reporter = ChildReporter(url, "t")
        reporter.attach(sup)
        handle = await sup.start()
        await handle.stop()
        await reporter.drain()
    await reporter.aclose()
    stats = reporter.statistics()
    assert (stats.sent, stats.failed) == (0, 2)  # the start and the finish


async def test_a_stalled_server_costs_dropped_reports_not_a_stalled_child(
    recording_server: RecordingServer,
) -> None:
    recording_server.hold.clear()  # the server accepts requests but does not answer
    finished = asyncio.Event()

    async def busy(ctx: ChildContext) -> None:
        for i in range(200):
            ctx.heartbeat(f"item {i}")
            await asyncio.sleep(0)
        finished.set()
        await asyncio.Event().wait()

    sup = (
        SupervisorBuilder("tree")
        .events(heartbeat_interval_s=0.0)
        .child(coroutine_child("busy", busy))
        .build(ManualClock())
    )
    reporter = ChildReporter(recording_server.url, "t", queue_size=5, progress_interval_s=0)
    reporter.attach(sup)
    sub = sup.subscribe()
    handle = await sup.start()
    await next_event(sub, ChildStarted)
    await asyncio.wait_for(finished.wait(), 10)
    assert reporter.statistics().dropped > 0
    recording_server.hold.set()
    await handle.stop()
    await reporter.drain()
    await reporter.aclose()
