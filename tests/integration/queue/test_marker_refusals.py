"""A refused interrupted-marker write costs that one task its marker, never a committed lease."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from tests.integration.queue.conftest import make_service, runner, submit
from tests.support.live_server import live_server
from watchkeeper.clock import ManualClock
from watchkeeper.queue import reconcile
from watchkeeper.queue.service import QueueService
from watchkeeper.records.queue import Lease
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store
from watchkeeper.store.queue import QueueStore
from watchkeeper.store.queue import markers as marker_rows

#: Past the offline window (30 s): a runner that never heartbeats again is gone.
SILENT_S = 31

Refuse = Callable[[list[str] | None], None]


@pytest.fixture
def queue(tmp_path: Path, runtime: Runtime, clock: ManualClock) -> QueueService:
    return make_service(tmp_path, runtime.store, clock)


@pytest.fixture
def refuse_marks(store: Store) -> Iterator[Refuse]:
    """Make the database refuse every write of a task's metadata (of the given tasks only).

    A trigger, as a constraint or an operator's guard would: the write fails in
    the database, the rest of the transaction is untouched.
    """
    sqlite = store.url.startswith("sqlite")

    def refuse(task_ids: list[str] | None) -> None:
        quoted = ", ".join(f"'{task_id}'" for task_id in task_ids or [])
        with store.engine.begin() as conn:
            if sqlite:
                when = f"WHEN NEW.id IN ({quoted})" if task_ids else ""
                conn.execute(
                    text(
                        "CREATE TRIGGER refuse_marks BEFORE UPDATE OF metadata ON queue_tasks "
                        f"{when} BEGIN SELECT RAISE(ABORT, 'metadata is read-only'); END"
                    )
                )
                return
            conn.execute(
                text(
                    "CREATE FUNCTION refuse_marks() RETURNS trigger LANGUAGE plpgsql AS "
                    "$$ BEGIN RAISE EXCEPTION 'metadata is read-only'; END $$"
                )
            )
            when = f"WHEN (NEW.id IN ({quoted}))" if task_ids else ""
            conn.execute(
                text(
                    "CREATE TRIGGER refuse_marks BEFORE UPDATE OF metadata ON queue_tasks "
                    f"FOR EACH ROW {when} EXECUTE FUNCTION refuse_marks()"
                )
            )

    yield refuse
    with store.engine.begin() as conn:
        if sqlite:
            conn.execute(text("DROP TRIGGER IF EXISTS refuse_marks"))
        else:
            conn.execute(text("DROP TRIGGER IF EXISTS refuse_marks ON queue_tasks"))
            conn.execute(text("DROP FUNCTION IF EXISTS refuse_marks()"))


def _running(queue: QueueService, count: int, fleet: str = "cpu") -> list[Lease]:
    for _ in range(count):
        submit(queue, fleet=fleet)
    holder = runner(queue, fleet=fleet, capacity=count)
    leases = queue.lease(holder.id, limit=count)
    assert len(leases) == count
    return leases


def test_one_refused_marker_leaves_the_other_tasks_marked(
    runtime: Runtime,
    queue: QueueService,
    clock: ManualClock,
    refuse_marks: Refuse,
    caplog: pytest.LogCaptureFixture,
) -> None:
    first, refused, last = (lease.task.id for lease in _running(queue, 3))
    refuse_marks([refused])
    clock.advance(SILENT_S)
    with caplog.at_level(logging.WARNING):
        marked = reconcile.mark_interrupted(runtime.store, clock(), queue.policy)
    assert sorted(marked) == sorted([first, last])
    stamp = "2026-01-05T12:00:31Z"
    found = QueueStore(runtime.store.engine).interrupted([first, refused, last])
    assert found == {first: stamp, last: stamp}
    told = [r.getMessage() for r in caplog.records if r.name == marker_rows.__name__]
    assert len(told) == 1 and refused in told[0], told


def test_a_task_whose_metadata_is_not_an_object_is_skipped_and_the_others_marked(
    runtime: Runtime,
    queue: QueueService,
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    odd, plain = (lease.task.id for lease in _running(queue, 2))
    with runtime.store.engine.begin() as conn:
        conn.execute(
            text("UPDATE queue_tasks SET metadata = :m WHERE id = :id"),
            {"m": '"hand-written"', "id": odd},
        )
    clock.advance(SILENT_S)
    with caplog.at_level(logging.WARNING):
        assert reconcile.mark_interrupted(runtime.store, clock(), queue.policy) == [plain]
    told = [r.getMessage() for r in caplog.records if r.name == marker_rows.__name__]
    assert len(told) == 1 and odd in told[0] and "not an object" in told[0], told


def _marked_then_refused(
    runtime: Runtime, queue: QueueService, clock: ManualClock, refuse: Refuse
) -> list[Lease]:
    """Two running tasks of a gone runner, marked at start-up; then no marker may go."""
    leases = _running(queue, 2)
    clock.advance(SILENT_S)
    assert len(reconcile.mark_interrupted(runtime.store, clock(), queue.policy)) == 2
    refuse(None)
    return leases


def test_a_refused_marker_clear_leaves_renew_answering_the_renewal_it_committed(
    runtime: Runtime,
    queue: QueueService,
    clock: ManualClock,
    refuse_marks: Refuse,
) -> None:
    renewed, _ = _marked_then_refused(runtime, queue, clock, refuse_marks)
    rows = QueueStore(runtime.store.engine)
    with live_server(runtime) as server, server.client("reporter") as http:
        answer = http.post(
            f"/api/v1/tasks/{renewed.task.id}/renew",
            json={"lease_token": renewed.token, "progressed": True},
        )
        assert answer.status_code == 200, answer.text
    assert rows.task(renewed.task.id).progress_at == clock()
    # The marker stays (the next renewal tries again); the task is not lost.
    assert rows.interrupted([renewed.task.id]) != {}


def test_a_refused_marker_clear_leaves_lease_answering_the_leases_it_committed(
    runtime: Runtime,
    queue: QueueService,
    clock: ManualClock,
    refuse_marks: Refuse,
) -> None:
    leases = _marked_then_refused(runtime, queue, clock, refuse_marks)
    rows = QueueStore(runtime.store.engine)
    clock.advance(120)  # the gone runner's leases lapse
    queue.recover()
    assert {rows.task(x.task.id).status.value for x in leases} == {"queued"}
    with live_server(runtime) as server, server.client("reporter") as http:
        body = {"fleet": "cpu", "capacity": 2, "host": "h", "pid": 1}
        fresh = http.post("/api/v1/runners", json=body).json()["id"]
        leased = http.post(f"/api/v1/runners/{fresh}/lease", json={"max": 2})
        assert leased.status_code == 200, leased.text
        tasks = leased.json()["tasks"]
        assert sorted(t["id"] for t in tasks) == sorted(x.task.id for x in leases)
        for task in tasks:
            held = rows.task(task["id"])
            assert held.status.value == "running" and held.runner_id == fresh
            assert task["task_token"]
            # The answer's token is the committed lease's: the runner can hold it.
            again = http.post(
                f"/api/v1/tasks/{task['id']}/renew", json={"lease_token": task["lease_token"]}
            )
            assert again.status_code == 200, again.text
