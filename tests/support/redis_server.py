"""A Redis server of the test's own: Debian's ``redis-server`` on a free port, in a temp folder.

Never the Redis at 6379 that others use: each test session starts its own and stops it at the
end, so flushing or killing it touches nobody else. Locally a missing ``redis-server`` skips
the tests that need it; under CI (``CI=true``) it fails them.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from .live_server import free_port
from .waiting import wait_for

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"


@dataclass(frozen=True)
class RedisServer:
    """A running Redis: its port and the URL of database ``db``."""

    port: int
    process: subprocess.Popen[bytes]

    def url(self, db: int = 0) -> str:
        """``redis://127.0.0.1:PORT/db``."""
        return f"redis://127.0.0.1:{self.port}/{db}"


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def require_redis_server() -> None:
    """Skip (locally) or fail (under CI) when Debian's redis-server is not installed."""
    if Path(REDIS_SERVER).exists():
        return
    message = "redis-server is not installed (apt-get install redis-server)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@contextmanager
def redis_server(folder: Path) -> Iterator[RedisServer]:
    """Start a redis-server in ``folder`` on a free loopback port; stop it at the end."""
    require_redis_server()
    port = free_port()
    folder.mkdir(parents=True, exist_ok=True)
    process = subprocess.Popen(
        [
            *(REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(folder)),
            *("--save", "", "--appendonly", "no", "--daemonize", "no"),
            *("--loglevel", "warning", "--databases", "32"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: _answers(port) or process.poll() is not None, what="redis-server up")
        if process.poll() is not None:
            pytest.fail(f"redis-server exited with {process.returncode} on port {port}")
        yield RedisServer(port, process)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
