"""A runner cut off from the server stops its task's command before the lease it could not
renew lapses, so the task is never running in two places at once."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.support.live_server import LiveServer
from tests.support.tcp_proxy import TcpProxy, tcp_proxy
from tests.support.waiting import wait_for
from watchkeeper.client import Client
from watchkeeper.procs import identity
from watchkeeper.store import Store

from .. import queue_daemons as daemons
from ..queue_daemons import queue_server

EVENT_TIMEOUT_S = 60.0
LEASE_S = 6.0
# Writes its pid, then sleeps; on SIGTERM it writes the instant it stops (epoch seconds).
SLEEPER = (
    "import os, signal, sys, time\n"
    "def stop(*_):\n"
    "    tmp = sys.argv[2] + '.tmp'\n"
    "    open(tmp, 'w').write(repr(time.time()))\n"
    "    os.replace(tmp, sys.argv[2])\n"
    "    os._exit(0)\n"
    "signal.signal(signal.SIGTERM, stop)\n"
    "tmp = sys.argv[1] + '.tmp'\n"
    "open(tmp, 'w').write(str(os.getpid()))\n"
    "os.replace(tmp, sys.argv[1])\n"
    "while True:\n"
    "    time.sleep(0.05)\n"
)


@pytest.fixture
def server(tmp_path: Path, store: Store) -> Iterator[LiveServer]:
    with queue_server(tmp_path, store, lease_s=LEASE_S) as live:
        yield live


@pytest.fixture
def proxy(server: LiveServer) -> Iterator[TcpProxy]:
    address = urlsplit(server.url)
    with tcp_proxy((str(address.hostname), int(address.port or 80))) as opened:
        yield opened


def start_runner(url: str, token: str, tmp_path: Path) -> subprocess.Popen[bytes]:
    return daemons.start_runner(
        "cut",
        tmp_path / "runner",
        tmp_path / "runner.log",
        "--capacity",
        "1",
        "--server",
        url,
        "--poll-interval",
        "0.1",
        "--heartbeat-interval",
        "0.5",
        "--grace",
        "5",
        env={"WATCHKEEPER_TOKEN": token},
    )


def stopped_before_the_lease_lapses(
    client: Client, tmp_path: Path, cut_off: Callable[[], None]
) -> Callable[[], dict[str, object]]:
    """Run a task on ``daemon``, cut it off after a renewal, and see the command stop in time.

    Returns how to read the task now.
    """
    pid_file, stopped_file = tmp_path / "sleeper.pid", tmp_path / "sleeper.stopped"
    job = client.jobs.submit(
        "long",
        org="o",
        fleet="cut",
        argv=[sys.executable, "-c", SLEEPER, str(pid_file), str(stopped_file)],
    )

    def task() -> dict[str, object]:
        found: dict[str, object] = client.jobs.get(str(job["id"]))["tasks"][0]
        return found

    wait_for(pid_file.exists, what="the task's command running", timeout=EVENT_TIMEOUT_S)
    pid = int(pid_file.read_text())
    # A renewal went through, so the runner holds the lease as a renewing runner does.
    wait_for(lambda: task()["last_renewed_at"], what="a renewal", timeout=EVENT_TIMEOUT_S)
    cut_off()
    # No renewal passes the cut; the last expiry the server shows is the lease's end
    # (a renewal in flight at the cut may still land, so keep reading until the stop).
    expiries: list[str] = []

    def stopped() -> bool:
        current = task()
        if current["status"] == "running" and current["attempt"] == 1:
            expiries.append(str(current["lease_expires_at"]))
        return stopped_file.exists()

    wait_for(stopped, what="the command being stopped", timeout=EVENT_TIMEOUT_S)
    wait_for(lambda: identity.start_time(pid) is None, what="the command gone")
    stopped_at = float(stopped_file.read_text())
    lapses_at = datetime.fromisoformat(expiries[-1].replace("Z", "+00:00")).timestamp()
    assert stopped_at < lapses_at, (stopped_at, lapses_at)
    return task


def stop(daemon: subprocess.Popen[bytes]) -> None:
    daemon.send_signal(signal.SIGCONT)
    if daemon.poll() is None:
        daemon.send_signal(signal.SIGTERM)
    daemon.wait(timeout=EVENT_TIMEOUT_S)


def test_a_cut_off_runner_stops_its_command_before_the_lease_lapses(
    server: LiveServer, proxy: TcpProxy, tmp_path: Path
) -> None:
    daemon = start_runner(f"http://127.0.0.1:{proxy.port}", server.tokens["reporter"], tmp_path)
    try:
        with Client(server.url, server.tokens["admin"]) as client:
            stopped_before_the_lease_lapses(client, tmp_path, proxy.cut)
    finally:
        stop(daemon)
    output = (tmp_path / "runner.log").read_text()
    assert "before its lease lapses" in output, output


def test_a_frozen_runner_s_command_is_stopped_by_its_shim_before_the_lease_lapses(
    server: LiveServer, tmp_path: Path
) -> None:
    # SIGSTOP freezes the runner whole (its lease guard thread too); its shim runs on.
    daemon = start_runner(server.url, server.tokens["reporter"], tmp_path)
    try:
        freeze = lambda: daemon.send_signal(signal.SIGSTOP)  # noqa: E731
        with Client(server.url, server.tokens["admin"]) as client:
            task = stopped_before_the_lease_lapses(client, tmp_path, freeze)
            daemon.send_signal(signal.SIGCONT)
            # Thawed, the runner finds the lease it held gone and reports nothing for it.
            wait_for(
                lambda: task()["attempt"] == 2 or task()["status"] == "queued",
                what="the task handed on",
                timeout=EVENT_TIMEOUT_S,
            )
    finally:
        stop(daemon)
    output = (tmp_path / "runner.log").read_text()
    assert "Traceback" not in output, output
