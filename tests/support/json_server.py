"""A small JSON HTTP server on loopback for the tests' fakes of third-party APIs."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar


class JsonServer(ThreadingHTTPServer):
    """A threaded HTTP server on a free loopback port."""

    @property
    def url(self) -> str:
        """Its base URL."""
        return f"http://127.0.0.1:{self.server_address[1]}"


class JsonHandler(BaseHTTPRequestHandler):
    """A handler that answers JSON and keeps quiet."""

    def send_json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        """Answer ``status`` with ``body`` as JSON, and ``headers``."""
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *_args: Any) -> None:
        pass


S = TypeVar("S", bound=JsonServer)


@contextmanager
def answering(server: S) -> Iterator[S]:
    """``server`` answering in a thread until the block ends."""
    # The loop looks for a stop every 50 ms: its default half second is paid at every exit.
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
