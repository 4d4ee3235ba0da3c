"""A request whose body does not arrive in time is answered 408 and its connection closed.

Real sockets on loopback against the server as ``watchkeeper serve`` configures
it, with a short body timeout so the tests do not wait long. Both HTTP parsers
(httptools and h11) get the same limit.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import pytest

from watchkeeper.runtime import Runtime

from ..support.live_server import LiveServer, live_server
from .test_slow_clients import CLOSED_WITHIN_S, _connect, _request

BODY_TIMEOUT_S = 0.5


@pytest.fixture(params=["httptools", "h11"])
def server(request: pytest.FixtureRequest, runtime: Runtime) -> Iterator[LiveServer]:
    with live_server(
        runtime,
        header_timeout_s=BODY_TIMEOUT_S,
        body_timeout_s=BODY_TIMEOUT_S,
        parser=request.param,
    ) as live:
        yield live


def _head(server: LiveServer, length: int) -> bytes:
    token = server.tokens["reporter"]
    return _request(
        "/api/v1/runs",
        method="POST",
        Authorization=f"Bearer {token}",
        Content_Type="application/json",
        Content_Length=str(length),
    )


def _answer_until_closed(sock: socket.socket, deadline: float) -> bytes | None:
    """Everything the server sends until it closes; ``None`` if still open at ``deadline``."""
    data = b""
    while time.monotonic() < deadline:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            return None
        except ConnectionResetError:
            return data
        if not chunk:
            return data
        data += chunk
    return None


def _trickle(sock: socket.socket, data: bytes, deadline: float) -> bytes | None:
    """Send ``data`` a byte a tenth of a second, reading what comes back, until closed."""
    answer = b""
    for byte in data:
        if time.monotonic() > deadline:
            return None
        try:
            sock.sendall(bytes([byte]))
        except (BrokenPipeError, ConnectionResetError):
            return answer
        sock.settimeout(0.1)
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            continue
        except ConnectionResetError:
            return answer
        if not chunk:
            return answer
        answer += chunk
    rest = _answer_until_closed(sock, deadline)
    return None if rest is None else answer + rest


def test_a_body_that_stops_arriving_is_answered_408(server: LiveServer) -> None:
    body = json.dumps({"kind": "crawl", "run_id": "stalled-1", "title": "t"}).encode()
    with _connect(server) as sock:
        sock.sendall(_head(server, len(body)) + body[:10])  # then nothing more
        answer = _answer_until_closed(sock, time.monotonic() + CLOSED_WITHIN_S)
    assert answer is not None, "a connection whose body stopped was never closed"
    assert answer.startswith(b"HTTP/1.1 408 "), answer
    assert b"request_timeout" in answer


def test_a_trickled_body_is_cut(server: LiveServer) -> None:
    body = json.dumps({"kind": "crawl", "run_id": "trickle-1", "title": "t" * 400}).encode()
    with _connect(server) as sock:
        sock.sendall(_head(server, len(body)))
        answer = _trickle(sock, body, time.monotonic() + CLOSED_WITHIN_S)
    assert answer is not None, "the trickled body was never cut"
    assert answer.startswith(b"HTTP/1.1 408 "), answer
    with server.client("viewer") as http:  # and nothing was recorded from the cut request
        assert http.get("/api/v1/runs/crawl/trickle-1").status_code == 404


def test_a_body_sent_whole_in_time_is_served(runtime: Runtime) -> None:
    body = json.dumps({"kind": "crawl", "run_id": "prompt-1", "title": "t" * 50}).encode()
    with live_server(runtime, body_timeout_s=30) as generous, _connect(generous) as sock:
        sock.sendall(_head(generous, len(body)))
        for i in range(0, len(body), 10):
            sock.sendall(body[i : i + 10])
            time.sleep(0.02)
        sock.settimeout(CLOSED_WITHIN_S)
        data = b""
        while b"prompt-1" not in data:
            chunk = sock.recv(65536)
            assert chunk, data
            data += chunk
        assert data.startswith(b"HTTP/1.1 201 "), data
