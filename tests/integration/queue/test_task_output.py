"""A queued task's output reaches the server: a real runner process sends the redacted
tail of what the task printed when it ends, the API and the CLI read it back, and
the task's timeline shows when it started and how it ended."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.live_server import LiveServer
from tests.support.waiting import wait_for
from watchkeeper.client import Client
from watchkeeper.store import Store

from .. import queue_daemons as daemons
from ..queue_daemons import QUICK, queue_server, server_env

EVENT_TIMEOUT_S = 60.0
SECRET = "s3cr3t-value-123"
# Prints a line of work, a line holding a secret, and enough filler that only a tail fits.
CHATTY = (
    "import sys\n"
    "for i in range(3000):\n"
    "    print(f'filler line {i:05d} ' + 'x' * 40)\n"
    "print('compiling the widgets')\n"
    f"print('DB_PASSWORD={SECRET}')\n"
    "sys.exit(int(sys.argv[1]))\n"
)


@pytest.fixture
def server(tmp_path: Path, store: Store) -> Iterator[LiveServer]:
    with queue_server(tmp_path, store) as live:
        yield live


@pytest.fixture
def runner(server: LiveServer, tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    daemon = daemons.start_runner(
        "out",
        tmp_path / "runner",
        tmp_path / "runner.log",
        "--capacity",
        "2",
        *QUICK,
        "--grace",
        "2",
        env=server_env(server),
    )
    try:
        yield daemon
    finally:
        if daemon.poll() is None:
            daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=EVENT_TIMEOUT_S) == 0


def _finished_task(server: LiveServer, exit_code: int) -> str:
    with Client(server.url, server.tokens["admin"]) as client:
        job = client.jobs.submit(
            f"exits {exit_code}",
            org="o",
            fleet="out",
            argv=[sys.executable, "-c", CHATTY, str(exit_code)],
        )

        def ended() -> bool:
            return str(client.jobs.get(str(job["id"]))["status"]) in ("succeeded", "failed")

        wait_for(ended, timeout=EVENT_TIMEOUT_S)
        return str(client.jobs.get(str(job["id"]))["tasks"][0]["id"])


def _cli(server: LiveServer, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "watchkeeper", *args],
        env={
            **os.environ,
            "WATCHKEEPER_URL": server.url,
            "WATCHKEEPER_TOKEN": server.tokens["viewer"],
        },
        capture_output=True,
        text=True,
        timeout=EVENT_TIMEOUT_S,
        check=False,
    )


@pytest.mark.usefixtures("runner")
@pytest.mark.parametrize("exit_code", [0, 3])
def test_a_finished_tasks_output_is_read_redacted_through_the_api_and_the_cli(
    server: LiveServer, exit_code: int
) -> None:
    task_id = _finished_task(server, exit_code)

    with server.client("viewer") as http:
        answer = http.get(f"/api/v1/tasks/{task_id}/output")
    assert answer.status_code == 200, answer.text
    tail = answer.json()["output"]
    assert "compiling the widgets" in tail
    assert "DB_PASSWORD=[redacted]" in tail
    assert SECRET not in tail
    # Only the tail is kept, cut at a line's start.
    assert "filler line 00000" not in tail
    assert tail.startswith("filler line ")
    assert len(tail.encode()) <= 64 * 1024

    shown = _cli(server, "task", "output", task_id)
    assert shown.returncode == 0, shown.stderr
    assert "compiling the widgets" in shown.stdout
    assert "DB_PASSWORD=[redacted]" in shown.stdout
    assert SECRET not in shown.stdout

    # The output goes with its task.
    with Client(server.url, server.tokens["admin"]) as client:
        client.jobs.delete(str(client.jobs.task(task_id)["job_id"]))
    with server.client("viewer") as http:
        assert http.get(f"/api/v1/tasks/{task_id}/output").status_code == 404


@pytest.mark.usefixtures("runner")
def test_a_tasks_timeline_shows_its_start_and_its_end_with_the_exit_code(
    server: LiveServer,
) -> None:
    task_id = _finished_task(server, 3)
    with Client(server.url, server.tokens["viewer"]) as client:

        def phases() -> list[dict[str, object]]:
            return [
                event
                for event in client.timeline.events(task_id=task_id)
                if event["phase"] in ("task_start", "task_end")
            ]

        wait_for(lambda: len(phases()) == 2, timeout=EVENT_TIMEOUT_S)
        start, end = phases()
    assert start["phase"] == "task_start"
    assert end["phase"] == "task_end"
    assert end["outcome"] == "failed"
    assert "exit code 3" in str(end["detail"])


def test_output_sent_without_a_live_lease_is_refused(server: LiveServer) -> None:
    with Client(server.url, server.tokens["admin"]) as client:
        job = client.jobs.submit("never leased", org="o", fleet="nobody", argv=["true"])
    task_id = str(job["tasks"][0]["id"])
    with server.client("reporter") as http:
        sent = http.post(
            f"/api/v1/tasks/{task_id}/output", json={"lease_token": "not-it", "output": "hello"}
        )
        assert sent.status_code == 409, sent.text
        assert sent.json()["error"]["code"] == "lease_lost"
    with server.client("viewer") as http:
        answer = http.get(f"/api/v1/tasks/{task_id}/output")
    assert answer.status_code == 200
    assert answer.json()["output"] is None


def test_the_output_of_a_task_that_does_not_exist_is_not_found(server: LiveServer) -> None:
    with server.client("viewer") as http:
        answer = http.get("/api/v1/tasks/t-0123456789abcdef/output")
    assert answer.status_code == 404
    shown = _cli(server, "task", "output", "t-0123456789abcdef")
    assert shown.returncode != 0
    assert "Traceback" not in shown.stderr
    assert "t-0123456789abcdef" in shown.stderr
