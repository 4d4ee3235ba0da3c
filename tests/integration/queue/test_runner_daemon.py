"""A real runner daemon process against a real server: tasks run as real subprocesses,
outcomes are reported, and a cancel reaches the running subprocess."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.live_server import LiveServer
from tests.support.waiting import wait_for
from watchkeeper.client import Client
from watchkeeper.procs import identity
from watchkeeper.store import Store

from .. import queue_daemons as daemons
from ..queue_daemons import QUICK, queue_server, server_env

EVENT_TIMEOUT_S = 60.0
# Writes its pid (atomically), then sleeps until it is killed.
SLEEPER = (
    "import os, sys, time\n"
    "tmp = sys.argv[1] + '.tmp'\n"
    "open(tmp, 'w').write(str(os.getpid()))\n"
    "os.replace(tmp, sys.argv[1])\n"
    "time.sleep(600)\n"
)


@pytest.fixture
def server(tmp_path: Path, store: Store) -> Iterator[LiveServer]:
    with queue_server(tmp_path, store) as live:
        yield live


def start_runner(server: LiveServer, tmp_path: Path) -> subprocess.Popen[bytes]:
    return daemons.start_runner(
        "e2e",
        tmp_path / "runner",
        tmp_path / "runner.log",
        "--capacity",
        "3",
        *QUICK,
        "--grace",
        "2",
        env=server_env(server),
    )


def test_runner_runs_reports_and_a_cancel_aborts_the_subprocess(
    server: LiveServer, tmp_path: Path
) -> None:
    pid_file = tmp_path / "sleeper.pid"
    daemon = start_runner(server, tmp_path)
    try:
        with Client(server.url, server.tokens["admin"]) as client:
            ok = client.jobs.submit("ok", org="o", fleet="e2e", argv=["true"])
            bad = client.jobs.submit(
                "bad", org="o", fleet="e2e", argv=[sys.executable, "-c", "raise SystemExit(3)"]
            )
            slow = client.jobs.submit(
                "slow", org="o", fleet="e2e", argv=[sys.executable, "-c", SLEEPER, str(pid_file)]
            )

            def status(job: dict[str, object]) -> str:
                return str(client.jobs.get(str(job["id"]))["status"])

            wait_for(lambda: status(ok) == "succeeded", timeout=EVENT_TIMEOUT_S)
            wait_for(lambda: status(bad) == "failed", timeout=EVENT_TIMEOUT_S)
            failed_task = client.jobs.get(str(bad["id"]))["tasks"][0]
            assert failed_task["exit_code"] == 3

            wait_for(pid_file.exists, timeout=EVENT_TIMEOUT_S)
            pid = int(pid_file.read_text())
            assert identity.start_time(pid) is not None
            [runner] = client.runners.topology()["runners"]
            assert runner["alive"] and [t["job_id"] for t in runner["tasks"]] == [slow["id"]]

            assert client.jobs.cancel(str(slow["id"]))["affected"] == 1
            # The runner's next renewal fails; it aborts the subprocess's group.
            wait_for(lambda: identity.start_time(pid) is None, timeout=EVENT_TIMEOUT_S)
            assert status(slow) == "cancelled"
            assert client.jobs.cancel(str(slow["id"]))["affected"] == 0
    finally:
        if daemon.poll() is None:
            daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=EVENT_TIMEOUT_S) == 0
    output = (tmp_path / "runner.log").read_text()
    assert "Stopped task" in output and "is gone" in output
    with Client(server.url, server.tokens["viewer"]) as client:
        assert client.runners.list() == []  # it said goodbye
