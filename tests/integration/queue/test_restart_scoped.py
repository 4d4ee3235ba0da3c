"""A restart marks only the tasks whose runner is gone, never those a live runner holds.

Two replicas share one store: when one restarts, the runners of the other
keep heartbeating and renewing. Their tasks were not interrupted and must
not be marked; the tasks of a runner whose heartbeat was lost, or whose
lease lapsed, were.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.queue.conftest import make_service, runner, submit
from tests.support.live_server import live_server
from watchkeeper.clock import ManualClock
from watchkeeper.queue import reconcile
from watchkeeper.queue.service import QueueService
from watchkeeper.records.queue import Lease, TaskStatus
from watchkeeper.runtime import Runtime
from watchkeeper.store.queue import QueueStore


@pytest.fixture
def queue(tmp_path: Path, runtime: Runtime, clock: ManualClock) -> QueueService:
    return make_service(tmp_path, runtime.store, clock)


def _leased(queue: QueueService, runner_id: str, count: int) -> list[Lease]:
    for _ in range(count):
        submit(queue)
    leases = queue.lease(runner_id, limit=count)
    assert len(leases) == count
    return leases


def _keep_alive(queue: QueueService, runner_id: str, leases: list[Lease]) -> None:
    queue.heartbeat(runner_id)
    for lease in leases:
        queue.renew(lease.task.id, lease.token, progressed=True)


def test_a_restart_marks_the_tasks_of_a_lost_runner_and_not_of_a_live_one(
    runtime: Runtime, queue: QueueService, clock: ManualClock
) -> None:
    lost = runner(queue, capacity=2)
    live = runner(queue, capacity=2)
    of_lost = _leased(queue, lost.id, 2)
    of_live = _leased(queue, live.id, 2)
    # The lost runner falls silent; the live one heartbeats and renews past
    # the offline window (30 s), while the lost runner's leases (60 s) still run.
    for _ in range(4):
        clock.advance(10)
        _keep_alive(queue, live.id, of_live)
    assert not queue.alive(next(r for r in queue.runners() if r.id == lost.id))

    with live_server(runtime):  # a replica restarts on the shared store
        pass

    markers = QueueStore(runtime.store.engine).interrupted(
        [lease.task.id for lease in of_lost + of_live]
    )
    assert markers == {lease.task.id: "2026-01-05T12:00:40Z" for lease in of_lost}
    # The live runner goes on as if nothing happened and finishes normally.
    clock.advance(10)
    _keep_alive(queue, live.id, of_live)
    for lease in of_live:
        done = queue.complete(lease.task.id, lease.token)
        assert done.status is TaskStatus.SUCCEEDED
    assert QueueStore(runtime.store.engine).interrupted([x.task.id for x in of_live]) == {}


def test_a_lapsed_lease_is_marked_though_its_runner_still_heartbeats(
    runtime: Runtime, queue: QueueService, clock: ManualClock
) -> None:
    holder = runner(queue, capacity=2)
    renewed, lapsed = _leased(queue, holder.id, 2)
    for _ in range(7):  # 70 s: past the 60 s lease of the task never renewed
        clock.advance(10)
        queue.heartbeat(holder.id)
        queue.renew(renewed.task.id, renewed.token)

    marked = reconcile.mark_interrupted(runtime.store, clock(), queue.policy)

    assert marked == [lapsed.task.id]
    store = QueueStore(runtime.store.engine)
    assert store.interrupted([renewed.task.id, lapsed.task.id]) == {
        lapsed.task.id: "2026-01-05T12:01:10Z"
    }
    # Marked again by a later restart, it keeps its first marker.
    clock.advance(5)
    assert reconcile.mark_interrupted(runtime.store, clock(), queue.policy) == []
