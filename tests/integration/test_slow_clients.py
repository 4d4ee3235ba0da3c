"""Slow and idle clients are dropped; honest slow requests are still served.

Real sockets on loopback against the server as ``watchkeeper serve`` configures
it, with a short header timeout so the tests do not wait long. Both HTTP
parsers (httptools and h11) get the same limits.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import pytest

from watchkeeper.runtime import Runtime

from ..support.live_server import LiveServer, live_server

HEADER_TIMEOUT_S = 0.5
#: Short for the same reason: an idle kept-alive connection is closed after this (5 s served).
KEEP_ALIVE_S = 1
#: Far longer than the header timeout: a socket still open by then was never dropped.
CLOSED_WITHIN_S = 15.0
SLOWLORIS = 300


@pytest.fixture(params=["httptools", "h11"])
def server(request: pytest.FixtureRequest, runtime: Runtime) -> Iterator[LiveServer]:
    with live_server(runtime, header_timeout_s=HEADER_TIMEOUT_S, parser=request.param) as live:
        yield live


def _connect(server: LiveServer) -> socket.socket:
    host, port = server.url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=CLOSED_WITHIN_S)


def _closed_by_server(sock: socket.socket, deadline: float) -> bool:
    """Read until the server closes the socket (``True``) or ``deadline`` passes."""
    while time.monotonic() < deadline:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            if sock.recv(65536) == b"":
                return True
        except TimeoutError:
            return False
        except ConnectionResetError:
            return True
    return False


def _trickle_until_closed(sock: socket.socket, data: bytes, deadline: float) -> bool:
    """Send ``data`` a byte at a time, a tenth of a second apart, until the server hangs up."""
    for byte in data:
        if time.monotonic() > deadline:
            return False
        try:
            sock.sendall(bytes([byte]))
        except (BrokenPipeError, ConnectionResetError):
            return True
        sock.settimeout(0.1)
        try:
            if sock.recv(65536) == b"":
                return True
        except TimeoutError:
            continue  # still open: the next byte
        except ConnectionResetError:
            return True
    return _closed_by_server(sock, deadline)


def _request(path: str, body: bytes = b"", method: str = "GET", **headers: str) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1"]
    lines += [f"{name.replace('_', '-')}: {value}" for name, value in headers.items()]
    if body:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def _response(sock: socket.socket) -> tuple[int, bytes]:
    """One whole response with a Content-Length: its status and body."""
    sock.settimeout(CLOSED_WITHIN_S)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"the server closed the connection before answering: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk
        body += chunk
    return int(head.split(b" ")[1]), body


def test_silent_connections_are_closed(server: LiveServer) -> None:
    socks = [_connect(server) for _ in range(SLOWLORIS)]
    try:
        deadline = time.monotonic() + CLOSED_WITHIN_S
        still_open = [s for s in socks if not _closed_by_server(s, deadline)]
        assert not still_open, f"{len(still_open)} silent connections were never closed"
    finally:
        for sock in socks:
            sock.close()
    with _connect(server) as sock:  # and the server still serves
        sock.sendall(_request("/healthz"))
        assert _response(sock)[0] == 200


def test_a_trickled_request_head_is_cut(server: LiveServer) -> None:
    head = _request("/healthz", X_Padding="a" * 400)
    with _connect(server) as sock:
        deadline = time.monotonic() + CLOSED_WITHIN_S
        assert _trickle_until_closed(sock, head, deadline), "the trickle was never cut"


def test_a_trickle_after_a_kept_alive_response_is_cut(server: LiveServer) -> None:
    with _connect(server) as sock:
        sock.sendall(_request("/healthz"))
        assert _response(sock)[0] == 200
        deadline = time.monotonic() + CLOSED_WITHIN_S
        head = _request("/healthz", X_Padding="a" * 400)
        assert _trickle_until_closed(sock, head, deadline), "the second trickle was never cut"


@pytest.fixture(params=["httptools", "h11"])
def quick_idle_server(request: pytest.FixtureRequest, runtime: Runtime) -> Iterator[LiveServer]:
    """:func:`server`, closing idle kept-alive connections after :data:`KEEP_ALIVE_S`."""
    with live_server(
        runtime, header_timeout_s=HEADER_TIMEOUT_S, keep_alive_s=KEEP_ALIVE_S, parser=request.param
    ) as live:
        yield live


def test_an_idle_kept_alive_connection_is_closed(quick_idle_server: LiveServer) -> None:
    server = quick_idle_server
    with _connect(server) as sock:
        sock.sendall(_request("/healthz"))
        assert _response(sock)[0] == 200
        assert _closed_by_server(sock, time.monotonic() + CLOSED_WITHIN_S)


def test_a_huge_request_head_is_refused(server: LiveServer) -> None:
    with _connect(server) as sock:
        try:
            for _ in range(200):
                sock.sendall(b"GET /healthz HTTP/1.1\r\n" + b"X-Padding: " + b"a" * 8000 + b"\r\n")
        except (BrokenPipeError, ConnectionResetError):
            return  # cut while sending
        assert _closed_by_server(sock, time.monotonic() + CLOSED_WITHIN_S)


def test_an_honest_request_with_a_slow_body_is_served(server: LiveServer) -> None:
    """The head arrives whole at once; the body takes longer than the header timeout."""
    body = json.dumps({"kind": "crawl", "run_id": "slow-1", "title": "t" * 50}).encode()
    token = server.tokens["reporter"]
    with _connect(server) as sock:
        sock.sendall(
            _request(
                "/api/v1/runs",
                method="POST",
                Authorization=f"Bearer {token}",
                Content_Type="application/json",
                Content_Length=str(len(body)),
            )
        )
        parts = [body[i : i + 10] for i in range(0, len(body), 10)]
        for part in parts:
            sock.sendall(part)
            time.sleep(HEADER_TIMEOUT_S / 4)  # the whole body takes several header timeouts
        status, answer = _response(sock)
        assert status == 201, answer
        assert json.loads(answer)["run_id"] == "slow-1"


def test_a_head_sent_in_pieces_within_the_timeout_is_served(runtime: Runtime) -> None:
    with live_server(runtime, header_timeout_s=30) as generous, _connect(generous) as sock:
        head = _request("/healthz")
        for i in range(0, len(head), 8):
            sock.sendall(head[i : i + 8])
            time.sleep(0.02)
        assert _response(sock)[0] == 200
