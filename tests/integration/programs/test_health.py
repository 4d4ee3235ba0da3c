"""Health checks that feed restarts: an HTTP probe, a heartbeat file and memory. A program that
fails them ``failures`` times in a row is restarted as unhealthy, counted in its intensity."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from watchkeeper.clock import ManualClock
from watchkeeper.programs import view
from watchkeeper.programs.host import ProgramHost
from watchkeeper.store import Store

from ...conftest import T0
from ...support.live_server import free_port
from ...support.waiting import wait_for_async
from .conftest import running, script, wait_marks, wait_state

pytestmark = pytest.mark.anyio

# Serves GET / on argv[1]'s port: 200 until the file argv[2] exists, then 500; a new start
# begins healthy again (it removes the file).
WEB = """
if os.path.exists(sys.argv[2]):
    os.remove(sys.argv[2])
from http.server import BaseHTTPRequestHandler, HTTPServer
class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(500 if os.path.exists(sys.argv[2]) else 200)
        self.end_headers()
    def log_message(self, *args):
        pass
server = HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
mark("start")
server.serve_forever()
"""
SLEEPER = """
mark("start")
time.sleep(300)
"""


def driving(clock: ManualClock, done: Callable[[], object]) -> Callable[[], object]:
    """A predicate that lets the next round of checks run (each waits ``interval_s``, 1 s
    here, on the clock) whenever one waits, and says whether ``done`` holds yet."""

    def step() -> object:
        if clock.pending():
            clock.advance(1)
        return done()

    return step


async def test_a_failing_http_probe_restarts_the_program_as_unhealthy(
    tmp_path: Path, sqlite_store: Store
) -> None:
    clock = ManualClock(T0)
    port, broken = free_port(), tmp_path / "broken"
    programs = {
        "web": {
            "command": [*script(tmp_path, "web", WEB), str(port), str(broken)],
            "start_s": 0,
            "environment": {"MARKS": str(tmp_path / "marks")},
            "backoff": {"initial_s": 0, "jitter": 0},
            "health": {"http": f"http://127.0.0.1:{port}/", "interval_s": 1, "failures": 2},
        }
    }
    async with running(tmp_path, sqlite_store, clock, programs=programs) as host:
        await wait_marks(tmp_path / "marks", 1)
        await wait_for_async(lambda: _answers(port), what="the web program listening")
        healthy = [{"name": "http", "status": "healthy"}]
        await wait_for_async(driving(clock, lambda: _statuses(host) == healthy))
        broken.touch()
        # Rounds run until the restart; then the clock stays, so the new start is not probed
        # again before it listens.
        await wait_for_async(driving(clock, lambda: view.program(host, "web")["restarts"]))
        await wait_marks(tmp_path / "marks", 2)
        shown = await wait_state(host, "web", "running")
    assert shown["restarts"] == 1
    assert shown["last_exit"].startswith("unhealthy: health: http: ")
    assert "answered 500 (2 times in a row)" in shown["last_exit"]
    assert [m["event"] for m in shown["history"]][:3] == ["started", "unhealthy", "restarting"]


async def test_a_stale_heartbeat_file_restarts_the_program(
    tmp_path: Path, sqlite_store: Store
) -> None:
    clock = ManualClock(T0)
    beat = tmp_path / "beat"
    beat.touch()
    os.utime(beat, (0, 0))  # touched in 1970
    programs = {
        "loop": {
            "command": script(tmp_path, "sleeper", SLEEPER),
            "start_s": 0,
            "environment": {"MARKS": str(tmp_path / "marks")},
            "backoff": {"initial_s": 0, "jitter": 0},
            "health": {
                "heartbeat_file": str(beat),
                "heartbeat_max_age_s": 60,
                "interval_s": 1,
                "failures": 1,
            },
        }
    }
    async with running(tmp_path, sqlite_store, clock, programs=programs) as host:
        await wait_marks(tmp_path / "marks", 1)
        await wait_for_async(lambda: clock.pending() > 0, what="the first check waiting")
        clock.advance(1)
        await wait_marks(tmp_path / "marks", 2)
        shown = await wait_state(host, "loop", "running")
    assert "heartbeat_file: " in shown["last_exit"]
    assert "limit 60 s" in shown["last_exit"]


async def test_a_program_over_its_memory_limit_is_restarted(
    tmp_path: Path, sqlite_store: Store
) -> None:
    clock = ManualClock(T0)
    programs = {
        "hog": {
            "command": script(tmp_path, "sleeper", SLEEPER),
            "start_s": 0,
            "environment": {"MARKS": str(tmp_path / "marks")},
            "backoff": {"initial_s": 0, "jitter": 0},
            # A Python process alone holds more than 1 MiB.
            "health": {"max_memory_mb": 1, "interval_s": 1, "failures": 1},
        }
    }
    async with running(tmp_path, sqlite_store, clock, programs=programs) as host:
        await wait_marks(tmp_path / "marks", 1)
        await wait_for_async(lambda: clock.pending() > 0, what="the first check waiting")
        clock.advance(1)
        await wait_marks(tmp_path / "marks", 2)
        shown = await wait_state(host, "hog", "running")
    assert shown["last_exit"].startswith("unhealthy: health: memory: ")
    assert "(limit 1 MiB)" in shown["last_exit"]


def _statuses(host: ProgramHost) -> list[dict[str, str]]:
    return [{k: c[k] for k in ("name", "status")} for c in view.program(host, "web")["health"]]


def _answers(port: int) -> bool:
    import socket

    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0
