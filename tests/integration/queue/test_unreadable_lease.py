"""A queued task whose stored row cannot be read is set aside by the lease, never handed out.

The oldest queued task of a fleet, spoiled by hand (a time before any calendar,
a payload that is no object, a lease that never ends), was claimed by every
lease of the fleet, could not be read back, and rolled the lease back: every
lease answered 500 and the whole fleet starved behind one row. Now the lease
that claims such a row fails it in the same transaction, with a reason naming
the column and the value (a dead letter), logs it once, and goes on to hand out
the next readable tasks in the same call; no later lease touches it again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, text

from tests.integration.queue.conftest import make_service, runner, submit
from tests.integration.queue.test_odd_task_rows import Odd, spoil
from tests.support.live_server import live_server
from watchkeeper.clock import ManualClock
from watchkeeper.queue.service import QueueService
from watchkeeper.queue.views import job_json
from watchkeeper.records.queue import Job
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store
from watchkeeper.store import unreadable as unreadable_rows

#: Values that survive the claim (it rewrites the lease's own columns) and keep the row
#: unreadable, per database that can hold them.
ODD = {
    "time before any calendar": Odd(
        "queue_tasks", "queued_at", {"sqlite": -1e20, "postgresql": -1e20}
    ),
    "payload that is no object": Odd(
        "queue_tasks", "payload", {"sqlite": "[1, 2]", "postgresql": "[1, 2]"}
    ),
    "lease that never ends": Odd("queue_tasks", "lease_s", {"sqlite": 1e300, "postgresql": 1e300}),
    "payload that is no JSON": Odd("queue_tasks", "payload", {"sqlite": "{not json"}),
    "text in an integer column": Odd("queue_tasks", "seq", {"sqlite": "first"}),
}
#: What the failure reason shows of each value.
SHOWN = {
    "time before any calendar": "-1e+20",
    "payload that is no object": "[1, 2]",
    "lease that never ends": "1e+300",
    "payload that is no JSON": "'{not json'",
    "text in an integer column": "'first'",
}
#: What every set-aside task's failure reason says.
REASON_SHOWN = "its stored row cannot be read"
CASES = [
    pytest.param(dialect, name, id=f"{dialect}-{name.replace(' ', '-')}")
    for name, odd in ODD.items()
    for dialect in odd.values
]


@pytest.fixture(autouse=True)
def fresh_log_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test counts its own log lines: rows told in an earlier test are told again."""
    monkeypatch.setattr(unreadable_rows, "_told", set())


@pytest.fixture(params=["capped orgs", "no capped org"])
def policy(request: pytest.FixtureRequest) -> dict[str, Any]:
    """With a capped org every lease is judged task by task; without one, on PostgreSQL,
    a runner's pass is one statement that claims before anything reads the rows."""
    return {} if request.param == "capped orgs" else {"orgs": {}}


def dialect_of(store: Store) -> str:
    return "sqlite" if store.url.startswith("sqlite") else "postgresql"


def stored(store: Store, task_id: str) -> dict[str, Any]:
    """The task's row as stored, without reading it as a record."""
    columns = "status, runner_id, lease_token, attempt, version, failure_reason, updated_at"
    with store.engine.connect() as conn:
        row = conn.execute(
            text(f"SELECT {columns} FROM queue_tasks WHERE id = :id"), {"id": task_id}
        ).one()
        events = conn.execute(
            text("SELECT type, detail FROM queue_events WHERE task_id = :id ORDER BY id"),
            {"id": task_id},
        ).all()
    return {**row._mapping, "events": [tuple(event) for event in events]}


def told_about(caplog: pytest.LogCaptureFixture, task_id: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if task_id in r.getMessage()]


def queue_with_odd_oldest(
    queue: QueueService, store: Store, clock: ManualClock, name: str
) -> tuple[Job, list[Job]]:
    """One odd job, the oldest of the fleet, then three good ones."""
    odd = submit(queue, title="odd-job")
    good = []
    for number in range(3):
        clock.advance(1)
        good.append(submit(queue, title=f"good-{number}"))
    spoil(store, ODD[name], odd.tasks[0].id, ODD[name].values[dialect_of(store)])
    return odd, good


def check_set_aside(row: dict[str, Any], name: str) -> None:
    """The row is failed with a reason naming the column and the value; never leased."""
    assert row["status"] == "failed", row
    assert row["runner_id"] is None and row["lease_token"] is None, row
    reason = row["failure_reason"]
    assert reason.startswith(REASON_SHOWN), reason
    assert f"{ODD[name].column}={SHOWN[name]}" in reason, reason
    assert [event_type for event_type, _ in row["events"]] == ["queued", "failed"], row
    assert row["events"][-1][1] == reason


