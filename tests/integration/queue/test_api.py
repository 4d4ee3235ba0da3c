"""The queue over HTTP and the SDK: roles, blocked reasons, leases, control and topology."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.live_server import LiveServer, live_server
from watchkeeper.client import Client
from watchkeeper.clock import ManualClock
from watchkeeper.errors import ClientError
from watchkeeper.runtime import Runtime


@pytest.fixture
def server(runtime: Runtime) -> Iterator[LiveServer]:
    with live_server(runtime) as live:
        yield live


@pytest.fixture
def admin(server: LiveServer) -> Iterator[Client]:
    with Client(server.url, server.tokens["admin"]) as client:
        yield client


@pytest.fixture
def reporter(server: LiveServer) -> Iterator[Client]:
    with Client(server.url, server.tokens["reporter"]) as client:
        yield client


def test_submitting_needs_an_admin_and_a_command(
    server: LiveServer, admin: Client, reporter: Client
) -> None:
    with pytest.raises(ClientError) as refused:
        reporter.jobs.submit("x", org="acme", fleet="cpu", argv=["true"])
    assert refused.value.status == 403
    with pytest.raises(ClientError) as invalid:
        admin.jobs.submit("x", org="acme", fleet="cpu", payload={"cmd": "true"})
    assert invalid.value.status == 422 and "argv" in invalid.value.message
    job = admin.jobs.submit("build", org="acme", fleet="cpu", argv=["make"])
    assert job["status"] == "queued" and job["submitted_by"] == "test admin"
    assert job["tasks"][0]["blocked"]["code"] == "no_runner"


def test_a_runner_leases_renews_and_completes_over_http(
    admin: Client, reporter: Client, clock: ManualClock
) -> None:
    job = admin.jobs.submit("build", org="acme", fleet="cpu", argv=["make"], lease_s=60)
    runner = reporter.runners.register("cpu", capacity=2, host="h", pid=7)
    assert admin.jobs.get(job["id"])["tasks"][0]["blocked"]["code"] == "awaiting_runner"
    [task] = reporter.runners.lease(runner["id"], max=2)
    assert task["job_id"] == job["id"] and task["lease_token"]
    with pytest.raises(ClientError) as lost:
        reporter.runners.renew(task["id"], "forged")
    assert (lost.value.status, lost.value.code) == (409, "lease_lost")
    clock.advance(10)
    reporter.runners.renew(task["id"], task["lease_token"], progressed=True, step="compiling")
    shown = admin.jobs.task(task["id"])
    assert shown["status"] == "running" and shown["step"] == "compiling"
    assert "lease_token" not in shown
    topology = admin.runners.topology()
    assert topology["fleets"] == [
        {"fleet": "cpu", "runners": 1, "alive": 1, "capacity": 2, "running": 1, "queued": 0}
    ]
    [shown_runner] = topology["runners"]
    assert shown_runner["host"] == "h" and shown_runner["tasks"][0]["id"] == task["id"]
    done = reporter.runners.complete(task["id"], task["lease_token"])
    assert done["status"] == "succeeded"
    body = admin.jobs.get(job["id"])
    assert body["status"] == "succeeded"
    assert [e["type"] for e in body["timeline"]] == ["queued", "leased", "succeeded"]
    assert admin.jobs.cancel(job["id"])["affected"] == 0
    assert admin.jobs.retry(job["id"])["affected"] == 0
    continuation = admin.jobs.resume(job["id"])
    assert continuation["seq"] == 1 and continuation["blocked"]["code"] == "awaiting_runner"
    assert admin.jobs.delete(job["id"])["affected"] == 2
    with pytest.raises(ClientError) as gone:
        admin.jobs.get(job["id"])
    assert gone.value.status == 404


def test_cancel_revokes_a_running_lease_and_control_says_how_many(
    admin: Client, reporter: Client
) -> None:
    job = admin.jobs.submit("long", org="acme", fleet="cpu", argv=["sleep", "600"])
    runner = reporter.runners.register("cpu", capacity=1, host="h", pid=7)
    [task] = reporter.runners.lease(runner["id"])
    with pytest.raises(ClientError) as running:
        admin.jobs.delete(job["id"])
    assert running.value.status == 409 and "cancel it first" in running.value.message
    assert admin.jobs.cancel(job["id"])["affected"] == 1
    with pytest.raises(ClientError) as lost:
        reporter.runners.renew(task["id"], task["lease_token"])
    assert lost.value.code == "lease_lost"
    assert admin.jobs.list(status="cancelled")[0]["id"] == job["id"]
    assert admin.jobs.list(status="running") == []
    assert admin.jobs.retry(job["id"])["affected"] == 1
    assert admin.jobs.list(status="queued", fleet="cpu")[0]["id"] == job["id"]
    assert reporter.runners.stop(runner["id"])["requeued"] == []
    assert admin.jobs.get(job["id"])["tasks"][0]["blocked"]["code"] == "no_runner"
