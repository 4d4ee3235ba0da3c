"""A runner given two replicas keeps its leases when the one it talks to dies.

Two real ``watchkeeper serve`` processes share one PostgreSQL schema; a real
runner knows both URLs. The replica it talks to is SIGKILLed while a task
runs under a short lease: the runner must carry on with the other one, so
the lease is neither lapsed nor re-leased, and the outcome still lands.
"""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from watchkeeper.client import Client
from watchkeeper.client.failover import ROUNDS, FailoverClient, split_urls
from watchkeeper.errors import ClientError

from ...support.cli import WK, cli_env
from ...support.live_server import free_port
from ...support.waiting import wait_for
from ..test_replicas_first_admin import Replica, fresh_pg  # noqa: F401  (fixture)

EVENT_TIMEOUT_S = 60.0
#: Short, so a lease the runner failed to renew would lapse well within the test.
LEASE_S = 4
# Says it started, then runs until a file appears.
WAITER = (
    "import os, sys, time\n"
    "open(sys.argv[1], 'w').close()\n"
    "while not os.path.exists(sys.argv[2]):\n"
    "    time.sleep(0.05)\n"
)


@pytest.fixture
def replicas(fresh_pg: tuple[str, str], tmp_path: Path) -> Iterator[tuple[Replica, Replica, str]]:  # noqa: F811
    """Two replicas on one schema, the first started first; and the admin token it printed."""
    url, _schema = fresh_pg
    first = Replica(tmp_path / "first", url)
    started = [first]
    try:
        wait_for(first.healthy, what="the first replica answering /healthz", timeout=120)
        [token] = first.printed_tokens()
        second = Replica(tmp_path / "second", url)
        started.append(second)
        wait_for(second.healthy, what="the second replica answering /healthz", timeout=120)
        yield first, second, token
    finally:
        for replica in started:
            replica.stop()


