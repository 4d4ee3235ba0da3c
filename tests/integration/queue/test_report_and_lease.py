"""A runner's outcomes and its next lease in one transaction (one commit, one request).

The outcomes are recorded first, each under its own lease (a lost lease is
refused alone), then the lease rules pick the next tasks with the slots those
outcomes freed. Either both commit or neither: a call that fails records no
outcome, so the runner may send them again.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.queue.conftest import runner, submit
from tests.support.live_server import LiveServer, live_server
from watchkeeper.client import Client
from watchkeeper.clock import ManualClock
from watchkeeper.errors import ClientError, NotFound
from watchkeeper.queue.errors import LeaseLost
from watchkeeper.queue.service import QueueService
from watchkeeper.records.queue import TaskStatus
from watchkeeper.runtime import Runtime
from watchkeeper.store.queue import End


def test_outcomes_free_the_slots_the_next_lease_fills_in_the_same_call(
    queue: QueueService, clock: ManualClock
) -> None:
    held = runner(queue, capacity=2)
    for index in range(4):
        submit(queue, title=f"job {index}")
        clock.advance(1)
    first, second = queue.lease(held.id, limit=2)
    clock.advance(5)

    ends = [
        End(first.task.id, first.token, TaskStatus.SUCCEEDED, 0),
        End(second.task.id, "not-the-token", TaskStatus.SUCCEEDED, 0),
    ]
    outcomes, leases = queue.report_and_lease(held.id, ends, limit=2)

    assert not isinstance(outcomes[0], LeaseLost) and outcomes[0].status is TaskStatus.SUCCEEDED
    assert isinstance(outcomes[1], LeaseLost)
    # One slot freed (the lost outcome's task still runs): one new task, never an ended one.
    assert len(leases) == 1
    assert leases[0].task.id not in {first.task.id, second.task.id}
    assert queue.task(first.task.id).status is TaskStatus.SUCCEEDED
    assert queue.task(second.task.id).status is TaskStatus.RUNNING
    assert queue.task(leases[0].task.id).status is TaskStatus.RUNNING


def test_no_outcomes_is_a_plain_lease_and_no_lease_asked_is_a_plain_report(
    queue: QueueService, clock: ManualClock
) -> None:
    held = runner(queue, capacity=1)
    submit(queue)
    outcomes, leases = queue.report_and_lease(held.id, [], limit=1)
    assert outcomes == [] and len(leases) == 1
    [lease] = leases
    outcomes, leases = queue.report_and_lease(
        held.id, [End(lease.task.id, lease.token, TaskStatus.FAILED, 2, "boom")], limit=0
    )
    assert leases == []
    assert not isinstance(outcomes[0], LeaseLost) and outcomes[0].status is TaskStatus.FAILED
    assert outcomes[0].failure_fingerprint  # made from the reason, as end_many does


def test_a_call_that_fails_records_no_outcome(queue: QueueService, clock: ManualClock) -> None:
    held = runner(queue, capacity=1)
    submit(queue)
    [lease] = queue.lease(held.id)
    end = End(lease.task.id, lease.token, TaskStatus.SUCCEEDED, 0)
    with pytest.raises(NotFound):
        queue.report_and_lease("no-such-runner", [end], limit=1)
    assert queue.task(lease.task.id).status is TaskStatus.RUNNING
    [done], _ = queue.report_and_lease(held.id, [end], limit=1)
    assert not isinstance(done, LeaseLost) and done.status is TaskStatus.SUCCEEDED


@pytest.fixture
def server(runtime: Runtime) -> Iterator[LiveServer]:
    with live_server(runtime) as live:
        yield live


def test_the_lease_route_records_outcomes_sent_with_it_first(server: LiveServer) -> None:
    with (
        Client(server.url, server.tokens["admin"]) as admin,
        Client(server.url, server.tokens["reporter"]) as reporter,
    ):
        jobs = [
            admin.jobs.submit(f"job {n}", org="free", fleet="cpu", argv=["true"]) for n in range(3)
        ]
        held = reporter.runners.register("cpu", capacity=2, host="h", pid=7)
        first, second = reporter.runners.lease(held["id"], max=2)
        outcomes = [
            {"task_id": first["id"], "lease_token": first["lease_token"], "exit_code": 0},
            {"task_id": second["id"], "lease_token": "forged", "exit_code": 0},
        ]

        answer = reporter.runners.report_and_lease(held["id"], outcomes, max=2)

        assert answer["outcomes"][0]["status"] == "succeeded"
        assert answer["outcomes"][1]["code"] == "lease_lost"
        [third] = answer["tasks"]
        assert third["lease_token"] and third["task_token"]
        assert {first["job_id"], second["job_id"], third["job_id"]} == {j["id"] for j in jobs}

        with pytest.raises(ClientError) as unknown:
            reporter.runners.report_and_lease("r-00000000", outcomes[1:], max=1)
        assert unknown.value.status == 404
        # A plain lease still answers only its tasks.
        assert reporter.runners.lease(held["id"], max=1) == []
