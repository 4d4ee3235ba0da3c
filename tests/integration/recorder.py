"""A real HTTP server on loopback that records what it receives."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Recorded:
    """One request as received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Recorder:
    """What the server received, and the status it answers with."""

    url: str
    requests: list[Recorded] = field(default_factory=list)
    status: int = 200
    #: What it answers with (JSON).
    body: bytes = b"{}"
    lock: threading.Lock = field(default_factory=threading.Lock)


@contextmanager
def recording_server(status: int = 200) -> Iterator[Recorder]:
    """Start a recorder on a free port; stop it on exit."""
    recorder = Recorder(url="")

    class Handler(BaseHTTPRequestHandler):
        def _record(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            with recorder.lock:
                recorder.requests.append(
                    Recorded(self.command, self.path, dict(self.headers.items()), body)
                )
            self.send_response(recorder.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(recorder.body)))
            self.end_headers()
            self.wfile.write(recorder.body)

        do_POST = do_PUT = do_GET = do_DELETE = _record  # noqa: N815

        def log_message(self, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    recorder.url = f"http://127.0.0.1:{server.server_address[1]}"
    recorder.status = status
    # The loop looks for a stop every 50 ms: its default half second is paid at every exit.
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield recorder
    finally:
        server.shutdown()
        server.server_close()
