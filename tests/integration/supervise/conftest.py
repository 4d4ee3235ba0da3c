from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ...support.waiting import wait_for


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: object


@dataclass
class RecordingServer:
    """A real HTTP server on loopback that records requests and answers ``status``."""

    url: str = ""
    status: int = 200
    requests: list[Recorded] = field(default_factory=list)
    hold: threading.Event = field(default_factory=threading.Event)
    received: threading.Condition = field(default_factory=threading.Condition)

    def wait_for(self, count: int, timeout_s: float = 10.0) -> list[Recorded]:
        """The requests so far, once ``count`` of them have arrived."""
        wait_for(
            lambda: len(self.requests) >= count,
            what=f"{count} requests arriving",
            timeout=timeout_s,
            changed=self.received,
        )
        with self.received:
            return list(self.requests)


@pytest.fixture
def recording_server() -> Iterator[RecordingServer]:
    state = RecordingServer()
    state.hold.set()

    class Handler(BaseHTTPRequestHandler):
        def _record(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            state.hold.wait(30)
            with state.received:
                state.requests.append(
                    Recorded(
                        self.command,
                        self.path,
                        {k.lower(): v for k, v in self.headers.items()},
                        json.loads(raw) if raw else None,
                    )
                )
                state.received.notify_all()
            payload = b'{"ok": true}'
            self.send_response(state.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_GET(self) -> None:
            self._record()

        def do_POST(self) -> None:
            self._record()

        def log_message(self, format: str, *args: object) -> None:
            pass  # keep test output clean

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.hold.set()
        server.shutdown()
        server.server_close()
        thread.join(10)
