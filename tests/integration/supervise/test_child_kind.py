"""Supervised children appear as the kind ``child`` on a real server: gave up is failed,
hung is stalled, a dead process leaves them stuck."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from watchkeeper.clock import ManualClock
from watchkeeper.notify.ops import OpsNotifier
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store
from watchkeeper.supervise import (
    Backoff,
    ChildContext,
    ChildReporter,
    SupervisorBuilder,
    SupervisorGaveUp,
    coroutine_child,
)
from watchkeeper.supervise import ManualClock as TreeClock
from watchkeeper.supervise.testing import next_event

from ...conftest import make_settings
from ...support.live_server import LiveServer, live_server
from ..helpers import sweep


async def crash(ctx: ChildContext) -> None:
    raise RuntimeError("model endpoint refused the key")


async def beats_once_then_hangs(ctx: ChildContext) -> None:
    ctx.heartbeat("batch 1")
    await asyncio.Event().wait()


@pytest.fixture
def served(tmp_path: Path, store: Store, clock: ManualClock) -> Iterator[LiveServer]:
    settings = make_settings(tmp_path, store.url)
    runtime = Runtime.open(settings, clock=clock, store=store, notifier=OpsNotifier(settings.ops))
    with live_server(runtime) as server:
        yield server
    runtime.sweeper.close()


def conditions(server: LiveServer) -> list[tuple[str, str, str]]:
    return sorted(
        (i.key.kind, i.key.run_id, i.key.condition)
        for i in server.runtime.store.incidents.list("open")
    )


def test_a_tree_that_gives_up_is_a_failed_child(served: LiveServer) -> None:
    async def scenario() -> None:
        tree = (
            SupervisorBuilder("ingest")
            .backoff(Backoff.none())
            .intensity(max_restarts=0, period_s=5)
            .child(coroutine_child("embedder", crash))
            .build(TreeClock())
        )
        reporter = ChildReporter(served.url, served.tokens["reporter"])
        reporter.attach(tree)
        events = tree.subscribe()
        await tree.start()
        await next_event(events, SupervisorGaveUp)
        await reporter.drain()
        await reporter.aclose()
        assert reporter.statistics().failed == 0

    asyncio.run(scenario())
    sweep(served.runtime)
    assert conditions(served) == [("child", "ingest:embedder", "failed")]
    incident = served.runtime.store.incidents.list("open")[0]
    assert incident.key.fingerprint == "gave_up"


def test_a_hung_child_in_a_living_process_is_stalled_and_a_dead_one_stuck(
    served: LiveServer, clock: ManualClock
) -> None:
    async def scenario() -> None:
        tree = (
            SupervisorBuilder("agent")
            .child(coroutine_child("loop", beats_once_then_hangs))
            .build(TreeClock())
        )
        reporter = ChildReporter(
            served.url, served.tokens["reporter"], lease_s=900, progress_interval_s=0
        )
        reporter.attach(tree)
        handle = await tree.start()
        await asyncio.sleep(0)
        await reporter.drain()
        clock.advance(601)  # the server's clock: past the child budget, within the lease
        await reporter.beat()  # the process is alive; the child is not moving
        await reporter.drain()
        await served.runtime.sweeper.sweep()
        assert conditions(served) == [("child", "agent:loop", "stalled")]
        clock.advance(901)  # no liveness for longer than the lease: the process is gone
        await served.runtime.sweeper.sweep()
        assert conditions(served) == [("child", "agent:loop", "stuck")]
        await reporter.aclose()
        await handle.stop()

    asyncio.run(scenario())
