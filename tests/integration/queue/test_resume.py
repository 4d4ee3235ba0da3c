"""Resuming a task: a continuation joins its job; status and spend roll up across both."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.test_queue_cli import wk_as_admin
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


def _call(task: dict[str, object], tokens: int) -> dict[str, object]:
    return {
        "phase": "implementer",
        "task_id": task["id"],
        "job_id": task["job_id"],
        "round": 1,
        "model": "claude-sonnet-4-5",
        "provider": "anthropic",
        "input_tokens": tokens,
        "output_tokens": 100,
    }


def test_resume_by_task_rolls_status_and_spend_up_across_the_continuation(
    admin: Client, reporter: Client, clock: ManualClock
) -> None:
    job = admin.jobs.submit(
        "build", org="acme", fleet="cpu", payload={"argv": ["make"], "cwd": "/src"}
    )
    runner = reporter.runners.register("cpu", capacity=1, host="h", pid=7)
    [first] = reporter.runners.lease(runner["id"])
    with pytest.raises(ClientError) as early:
        admin.jobs.resume(first["id"])
    assert early.value.status == 409
    reporter.timeline.emit(_call(first, 10_000))
    clock.advance(5)
    reporter.runners.complete(first["id"], first["lease_token"])
    assert admin.jobs.get(job["id"])["status"] == "succeeded"

    continuation = admin.jobs.resume(first["id"])
    assert continuation["job_id"] == job["id"] and continuation["seq"] == 1
    assert (continuation["org"], continuation["fleet"]) == ("acme", "cpu")
    assert continuation["payload"] == {"argv": ["make"], "cwd": "/src"}
    assert continuation["status"] == "queued" and continuation["interrupted"] is False
    assert admin.jobs.get(job["id"])["status"] == "queued"

    [second] = reporter.runners.lease(runner["id"])
    assert second["id"] == continuation["id"]
    shown = admin.jobs.get(job["id"])
    assert shown["status"] == "running"
    assert [t["status"] for t in shown["tasks"]] == ["succeeded", "running"]
    reporter.timeline.emit(_call(second, 20_000))

    by_job = admin.timeline.spend("job", job_id=job["id"])
    assert by_job["totals"]["calls"] == 2
    [group] = by_job["groups"]
    assert group["key"] == job["id"] and group["calls"] == 2

    clock.advance(5)
    reporter.runners.fail(second["id"], second["lease_token"], "tests broke")
    assert admin.jobs.get(job["id"])["status"] == "failed"
    third = admin.jobs.resume(second["id"], {"argv": ["make", "test"]})
    assert third["seq"] == 2 and third["payload"] == {"argv": ["make", "test"]}


def test_resume_of_an_unknown_task_is_404(admin: Client) -> None:
    with pytest.raises(ClientError) as missing:
        admin.jobs.resume("t-0123456789ab")
    assert missing.value.status == 404


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_submit_resume_on_the_command_line(server: LiveServer, admin: Client) -> None:
    job = admin.jobs.submit("build", org="acme", fleet="gpu", argv=["echo", "hi"])
    task_id = job["tasks"][0]["id"]
    admin.jobs.cancel(job["id"])
    needs_id = wk_as_admin(server, "submit", "--resume")
    assert needs_id.returncode == 2 and "--task-id" in needs_id.stderr
    resumed = wk_as_admin(server, "submit", "--resume", "--task-id", task_id, "--json")
    assert resumed.returncode == 0, resumed.stderr
    shown = admin.jobs.get(job["id"])
    assert shown["status"] == "queued" and len(shown["tasks"]) == 2
    assert shown["tasks"][1]["payload"] == {"argv": ["echo", "hi"]}
