"""A real runner daemon against a real server: a task runs in a scrubbed environment with a
token of its own, which may report only about that task and is refused once the task ends."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import patient_http
from tests.support.live_server import LiveServer
from tests.support.waiting import wait_for
from watchkeeper.client import Client
from watchkeeper.queue.task_env import ALLOWED, TASK_VARS
from watchkeeper.redact import MASK
from watchkeeper.store import Store

from .. import queue_daemons as daemons
from ..queue_daemons import QUICK, queue_server, server_env

EVENT_TIMEOUT_S = 60.0
# Dumps its environment, then tries its token on what a task may and may not do.
PROBE = """
import json, os, sys, urllib.error, urllib.request
out, other_runner, other_task = sys.argv[1:4]
url, token = os.environ.get("WATCHKEEPER_URL", ""), os.environ.get("WATCHKEEPER_TOKEN", "")
me = os.environ.get("WATCHKEEPER_TASK_ID")

def call(method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    headers = {"Authorization": "Bearer " + token, "Content-Type": "application/json"}
    request = urllib.request.Request(url + path, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return [answer.status, ""]
    except urllib.error.HTTPError as exc:
        return [exc.code, exc.read().decode()]

said = {
    "register": call("POST", "/api/v1/runners", {"fleet": "other", "host": "h", "pid": 1}),
    "lease_other": call("POST", "/api/v1/runners/" + other_runner + "/lease", {"max": 1}),
    "read_jobs": call("GET", "/api/v1/jobs"),
    "own_event": call("POST", "/api/v1/events/batch",
                      {"events": [{"phase": "tool", "task_id": me, "outcome": "ok"}]}),
    "own_event_unnamed": call("POST", "/api/v1/events/batch", {"events": [{"phase": "verify"}]}),
    "other_event": call("POST", "/api/v1/events/batch",
                        {"events": [{"phase": "tool", "task_id": other_task}]}),
}
with open(out + ".tmp", "w") as file:
    json.dump({"env": dict(os.environ), "said": said}, file)
os.replace(out + ".tmp", out)
"""


@pytest.fixture
def server(tmp_path: Path, store: Store) -> Iterator[LiveServer]:
    with queue_server(tmp_path, store) as live:
        yield live


def start_runner(server: LiveServer, tmp_path: Path, *more: str) -> subprocess.Popen[bytes]:
    env = {
        **server_env(server),
        "RUNNER_SECRET": "not-for-tasks",
        "KEPT_FOR_TASKS": "yes",
        "LC_TIME": "C",
    }
    return daemons.start_runner(
        "e2e", tmp_path / "runner", tmp_path / "runner.log", *QUICK, "--grace", "2", *more, env=env
    )


def stop(daemon: subprocess.Popen[bytes]) -> None:
    if daemon.poll() is None:
        daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=EVENT_TIMEOUT_S) == 0


def run_probe(server: LiveServer, tmp_path: Path, *runner_args: str) -> dict[str, Any]:
    """Run the probe as a task of fleet ``e2e``; returns what it saw, and the ids involved."""
    out = tmp_path / "probe.json"
    with Client(server.url, server.tokens["admin"]) as admin:
        elsewhere = admin.jobs.submit("elsewhere", org="p", fleet="other", argv=["true"])
        with Client(server.url, server.tokens["reporter"]) as reporter:
            other_runner = reporter.runners.register("other", capacity=1, host="h", pid=1)
        daemon = start_runner(server, tmp_path, *runner_args)
        try:
            job = admin.jobs.submit(
                "probe",
                org="o",
                fleet="e2e",
                argv=[
                    sys.executable,
                    "-c",
                    PROBE,
                    str(out),
                    other_runner["id"],
                    elsewhere["tasks"][0]["id"],
                ],
            )
            wait_for(
                lambda: admin.jobs.get(job["id"])["status"] == "succeeded", timeout=EVENT_TIMEOUT_S
            )
        finally:
            stop(daemon)
        seen: dict[str, Any] = json.loads(out.read_text())
        seen["job"] = admin.jobs.get(job["id"])
        seen["elsewhere"] = admin.jobs.get(elsewhere["id"])
    return seen


def test_a_task_gets_a_scrubbed_environment_and_a_token_only_for_itself(
    server: LiveServer, tmp_path: Path
) -> None:
    seen = run_probe(server, tmp_path, "--pass-env", "KEPT_FOR_TASKS")
    env, said, job = seen["env"], seen["said"], seen["job"]
    [task] = job["tasks"]

    # The runner's token, and anything not allowed or passed, never reaches the task.
    assert server.tokens["reporter"] not in env.values()
    assert "RUNNER_SECRET" not in env
    allowed = set(ALLOWED) | set(TASK_VARS) | {"WATCHKEEPER_RUN_ID", "KEPT_FOR_TASKS", "LC_TIME"}
    assert set(env) <= allowed, set(env) - allowed
    assert env["KEPT_FOR_TASKS"] == "yes" and env["LC_TIME"] == "C"
    assert env["PATH"] == os.environ["PATH"]
    assert env["WATCHKEEPER_TASK_ID"] == task["id"]
    assert env["WATCHKEEPER_JOB_ID"] == job["id"]
    assert (env["WATCHKEEPER_ORG"], env["WATCHKEEPER_FLEET"]) == ("o", "e2e")
    assert env["WATCHKEEPER_URL"] == server.url
    assert env["WATCHKEEPER_TOKEN"].startswith("wk_")

    # (a) it cannot act as a runner or read: 403, saying why.
    for name in ("register", "lease_other", "read_jobs"):
        status, body = said[name]
        assert status == 403, (name, status, body)
        assert f"the token of task {task['id']} may only send timeline events" in body
    assert seen["elsewhere"]["tasks"][0]["status"] == "queued"  # nothing was leased
    # (b) it reports about itself: task, job and org filled in when left out.
    assert said["own_event"][0] == 201 and said["own_event_unnamed"][0] == 201
    # (c) about another task: refused.
    status, body = said["other_event"]
    assert status == 403 and "may only report about that task" in body
    with Client(server.url, server.tokens["viewer"]) as viewer:
        events = viewer.timeline.events(task_id=task["id"])
        # The task's own events, between the start and end its runner records.
        assert [e["phase"] for e in events] == ["task_start", "tool", "verify", "task_end"]
        assert {(e["job_id"], e["org"]) for e in events} == {(job["id"], "o")}
        assert viewer.timeline.events(task_id=seen["elsewhere"]["tasks"][0]["id"]) == []

    # The task has ended: its token is refused.
    own = {"events": [{"phase": "tool", "task_id": task["id"]}]}
    headers = {"Authorization": f"Bearer {env['WATCHKEEPER_TOKEN']}"}
    answer = patient_http.post(f"{server.url}/api/v1/events/batch", json=own, headers=headers)
    assert answer.status_code == 401, answer.text


def test_the_runner_refuses_to_pass_its_own_token(server: LiveServer, tmp_path: Path) -> None:
    daemon = start_runner(server, tmp_path, "--pass-env", "WATCHKEEPER_TOKEN")
    assert daemon.wait(timeout=EVENT_TIMEOUT_S) != 0
    said = " ".join((tmp_path / "runner.log").read_text().split())
    assert "the runner sets WATCHKEEPER_TOKEN for each task itself" in said
    assert MASK not in said  # the message reads whole: nothing in it looks like a secret
    assert "Traceback" not in said