def shown_task(job: dict[str, Any], task_id: str, name: str) -> list[dict[str, Any]]:
    """The task as its job shows it: among the unreadable ones, or among the tasks once
    its row reads whole (a lease that never ends is readable when no lease is held)."""
    if name == "lease that never ends":
        assert "unreadable" not in job, job
        return [task for task in job["tasks"] if task["id"] == task_id]
    assert job["unreadable_tasks"] == [task_id]
    return job["unreadable"]


@pytest.mark.parametrize(("db_url", "name"), CASES, indirect=["db_url"])
def test_a_lease_sets_the_unreadable_oldest_task_aside_and_hands_out_the_others(
    tmp_path: Path,
    store: Store,
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
    policy: dict[str, Any],
    db_url: str,
    name: str,
) -> None:
    queue = make_service(tmp_path, store, clock, **policy)
    odd, good = queue_with_odd_oldest(queue, store, clock, name)
    odd_task = odd.tasks[0].id
    before = queue.blocked()
    assert set(before) == {job.tasks[0].id for job in [odd, *good]}
    assert all(reason.code.value != "unknown" for reason in before.values()), before
    worker = runner(queue, capacity=3)
    with caplog.at_level(logging.INFO):
        # Three slots: the claim takes the odd row and two good ones, and the lease
        # goes on to take the third in the same call.
        leased = queue.lease(worker.id, 3)
        assert sorted(x.task.job_id for x in leased) == sorted(job.id for job in good)
        assert all(x.task_token for x in leased)
        row = stored(store, odd_task)
        check_set_aside(row, name)
        assert row["attempt"] == 0  # it never ran
        job = queue.job(odd.id)
        shown = job_json(job, queue.blocked([job]))
        assert shown["status"] == "failed"
        [aside] = shown_task(shown, odd_task, name)
        assert aside["status"] == "failed"
        assert aside["failure"]["reason"] == row["failure_reason"]
        # Later leases never touch it again.
        clock.advance(1)
        later = submit(queue, title="later")
        again = queue.lease_pass(worker.id, [], 3)
        assert again.leases == [] and again.reason is not None
        assert again.reason.code == "runner_full"
        for lease in leased:
            queue.complete(lease.task.id, lease.token)
        clock.advance(1)
        last = queue.lease(worker.id, 3)
        assert [x.task.job_id for x in last] == [later.id]
        assert stored(store, odd_task) == row
        assert queue.blocked() == {}
    told = told_about(caplog, odd_task)
    assert len(told) == 1, told
    assert ODD[name].column in told[0] and "failed" in told[0]


@pytest.mark.parametrize(("db_url", "name"), CASES[:2], indirect=["db_url"])
def test_a_lease_of_nothing_but_the_unreadable_task_comes_back_empty_and_says_why(
    tmp_path: Path, store: Store, clock: ManualClock, policy: dict[str, Any], db_url: str, name: str
) -> None:
    queue = make_service(tmp_path, store, clock, **policy)
    odd = submit(queue, title="odd-job")
    spoil(store, ODD[name], odd.tasks[0].id, ODD[name].values[dialect_of(store)])
    worker = runner(queue, capacity=2)
    empty = queue.lease_pass(worker.id, [], 2)
    assert empty.leases == []
    assert empty.reason is not None and empty.reason.code == "queue_empty"
    check_set_aside(stored(store, odd.tasks[0].id), name)


