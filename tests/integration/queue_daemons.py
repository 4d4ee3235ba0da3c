"""A live server for queue tests and real ``watchkeeper runner`` processes against it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from watchkeeper.clock import utcnow
from watchkeeper.notify.ops import OpsNotifier
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store

from ..conftest import make_settings
from ..support.live_server import LiveServer, live_server

#: Short intervals, so a runner notices cancels, leases and its own death within a test.
QUICK = ("--renew-interval", "0.3", "--poll-interval", "0.1", "--heartbeat-interval", "0.5")


@contextmanager
def queue_server(tmp_path: Path, store: Store, *, lease_s: float = 30) -> Iterator[LiveServer]:
    """A live server on ``store`` whose tasks are leased for ``lease_s`` seconds."""
    settings = make_settings(tmp_path, store.url, queue={"lease_s": lease_s})
    runtime = Runtime.open(settings, clock=utcnow, store=store, notifier=OpsNotifier(settings.ops))
    try:
        with live_server(runtime) as live:
            yield live
    finally:
        runtime.sweeper.close()


def start_runner(
    fleet: str,
    data_dir: Path,
    log: Path,
    *args: str,
    env: Mapping[str, str],
    command: tuple[str, ...] = (sys.executable, "-m", "watchkeeper"),
) -> subprocess.Popen[bytes]:
    """A real runner of ``fleet`` (``args`` added to its command line), its output in ``log``.

    ``env`` names the server (``WATCHKEEPER_URL``, ``WATCHKEEPER_TOKEN``) and
    anything else the runner should see, on top of this process's environment.
    """
    with log.open("wb") as out:
        return subprocess.Popen(
            [*command, "runner", "--fleet", fleet, "--data-dir", str(data_dir), *args],
            env={**os.environ, **env},
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def server_env(server: LiveServer) -> dict[str, str]:
    """The environment that points a runner at ``server`` with its reporter token."""
    return {"WATCHKEEPER_URL": server.url, "WATCHKEEPER_TOKEN": server.tokens["reporter"]}
