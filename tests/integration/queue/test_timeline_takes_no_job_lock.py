"""PostgreSQL: writing a task's timeline never waits on its job's row.

A timeline entry names its job. Were that a checked foreign key, every entry
would take a share lock on the job's row, so a pass would wait behind anyone
holding the job (a delete, an edit) and the runners of one many-task job would
all lock the same row. The entries are deleted with their job by the store
itself, so no lock is needed.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.integration.queue.conftest import make_service, runner, submit
from watchkeeper.clock import ManualClock
from watchkeeper.queue.errors import LeaseLost
from watchkeeper.records.queue import Lease, Task, TaskStatus
from watchkeeper.store import Store
from watchkeeper.store.queue import End


def test_a_pass_goes_on_while_its_job_row_is_held(
    store: Store, tmp_path: Path, clock: ManualClock
) -> None:
    if store.engine.dialect.name != "postgresql":
        pytest.skip("SQLite takes no row locks")
    queue = make_service(tmp_path, store, clock, orgs={})
    held = runner(queue, capacity=1)
    first, second = submit(queue), submit(queue)
    [lease] = queue.lease(held.id)
    done: list[tuple[list[Task | LeaseLost], list[Lease]]] = []
    with store.engine.connect() as other:
        other.exec_driver_sql(
            "SELECT id FROM queue_jobs WHERE id IN (%(a)s, %(b)s) FOR UPDATE",
            {"a": first.id, "b": second.id},
        )
        end = End(lease.task.id, lease.token, TaskStatus.SUCCEEDED, 0)
        passing = threading.Thread(
            target=lambda: done.append(queue.report_and_lease(held.id, [end], 1)), daemon=True
        )
        passing.start()
        passing.join(timeout=30)
        finished = not passing.is_alive()
        other.rollback()
    passing.join()
    assert finished, "the pass waited on the job rows"
    [(ended, leased)] = done
    assert [task.status for task in ended if isinstance(task, Task)] == [TaskStatus.SUCCEEDED]
    [other_job] = {first.id, second.id} - {lease.task.job_id}
    assert [x.task.job_id for x in leased] == [other_job]