@pytest.mark.parametrize(
    ("db_url", "name"),
    [
        ("sqlite", "time before any calendar"),
        ("postgresql", "time before any calendar"),
        ("postgresql", "payload that is no object"),
    ],
    indirect=["db_url"],
)
def test_over_http_the_fleet_leases_past_an_unreadable_oldest_task(
    runtime: Runtime,
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
    db_url: str,
    name: str,
) -> None:
    with (
        caplog.at_level(logging.INFO),
        live_server(runtime) as server,
        server.client("reporter") as http,
        server.client("admin") as admin,
    ):
        jobs = []
        for number in range(4):
            made = admin.post(
                "/api/v1/jobs",
                json={
                    "title": f"job-{number}",
                    "org": "o",
                    "fleet": "cpu",
                    "payload": {"argv": ["true"]},
                },
            )
            assert made.status_code == 201, made.text
            jobs.append(made.json())
            clock.advance(1)
        odd, good = jobs[0], jobs[1:]
        odd_task = odd["tasks"][0]["id"]
        spoil(runtime.store, ODD[name], odd_task, ODD[name].values[dialect_of(runtime.store)])
        made = http.post(
            "/api/v1/runners", json={"fleet": "cpu", "capacity": 3, "host": "h", "pid": 7}
        )
        assert made.status_code == 201, made.text
        path = f"/api/v1/runners/{made.json()['id']}/lease"
        leased = http.post(path, json={"max": 3})
        assert leased.status_code == 200, leased.text
        tasks = leased.json()["tasks"]
        assert sorted(task["job_id"] for task in tasks) == sorted(job["id"] for job in good)
        row = stored(runtime.store, odd_task)
        check_set_aside(row, name)
        page = admin.get(f"/api/v1/jobs/{odd['id']}")
        assert page.status_code == 200, page.text
        assert page.json()["status"] == "failed"
        [aside] = shown_task(page.json(), odd_task, name)
        assert aside["failure"]["reason"] == row["failure_reason"]
        fleet = admin.get("/api/v1/jobs", params={"fleet": "cpu"})
        assert fleet.status_code == 200, fleet.text
        listed = {job["id"]: job["status"] for job in fleet.json()["jobs"]}
        assert listed == {odd["id"]: "failed", **{job["id"]: "running" for job in good}}
        assert admin.get("/api/v1/topology").status_code == 200
        # The task kind judges it failed: people are told, with the reason.
        swept = asyncio.run(runtime.sweeper.sweep())
        found = [i for i in runtime.store.incidents.live(["task"]) if i.key.run_id == odd_task]
        assert len(found) == 1, [(read.kind, read.error) for read in swept.reads]
        [incident] = found
        assert incident.key.condition == "failed"
        assert incident.title == "job-0" and REASON_SHOWN in incident.reason, incident
        outcomes = [
            {"task_id": task["id"], "lease_token": task["lease_token"], "exit_code": 0}
            for task in tasks
        ]
        done = http.post(path, json={"max": 3, "outcomes": outcomes})
        assert done.status_code == 200, done.text
        assert [x["status"] for x in done.json()["outcomes"]] == ["succeeded"] * 3
        assert done.json()["tasks"] == []
        assert done.json()["reason"]["code"] == "queue_empty"
        assert stored(runtime.store, odd_task) == row
    told = told_about(caplog, odd_task)
    assert len(told) == 1, told


@pytest.fixture
def statements(store: Store) -> Iterator[list[str]]:
    """Every statement sent to the database while the test runs."""
    sent: list[str] = []

    def note(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        sent.append(statement)

    event.listen(store.engine, "before_cursor_execute", note)
    yield sent
    event.remove(store.engine, "before_cursor_execute", note)


#: What a lease of three readable tasks sends, by database and policy, as counted before
#: leases learned to set unreadable rows aside: the check of what was claimed reads the
#: rows the claim returned, and sends nothing more while every row can be read.
LEASE_STATEMENTS = {
    ("sqlite", "capped orgs"): 6,
    ("sqlite", "no capped org"): 5,
    ("postgresql", "capped orgs"): 4,
    ("postgresql", "no capped org"): 1,
}


def test_a_lease_of_readable_tasks_sends_no_more_statements_than_before(
    tmp_path: Path,
    store: Store,
    clock: ManualClock,
    policy: dict[str, Any],
    statements: list[str],
    request: pytest.FixtureRequest,
) -> None:
    queue = make_service(tmp_path, store, clock, **policy)
    worker = runner(queue, capacity=6)
    for _ in range(6):
        submit(queue)
        clock.advance(1)
    first = queue.lease(worker.id, 3)  # lapsed leases are taken back first, then not for 1 s
    assert len(first) == 3
    statements.clear()
    second = queue.lease_pass(worker.id, [], 3)
    assert len(second.leases) == 3
    key = (dialect_of(store), "capped orgs" if policy == {} else "no capped org")
    assert len(statements) == LEASE_STATEMENTS[key], statements


@pytest.mark.parametrize(
    ("db_url", "name"),
    [("sqlite", "time before any calendar"), ("postgresql", "payload that is no object")],
    indirect=["db_url"],
)
def test_retrying_the_job_queues_it_again_and_the_next_lease_judges_it_afresh(
    tmp_path: Path, store: Store, clock: ManualClock, policy: dict[str, Any], db_url: str, name: str
) -> None:
    queue = make_service(tmp_path, store, clock, **policy)
    odd = submit(queue, title="odd-job")
    odd_task = odd.tasks[0].id
    spoil(store, ODD[name], odd_task, ODD[name].values[dialect_of(store)])
    worker = runner(queue, capacity=2)
    assert queue.lease(worker.id, 2) == []
    assert queue.retry(odd.id).affected == 1
    assert stored(store, odd_task)["status"] == "queued"
    clock.advance(1)
    again = queue.lease(worker.id, 2)
    if name == "time before any calendar":
        # A retry queues the task at a new time: the row reads whole and is leased.
        assert [lease.task.id for lease in again] == [odd_task]
        return
    # Still no object: set aside again, with the same reason and no attempt counted.
    assert again == []
    row = stored(store, odd_task)
    assert row["status"] == "failed" and row["attempt"] == 0
    assert [event for event, _ in row["events"]] == ["queued", "failed", "retried", "failed"]
