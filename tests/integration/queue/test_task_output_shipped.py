"""All of a queued task's output reaches the server while the task runs: a real runner
ships what the log gained, redacted and cut at line ends, under its lease; the API,
the CLI and the dashboard read it back, capped and saying so when cut."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.live_server import LiveServer
from tests.support.waiting import wait_for
from watchkeeper.client import Client
from watchkeeper.queue.output import OUTPUT_CAP_BYTES
from watchkeeper.store import Store

from ...support.web_login import log_in
from .. import queue_daemons as daemons
from ..queue_daemons import QUICK, queue_server, server_env

TIMEOUT_S = 60.0
SECRET = "s3cr3t-value-456"
# Early lines, a secret, then it waits for the test to open the gate, then late lines.
GATED = (
    "import os, sys, time\n"
    "for i in range(200):\n"
    "    print(f'early line {i:04d}', flush=True)\n"
    f"print('API_TOKEN={SECRET}', flush=True)\n"
    "while not os.path.exists(sys.argv[1]):\n"
    "    time.sleep(0.02)\n"
    "for i in range(3000):\n"
    "    print(f'late line {i:04d} ' + 'y' * 30)\n"
    "print('<script>alert(1)</script>')\n"
)


@pytest.fixture
def server(tmp_path: Path, store: Store) -> Iterator[LiveServer]:
    with queue_server(tmp_path, store) as live:
        yield live


@pytest.fixture
def runner(server: LiveServer, tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    daemon = daemons.start_runner(
        "ship",
        tmp_path / "runner",
        tmp_path / "runner.log",
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
        assert daemon.wait(timeout=TIMEOUT_S) == 0


def _all(server: LiveServer, task_id: str) -> dict[str, Any]:
    with server.client("viewer") as http:
        answer = http.get(f"/api/v1/tasks/{task_id}/output", params={"all": "true"})
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


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
        timeout=TIMEOUT_S,
        check=False,
    )


@contextmanager
def _web_login(server: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=TIMEOUT_S) as web:
        log_in(web, server.tokens["viewer"])
        yield web


@pytest.mark.usefixtures("runner")
def test_a_running_tasks_output_arrives_live_whole_in_order_and_redacted(
    server: LiveServer, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    with Client(server.url, server.tokens["admin"]) as client:
        job = client.jobs.submit(
            "gated", org="o", fleet="ship", argv=[sys.executable, "-c", GATED, str(gate)]
        )
        job_id = str(job["id"])
        task_id = str(job["tasks"][0]["id"])

        # While the task waits at its gate, its early lines are already on the server.
        def early() -> dict[str, Any] | None:
            body = _all(server, task_id)
            return body if body["output"] and "API_TOKEN=" in body["output"] else None

        running = wait_for(early, what="the early lines, shipped live", timeout=TIMEOUT_S)
        assert running["running"] is True
        assert running["complete"] is False
        assert "early line 0000\n" in running["output"]
        assert "late line" not in running["output"]
        assert SECRET not in running["output"]
        assert running["run_id"] and running["host"]
        # The tail is only sent when the task ends.
        with server.client("viewer") as http:
            assert http.get(f"/api/v1/tasks/{task_id}/output").json()["output"] is None

        follower = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "watchkeeper",
                "task",
                "output",
                task_id,
                "--all",
                "--follow",
                "--interval",
                "0.1",
            ],
            env={
                **os.environ,
                "WATCHKEEPER_URL": server.url,
                "WATCHKEEPER_TOKEN": server.tokens["viewer"],
            },
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        gate.touch()
        wait_for(
            lambda: client.jobs.get(job_id)["status"] == "succeeded",
            what="the task's end",
            timeout=TIMEOUT_S,
        )

    whole = _all(server, task_id)
    assert whole["running"] is False
    assert whole["complete"] is True
    assert whole["cut"] is False
    assert whole["note"] is None
    lines = whole["output"].splitlines()
    expected = (
        [f"early line {i:04d}" for i in range(200)]
        + ["API_TOKEN=[redacted]"]
        + [f"late line {i:04d} " + "y" * 30 for i in range(3000)]
        + ["<script>alert(1)</script>"]
    )
    assert lines == expected
    assert SECRET not in whole["output"]

    # The tail answer is as it was: the last 64 KiB, from a line's start.
    with server.client("viewer") as http:
        tail = http.get(f"/api/v1/tasks/{task_id}/output").json()
    assert tail["output"].endswith(f"late line 2999 {'y' * 30}\n<script>alert(1)</script>\n")
    assert "early line 0000" not in tail["output"]
    assert set(tail) == {"id", "output", "recorded_at"}

    shown = _cli(server, "task", "output", task_id, "--all")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines() == expected
    # Following from while it ran printed the same, and stopped when the run did.
    followed, complaints = follower.communicate(timeout=TIMEOUT_S)
    assert follower.returncode == 0, complaints
    assert followed.splitlines() == expected
    assert "cut" not in shown.stderr

    # The dashboard's job page shows the tail as text, and links to all of it.
    with _web_login(server) as web:
        html = web.get(f"/web/jobs/{job_id}").text
        shown_tail = re.search(
            rf'<pre [^>]*data-task-output="{task_id}"[^>]*>(.*?)</pre>', html, re.S
        )
        assert shown_tail is not None, html
        assert shown_tail.group(1).endswith(
            f"late line 2999 {'y' * 30}\n&lt;script&gt;alert(1)&lt;/script&gt;\n"
        )
        assert "early line 0000" not in shown_tail.group(1)  # the card shows the end only
        assert "<script>alert(1)" not in html
        assert f'href="/web/tasks/{task_id}/output"' in html
        full = web.get(f"/web/tasks/{task_id}/output")
        assert full.status_code == 200, full.text
        assert full.headers["content-type"].startswith("text/plain")
        assert full.text.splitlines() == expected


def _leased(server: LiveServer, fleet: str) -> tuple[Client, str, str, str]:
    """A runner registered through the API that holds the one task of ``fleet``."""
    admin = Client(server.url, server.tokens["admin"])
    job = admin.jobs.submit("by hand", org="o", fleet=fleet, argv=["true"])
    admin.close()
    reporter = Client(server.url, server.tokens["reporter"])
    runner_id = str(reporter.runners.register(fleet, capacity=1, host="h1", pid=1)["id"])
    (task,) = reporter.runners.lease(runner_id, 1)
    assert task["id"] == job["tasks"][0]["id"]
    return reporter, runner_id, str(task["id"]), str(task["lease_token"])


def _ship(
    server: LiveServer, task_id: str, token: str, offset: int, text: str, **more: Any
) -> httpx.Response:
    body = {"lease_token": token, "offset": offset, "end": offset + len(text.encode())}
    with server.client("reporter") as http:
        return http.post(
            f"/api/v1/tasks/{task_id}/output/chunks", json=body | {"output": text} | more
        )


def test_shipments_are_idempotent_refused_without_the_lease_and_start_afresh_on_a_new_run(
    server: LiveServer,
) -> None:
    reporter, runner_id, task_id, token = _leased(server, "by-hand")
    with closing(reporter):
        first = _ship(server, task_id, token, 0, "one\n", run_id="p-1", host="h1")
        assert first.status_code == 200, first.text
        assert first.json()["next_offset"] == 4
        # A retried shipment (its answer was lost) is kept once.
        again = _ship(server, task_id, token, 0, "one\n")
        assert again.status_code == 200, again.text
        assert again.json() == first.json() | {"kept": False}
        # A gap is refused without harm: the answer says where to start.
        ahead = _ship(server, task_id, token, 40, "later\n")
        assert ahead.json()["next_offset"] == 4 and ahead.json()["kept"] is False
        assert _ship(server, task_id, token, 4, "two\n").json()["next_offset"] == 8
        assert _all(server, task_id)["output"] == "one\ntwo\n"
        # A secret is redacted by the server too.
        _ship(server, task_id, token, 8, f"PASSWORD={SECRET}\n")
        assert _all(server, task_id)["output"] == "one\ntwo\nPASSWORD=[redacted]\n"

        # The runner leaves: its lease is taken back and its token writes nothing.
        reporter.runners.stop(runner_id)
        stale = _ship(server, task_id, token, 30, "stale\n")
        assert stale.status_code == 409, stale.text
        assert stale.json()["error"]["code"] == "lease_lost"
        kept = _all(server, task_id)
        assert kept["output"] == "one\ntwo\nPASSWORD=[redacted]\n"
        assert kept["running"] is False and kept["complete"] is False

        # A new run of the task starts its output afresh.
        second = str(reporter.runners.register("by-hand", capacity=1, host="h2", pid=2)["id"])
        (task,) = reporter.runners.lease(second, 1)
        assert task["id"] == task_id
        fresh = _ship(server, task_id, str(task["lease_token"]), 0, "rerun\n", run_id="p-2")
        assert fresh.status_code == 200, fresh.text
        body = _all(server, task_id)
        assert body["output"] == "rerun\n"
        assert body["running"] is True
        assert body["run_id"] == "p-2"
        # The old token still writes nothing, even at the new run's offset.
        assert _ship(server, task_id, token, 6, "stale\n").status_code == 409
        assert _all(server, task_id)["output"] == "rerun\n"


def test_output_over_the_cap_is_cut_and_says_where_the_whole_is(server: LiveServer) -> None:
    reporter, _runner_id, task_id, token = _leased(server, "loud")
    line = "z" * 99 + "\n"
    piece = line * 1500  # 150 kB a shipment
    offset = 0
    with closing(reporter):
        answer: dict[str, Any] = {}
        while offset <= OUTPUT_CAP_BYTES + len(piece):
            sent = _ship(server, task_id, token, offset, piece, run_id="p-9", host="h9")
            assert sent.status_code == 200, sent.text
            answer = sent.json()
            offset = answer["next_offset"]
        assert answer["cut"] is True
        last = _ship(server, task_id, token, offset, "the end\n", final=True)
        assert last.status_code == 200 and last.json()["cut"] is True

    body = _all(server, task_id)
    assert body["cut"] is True
    assert body["complete"] is True
    kept = body["output"]
    assert len(kept.encode()) <= OUTPUT_CAP_BYTES
    assert len(kept.encode()) > OUTPUT_CAP_BYTES - len(line)
    assert kept.endswith(line)  # cut at a line's end
    assert "the end" not in kept
    assert "p-9" in body["note"] and "h9" in body["note"]

    shown = _cli(server, "task", "output", task_id, "--all")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == kept
    assert "cut" in shown.stderr and "p-9" in shown.stderr


def test_all_of_the_output_of_an_unknown_task_is_not_found(server: LiveServer) -> None:
    with server.client("viewer") as http:
        answer = http.get("/api/v1/tasks/t-0123456789abcdef/output", params={"all": "true"})
    assert answer.status_code == 404
    assert "t-0123456789abcdef" in answer.text
    shown = _cli(server, "task", "output", "t-0123456789abcdef", "--all")
    assert shown.returncode != 0
    assert "Traceback" not in shown.stderr
    assert "t-0123456789abcdef" in shown.stderr
