"""Several outcomes recorded in one transaction, each still fenced by its own lease.

A batch of ends is one statement on PostgreSQL: every task whose lease is live
moves, with its timeline entry and its agent time, and its task token dies;
a task whose lease is gone is refused alone (``None`` in its place) while the
rest of the batch is recorded.
"""

from __future__ import annotations

from sqlalchemy import select

from tests.integration.queue.conftest import runner, submit
from watchkeeper.clock import ManualClock
from watchkeeper.queue.errors import LeaseLost
from watchkeeper.queue.service import QueueService
from watchkeeper.records.queue import Lease, TaskStatus
from watchkeeper.store import Store
from watchkeeper.store.queue import End
from watchkeeper.store.schema.queue import queue_events
from watchkeeper.store.tokens import TaskToken


def _events(queue: QueueService, task_id: str) -> list[str]:
    with queue.store._engine.connect() as conn:
        rows = conn.execute(
            select(queue_events.c.type).where(queue_events.c.task_id == task_id)
        ).scalars()
        return list(rows)


def _live_tokens(store: Store, leases: list[Lease]) -> int:
    found = [store.tokens.lookup(str(lease.task_token)) for lease in leases]
    return sum(isinstance(token, TaskToken) for token in found)


def test_a_batch_records_each_live_outcome_once_and_refuses_a_lost_lease_alone(
    queue: QueueService, store: Store, clock: ManualClock
) -> None:
    held = runner(queue, capacity=4)
    for index in range(4):
        submit(queue, org="acme" if index == 0 else "free", title=f"job {index}")
        clock.advance(1)  # leased oldest first: the first lease is acme's
    leases = queue.lease(held.id, limit=4)
    assert len(leases) == 4
    ok, failed, stale, gone = leases
    queue.complete(gone.task.id, gone.token)  # already ended: its lease is gone
    clock.advance(30)

    ends = [
        End(ok.task.id, ok.token, TaskStatus.SUCCEEDED, 0),
        End(failed.task.id, failed.token, TaskStatus.FAILED, 3, "boom", "fp-1"),
        End(stale.task.id, "not-the-token", TaskStatus.SUCCEEDED, 0),
        End(gone.task.id, gone.token, TaskStatus.SUCCEEDED, 0),
    ]
    results = queue.end_many(ends)

    assert [None if isinstance(r, LeaseLost) else r.status for r in results] == [
        TaskStatus.SUCCEEDED,
        TaskStatus.FAILED,
        None,
        None,
    ]
    assert queue.task(failed.task.id).failure_reason == "boom"
    assert queue.task(failed.task.id).exit_code == 3
    assert queue.task(stale.task.id).status is TaskStatus.RUNNING
    assert _events(queue, ok.task.id).count("succeeded") == 1
    assert _events(queue, failed.task.id).count("failed") == 1
    assert _events(queue, gone.task.id).count("succeeded") == 1
    assert _live_tokens(store, [ok, failed]) == 0
    assert _live_tokens(store, [stale]) == 1
    # Agent time of acme's task (the first) is counted once: 30 s.
    assert queue.store.snapshot(clock(), {"acme"}).loads["acme"].used_minutes == 0.5

    again = queue.end_many(ends[:2])
    assert all(isinstance(r, LeaseLost) for r in again)
    assert _events(queue, ok.task.id).count("succeeded") == 1


def test_a_batch_of_nothing_records_nothing(queue: QueueService) -> None:
    assert queue.end_many([]) == []