def _start_runner(urls: list[str], token: str, tmp_path: Path) -> subprocess.Popen[bytes]:
    with (tmp_path / "runner.log").open("wb") as log:
        return subprocess.Popen(
            [
                *WK,
                "runner",
                "--fleet",
                "e2e",
                "--data-dir",
                str(tmp_path / "runner"),
                "--poll-interval",
                "0.1",
                "--heartbeat-interval",
                "0.5",
                "--grace",
                "2",
            ],
            env=cli_env({"WATCHKEEPER_URL": ",".join(urls), "WATCHKEEPER_TOKEN": token}),
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def _when(stamp: Any) -> datetime:
    return datetime.fromisoformat(str(stamp))


def _renewed_after(task: dict[str, Any], moment: datetime) -> dict[str, Any] | None:
    renewed = task["last_renewed_at"]
    return task if renewed is not None and _when(renewed) > moment else None


@pytest.mark.slow  # two servers start on a real PostgreSQL
def test_the_runner_fails_over_to_a_live_replica_without_losing_its_lease(
    replicas: tuple[Replica, Replica, str], tmp_path: Path
) -> None:
    first, second, token = replicas
    started, done = tmp_path / "started", tmp_path / "done"
    runner = _start_runner([first.url, second.url], token, tmp_path)
    try:
        with Client(first.url, token) as client:
            job = client.jobs.submit(
                "long",
                org="o",
                fleet="e2e",
                argv=[sys.executable, "-c", WAITER, str(started), str(done)],
                lease_s=LEASE_S,
            )
            wait_for(started.exists, what="the task's command starting", timeout=EVENT_TIMEOUT_S)
            task_id = str(job["tasks"][0]["id"])
            before = client.jobs.task(task_id)
        assert before["status"] == "running"

        first.process.send_signal(signal.SIGKILL)
        first.process.wait(timeout=EVENT_TIMEOUT_S)

        with Client(second.url, token) as client:
            # Renewals keep arriving through the survivor: one was made after the
            # moment the lease would have lapsed had they stopped at the kill.
            lapse = _when(before["lease_expires_at"])
            task = wait_for(
                lambda: _renewed_after(client.jobs.task(task_id), lapse),
                what="a renewal through the surviving replica after the old deadline",
                timeout=EVENT_TIMEOUT_S,
            )
            same_lease = ("status", "attempt", "leased_at", "runner_id")
            assert {k: task[k] for k in same_lease} == {k: before[k] for k in same_lease}

            done.touch()
            wait_for(
                lambda: client.jobs.get(str(job["id"]))["status"] == "succeeded",
                what="the job succeeding through the surviving replica",
                timeout=EVENT_TIMEOUT_S,
            )
            finished = client.jobs.task(task_id)
        assert finished["attempt"] == before["attempt"] and finished["exit_code"] == 0
    finally:
        if runner.poll() is None:
            runner.send_signal(signal.SIGTERM)
        assert runner.wait(timeout=EVENT_TIMEOUT_S) == 0
    output = (tmp_path / "runner.log").read_text()
    assert output.count(f"now using {second.url}") == 1, output


# The client on its own, against real HTTP servers on loopback -----------------------


class _Answering:
    """An HTTP server on loopback answering every POST with ``status``; counts the calls."""

    def __init__(self, status: int) -> None:
        self.calls = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                outer.calls += 1
                self.rfile.read(int(self.headers.get("content-length") or 0))
                code = "ok" if status < 400 else "lease_lost" if status < 500 else "down"
                body = {"ok": True} if status < 400 else {"error": {"code": code, "message": code}}
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *_: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def answering() -> Iterator[Any]:
    started: list[_Answering] = []

    def start(status: int) -> _Answering:
        started.append(_Answering(status))
        return started[-1]

    yield start
    for server in started:
        server.close()


def _dead_url() -> str:
    return f"http://127.0.0.1:{free_port()}"


def test_urls_come_repeated_or_comma_separated_in_order_without_repeats() -> None:
    given = ["http://a:1/, http://b:2", "http://a:1", " ", "http://c:3"]
    assert split_urls(given) == ["http://a:1", "http://b:2", "http://c:3"]


def test_an_unreachable_or_failing_replica_moves_the_call_on_and_says_so_once(
    answering: Any, caplog: pytest.LogCaptureFixture
) -> None:
    failing, live = answering(503), answering(200)
    dead = _dead_url()
    with FailoverClient([dead, failing.url, live.url]) as client:
        with caplog.at_level(logging.WARNING, logger="watchkeeper.client.failover"):
            assert client.request("POST", "/renew") == {"ok": True}
            assert client.request("POST", "/renew") == {"ok": True}
        assert client.url == live.url
    assert (failing.calls, live.calls) == (1, 2)
    switches = [r.getMessage() for r in caplog.records if "now using" in r.getMessage()]
    assert len(switches) == 1 and switches[0].endswith(f"now using {live.url}")


def test_a_4xx_is_an_answer_not_a_reason_to_move_on(answering: Any) -> None:
    refusing, live = answering(409), answering(200)
    with FailoverClient([refusing.url, live.url]) as client:
        with pytest.raises(ClientError) as raised:
            client.runners.renew("t-1", "token")
        assert client.url == refusing.url
    assert (raised.value.status, raised.value.code) == (409, "lease_lost")
    assert (refusing.calls, live.calls) == (1, 0)


def test_when_every_replica_is_down_the_call_fails_after_rounds_with_pauses() -> None:
    pauses: list[float] = []
    with (
        FailoverClient([_dead_url(), _dead_url()], sleep=pauses.append) as client,
        pytest.raises(ClientError) as raised,
    ):
        client.runners.heartbeat("r-1")
    assert raised.value.status == 0 and "no replica answered" in raised.value.message
    assert len(pauses) == ROUNDS - 1 and pauses == sorted(pauses) and pauses[0] > 0
