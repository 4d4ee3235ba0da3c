"""A lease is a runner's proof of life, and an empty lease says why it is empty.

A runner that took longer than ``runner_offline_after_s`` from registering to its
first lease (a slow start: a big image, a cold cache) was refused every task, with
an empty answer that said nothing, while thousands waited. Now the lease counts as
a heartbeat, and the answer's ``reason`` says why no task came.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tests.integration.queue.conftest import make_service, runner, submit
from tests.support.live_server import live_server
from watchkeeper.client import Client
from watchkeeper.clock import ManualClock
from watchkeeper.queue import lease_notes
from watchkeeper.queue.runner import RunnerDaemon, RunnerOptions
from watchkeeper.queue.service import QueueService
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store

OFFLINE_AFTER_S = 30  # the queue fixtures' runner_offline_after_s


@pytest.fixture(params=["capped orgs", "no capped org"])
def queue(
    request: pytest.FixtureRequest, tmp_path: Path, store: Store, clock: ManualClock
) -> QueueService:
    """The queue with a capped org (every lease judged task by task) and without one (on
    PostgreSQL, a runner's pass in one statement)."""
    if request.param == "capped orgs":
        return make_service(tmp_path, store, clock)
    return make_service(tmp_path, store, clock, orgs={})


def test_a_runner_slow_to_its_first_lease_gets_work_and_is_alive_again(
    queue: QueueService, clock: ManualClock
) -> None:
    slow = runner(queue, capacity=1)
    job = submit(queue)
    clock.advance(OFFLINE_AFTER_S + 5)
    assert not queue.alive(queue.store.runner(slow.id))
    leases = queue.lease(slow.id)
    assert [lease.task.job_id for lease in leases] == [job.id]
    beaten = queue.store.runner(slow.id)
    assert beaten.heartbeat_at == clock() and queue.alive(beaten)


def test_a_lease_to_a_runner_counted_offline_says_it_is_back(
    queue: QueueService, clock: ManualClock
) -> None:
    slow = runner(queue, capacity=2)
    submit(queue)
    clock.advance(OFFLINE_AFTER_S + 5)
    first = queue.lease_pass(slow.id, [], 2)
    assert len(first.leases) == 1
    assert first.reason is not None and first.reason.code == "back_online"
    assert first.reason.message.endswith("it is back now")
    clock.advance(1)
    again = queue.lease_pass(slow.id, [], 1)
    assert again.leases == [] and again.reason is not None
    assert again.reason.code == "queue_empty"
    assert again.reason.message == "the queue is empty"
    clock.advance(OFFLINE_AFTER_S + 5)
    quiet = queue.lease_pass(slow.id, [], 1)
    assert quiet.reason is not None and quiet.reason.code == "queue_empty"
    assert quiet.reason.message.startswith("this runner was marked offline")
    assert quiet.reason.message.endswith("the queue is empty")


def test_an_empty_lease_says_why(queue: QueueService, clock: ManualClock) -> None:
    cpu = runner(queue, capacity=1)
    empty = queue.lease_pass(cpu.id, [], 1).reason
    assert empty is not None and empty.as_dict() == {
        "code": "queue_empty",
        "message": "the queue is empty",
    }
    submit(queue, fleet="gpu")
    other = queue.lease_pass(cpu.id, [], 1).reason
    assert other is not None and other.code == "no_match" and "gpu" in other.message
    submit(queue)
    assert len(queue.lease(cpu.id)) == 1
    submit(queue)
    full = queue.lease_pass(cpu.id, [], 1).reason
    assert full is not None and full.code == "runner_full"


def test_an_empty_lease_names_the_org_cap_that_holds_tasks_back(
    tmp_path: Path, store: Store, clock: ManualClock
) -> None:
    capped = make_service(tmp_path, store, clock)  # org acme runs at most 2 jobs at once
    big = runner(capped, capacity=5)
    for _ in range(3):
        submit(capped, org="acme")
    assert len(capped.lease(big.id, 5)) == 2
    held = capped.lease_pass(big.id, [], 3).reason
    assert held is not None and held.code == "concurrency_cap"
    assert "org acme runs 2/2 jobs" in held.message


def test_over_http_a_slow_runner_gets_work_and_every_empty_answer_says_why(
    runtime: Runtime, clock: ManualClock
) -> None:
    offline_after = runtime.settings.queue.runner_offline_after_s
    with (
        live_server(runtime) as server,
        server.client("reporter") as http,
        server.client("admin") as admin,
    ):
        made = http.post(
            "/api/v1/runners", json={"fleet": "cpu", "capacity": 2, "host": "h", "pid": 7}
        )
        assert made.status_code == 201, made.text
        path = f"/api/v1/runners/{made.json()['id']}/lease"
        job = admin.post(
            "/api/v1/jobs",
            json={"title": "t", "org": "o", "fleet": "cpu", "payload": {"argv": ["true"]}},
        )
        assert job.status_code == 201, job.text
        clock.advance(offline_after + 5)
        leased = http.post(path, json={"max": 2})
        assert leased.status_code == 200, leased.text
        assert [task["job_id"] for task in leased.json()["tasks"]] == [job.json()["id"]]
        assert leased.json()["reason"]["code"] == "back_online"
        [listed] = http.get("/api/v1/runners").json()["runners"]
        assert listed["alive"]
        empty = http.post(path, json={"max": 1})
        assert empty.status_code == 200, empty.text
        assert empty.json() == {
            "tasks": [],
            "reason": {"code": "queue_empty", "message": "the queue is empty"},
        }
        # The documented route (outcomes with the lease) answers the same way.
        done = leased.json()["tasks"][0]
        outcome = {"task_id": done["id"], "lease_token": done["lease_token"], "exit_code": 0}
        ended = http.post(path, json={"max": 1, "outcomes": [outcome]})
        assert ended.status_code == 200, ended.text
        assert ended.json()["outcomes"][0]["status"] == "succeeded"
        assert ended.json()["reason"]["code"] == "queue_empty"


def test_the_runner_daemon_logs_the_reason_once_each_time_it_changes(
    runtime: Runtime, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ticks = ManualClock()
    options = RunnerOptions("cpu", capacity=1, data_dir=tmp_path / "runner", poll_s=1.0)
    with (
        caplog.at_level(logging.INFO, logger=lease_notes.__name__),
        live_server(runtime) as server,
        Client(server.url, server.tokens["reporter"]) as client,
        Client(server.url, server.tokens["admin"]) as admin,
    ):
        daemon = RunnerDaemon.open(client, options, ticks)
        try:
            daemon.register()
            for _ in range(3):
                daemon.step()
                ticks.advance(1.0)
            admin.jobs.submit("elsewhere", org="o", fleet="gpu", argv=["true"])
            for _ in range(3):
                daemon.step()
                ticks.advance(1.0)
        finally:
            daemon.close()
    said = [r.getMessage() for r in caplog.records if r.name == lease_notes.__name__]
    assert len(said) == 2, said
    assert said[0] == "Lease answer: the queue is empty (queue_empty)"
    assert "no queued task matches this runner (fleet cpu)" in said[1] and "gpu" in said[1]
