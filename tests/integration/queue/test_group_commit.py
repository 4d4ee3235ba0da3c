"""Outcomes sent at once by many runners are committed together, each answered after it.

The test holds the server's group open until every request has joined (a long
window, ``most`` = the number of requests), so all of them are recorded by
one transaction: every live outcome is stored exactly once, a completion
under a stale lease is refused alone, and each answer comes only once its
outcome is in the database.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from sqlalchemy import func, select

from tests.support.live_server import LiveServer, live_server
from watchkeeper.client import Client
from watchkeeper.errors import ClientError
from watchkeeper.runtime import Runtime
from watchkeeper.store.group_commit import GroupCommit
from watchkeeper.store.schema.queue import queue_events, queue_tasks

RUNNERS = 6


@pytest.fixture
def server(runtime: Runtime) -> Iterator[LiveServer]:
    with live_server(runtime) as live:
        yield live


def _succeeded_events(runtime: Runtime, task_id: str) -> int:
    statement = select(func.count()).where(
        queue_events.c.task_id == task_id, queue_events.c.type == "succeeded"
    )
    with runtime.store.engine.connect() as conn:
        return int(conn.execute(statement).scalar_one())


def _status(runtime: Runtime, task_id: str) -> str:
    statement = select(queue_tasks.c.status).where(queue_tasks.c.id == task_id)
    with runtime.store.engine.connect() as conn:
        return str(conn.execute(statement).scalar_one())


def _leased(server: LiveServer, count: int) -> list[dict[str, Any]]:
    with Client(server.url, server.tokens["admin"]) as admin:
        for index in range(count):
            admin.jobs.submit(f"job {index}", org="free", fleet="cpu", argv=["true"])
    with Client(server.url, server.tokens["reporter"]) as reporter:
        runner = reporter.runners.register("cpu", capacity=count, host="h", pid=7)
        tasks = reporter.runners.lease(runner["id"], max=count)
    assert len(tasks) == count
    return tasks


def _hold_the_group_for(runtime: Runtime, requests: int) -> None:
    group = runtime.queue.group
    group.window_s, group.most, group.company = 60.0, requests, True


def test_completions_from_many_runners_commit_together_and_a_stale_lease_is_refused_alone(
    server: LiveServer, runtime: Runtime
) -> None:
    tasks = _leased(server, RUNNERS)
    stale = tasks[0]
    _hold_the_group_for(runtime, RUNNERS)

    def complete(task: dict[str, Any]) -> str:
        token = "stale-token" if task is stale else str(task["lease_token"])
        with Client(server.url, server.tokens["reporter"]) as reporter:
            try:
                reporter.runners.complete(str(task["id"]), token)
            except ClientError as exc:
                return str(exc.code)
        # Answered only after the commit: the outcome is already in the database.
        return _status(runtime, str(task["id"]))

    with ThreadPoolExecutor(RUNNERS) as pool:
        answers = list(pool.map(complete, tasks))

    assert answers == ["lease_lost"] + ["succeeded"] * (RUNNERS - 1)
    assert runtime.queue.group.recent[-1] == (RUNNERS, RUNNERS)
    assert _status(runtime, str(stale["id"])) == "running"
    assert [_succeeded_events(runtime, str(t["id"])) for t in tasks] == [0] + [1] * (RUNNERS - 1)


def test_a_batch_of_outcomes_in_one_request_is_recorded_each_under_its_lease(
    server: LiveServer, runtime: Runtime
) -> None:
    tasks = _leased(server, 3)
    done, failed, stale = tasks
    outcomes = [
        {"task_id": done["id"], "lease_token": done["lease_token"], "exit_code": 0},
        {
            "task_id": failed["id"],
            "lease_token": failed["lease_token"],
            "exit_code": 2,
            "reason": "exit 2",
        },
        {"task_id": stale["id"], "lease_token": "stale-token", "exit_code": 0},
    ]
    with Client(server.url, server.tokens["reporter"]) as reporter:
        answer = reporter.runners.report(outcomes)
        again = reporter.runners.report(outcomes[:1])

    assert [entry.get("status", entry.get("code")) for entry in answer] == [
        "succeeded",
        "failed",
        "lease_lost",
    ]
    assert answer[1]["failure"]["reason"] == "exit 2" and answer[1]["exit_code"] == 2
    assert again[0]["code"] == "lease_lost"
    assert _status(runtime, str(stale["id"])) == "running"
    assert _succeeded_events(runtime, str(done["id"])) == 1


def test_a_group_that_fails_as_a_whole_is_tried_again_request_by_request() -> None:
    recorded: list[str] = []

    def record(items: list[str]) -> list[str]:
        if "poison" in items:
            raise ValueError("the database refused a value")  # nothing of the group is kept
        recorded.extend(items)
        return [f"ok {item}" for item in items]

    group: GroupCommit[str, str] = GroupCommit(record, window_s=60.0, most=4, company=True)

    def send(items: list[str]) -> list[str] | str:
        try:
            return group.run(items)
        except ValueError as exc:
            return str(exc)

    requests = [["a"], ["b", "c"], ["poison"]]
    with ThreadPoolExecutor(len(requests)) as pool:
        answers = list(pool.map(send, requests))

    assert answers == [["ok a"], ["ok b", "ok c"], "the database refused a value"]
    assert sorted(recorded) == ["a", "b", "c"]
    assert group.recent[-1] == (3, 4)
