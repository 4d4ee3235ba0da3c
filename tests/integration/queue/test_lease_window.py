"""Leasing finds every leasable task, however many blocked ones queue ahead of it.

A capped org's backlog must not hide another org's task from a runner with a
free slot, and runners leasing at the same moment on PostgreSQL must together
take every task they have room for.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.conftest import make_settings
from tests.integration.queue.conftest import make_service, runner
from watchkeeper.clock import ManualClock
from watchkeeper.queue.rules import Reason
from watchkeeper.queue.service import QueueService
from watchkeeper.records.queue import Lease, NewJob, NewRunner
from watchkeeper.store import Store

#: More blocked tasks than any fixed candidate window the lease once read.
BACKLOG = 70


def _submit(queue: QueueService, org: str, count: int) -> list[str]:
    new = NewJob("t", org, "cpu", {"argv": ["true"]}, "test")
    return queue.store.submit_many([new] * count, queue.clock())


def test_a_capped_backlog_does_not_hide_another_orgs_task(
    store: Store, tmp_path: Path, clock: ManualClock
) -> None:
    queue = make_service(tmp_path, store, clock, orgs={"acme": {"max_concurrent_jobs": 1}})
    daemon = runner(queue, capacity=10)
    _submit(queue, "acme", 1)
    assert len(queue.lease(daemon.id)) == 1  # acme now runs its one allowed job
    clock.advance(1)
    backlog = _submit(queue, "acme", BACKLOG)
    clock.advance(1)
    [other] = _submit(queue, "free", 1)

    before = queue.blocked()
    assert before[other].code is Reason.AWAITING_RUNNER
    assert {before[task_id].code for task_id in backlog} == {Reason.CONCURRENCY_CAP}

    leases = queue.lease(daemon.id, limit=5)
    assert [lease.task.id for lease in leases] == [other]
    after = queue.blocked()
    assert other not in after
    assert {blocked.code for blocked in after.values()} == {Reason.CONCURRENCY_CAP}


ROUNDS = 5
RUNNERS = 6
SLOTS = 5


def test_runners_leasing_together_take_every_task_they_have_room_for(
    store: Store, tmp_path: Path
) -> None:
    if store.url.startswith("sqlite"):
        pytest.skip("SQLite serialises writers: concurrent leases are a PostgreSQL matter")
    settings = make_settings(tmp_path, store.url)
    queue = QueueService(store, settings)
    stores = [Store(store.url, migrate=False) for _ in range(RUNNERS)]
    services = [QueueService(opened, settings) for opened in stores]
    ids = [mine.register(NewRunner("cpu", SLOTS, "host", 1)).id for mine in services]
    try:
        for _ in range(ROUNDS):
            expected = set(_submit(queue, "free", RUNNERS * SLOTS))
            results: list[list[Lease]] = [[] for _ in services]
            start = threading.Barrier(RUNNERS)

            def work(
                index: int, results: list[list[Lease]] = results, start: threading.Barrier = start
            ) -> None:
                start.wait()
                results[index] = services[index].lease(ids[index], limit=SLOTS)

            threads = [threading.Thread(target=work, args=(i,)) for i in range(RUNNERS)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=60)
            leased = [lease.task.id for got in results for lease in got]
            assert sorted(leased) == sorted(expected)  # every task, none twice
            for index, got in enumerate(results):  # free the slots for the next round
                for lease in got:
                    services[index].complete(lease.task.id, lease.token)
    finally:
        for opened in stores:
            opened.close()
