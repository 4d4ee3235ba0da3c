"""A chat channel's own connections read every shape of answer a platform may give: sized,
chunked, closing the connection, or none at all, each classified as the HTTP client's
errors are (a call with no answer may have been sent; a refused connection was not); an
``https`` platform is reached over TLS with its certificate checked."""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from watchkeeper.config import SlackConfig
from watchkeeper.notify.channels.base import SendOutcome, SendResult
from watchkeeper.notify.channels.lane import Lane
from watchkeeper.notify.channels.slack import SlackChannel
from watchkeeper.notify.message import Message, Target

Answer = Callable[[int], bytes | None]


@dataclass
class Platform:
    """A raw HTTP server answering the n-th request with ``answer(n)`` (``None``: silence)."""

    answer: Answer
    url: str = ""
    connections: int = 0
    bodies: list[dict[str, object]] = field(default_factory=list)


def _serve(platform: Platform, conn: socket.socket) -> None:
    buffer = b""
    with conn:
        while True:
            while b"\r\n\r\n" not in buffer:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                buffer += chunk
            head, _, buffer = buffer.partition(b"\r\n\r\n")
            length = next(
                int(line.split(b":")[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            while len(buffer) < length:
                buffer += conn.recv(65536)
            platform.bodies.append(json.loads(buffer[:length]))
            buffer = buffer[length:]
            reply = platform.answer(len(platform.bodies))
            if reply is None:
                conn.recv(1)  # never answers: waits for the caller to give up
                return
            conn.sendall(reply)
            if b"Connection: close" in reply:
                return


@pytest.fixture
def platform(request: pytest.FixtureRequest) -> Iterator[Platform]:
    found = Platform(request.param)
    listener = socket.create_server(("127.0.0.1", 0))
    found.url = f"http://127.0.0.1:{listener.getsockname()[1]}"

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            found.connections += 1
            threading.Thread(target=_serve, args=(found, conn), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield found
    finally:
        listener.close()


def _ok(n: int) -> bytes:
    return json.dumps({"ok": True, "channel": "C1", "ts": f"1.{n}"}).encode()


def sized(n: int) -> bytes:
    body = _ok(n)
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


def chunked(n: int) -> bytes:
    body = _ok(n)
    half = len(body) // 2
    return (
        b"HTTP/1.1 100 Continue\r\n\r\n"
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"%x;ext=1\r\n%s\r\n%x\r\n%s\r\n0\r\nX-Trailer: t\r\n\r\n"
        % (half, body[:half], len(body) - half, body[half:])
    )


def closing(n: int) -> bytes:
    return b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + _ok(n)


def silent(_: int) -> None:
    return None


def garbled(_: int) -> bytes:
    return b"SMTP ready\r\n\r\n"


def _send(url: str, times: int, timeout_s: float = 5.0) -> list[SendResult]:
    channel = SlackChannel(SlackConfig(bot_token="xoxb-t", base_url=url, timeout_s=timeout_s))

    async def run() -> list[SendResult]:
        try:
            return [
                await channel.send(Target("slack", "C1"), Message(f"card {n}"), f"k{n}")
                for n in range(times)
            ]
        finally:
            await channel.aclose()

    return asyncio.run(run())


@pytest.mark.parametrize("platform", [sized, chunked], indirect=True)
def test_kept_alive_answers_are_read_whole_over_one_connection(platform: Platform) -> None:
    results = _send(platform.url, 3)
    assert [(r.outcome, r.message_id) for r in results] == [
        (SendOutcome.SENT, f"1.{n}") for n in (1, 2, 3)
    ]
    assert [b["text"] for b in platform.bodies] == ["card 0", "card 1", "card 2"]
    assert platform.connections == 1


@pytest.mark.parametrize("platform", [closing], indirect=True)
def test_an_answer_closing_its_connection_is_read_to_the_end(platform: Platform) -> None:
    results = _send(platform.url, 3)
    assert [(r.outcome, r.message_id) for r in results] == [
        (SendOutcome.SENT, f"1.{n}") for n in (1, 2, 3)
    ]
    assert platform.connections == 3


@pytest.mark.parametrize("platform", [silent, garbled], indirect=True)
def test_no_answer_or_a_garbled_one_may_have_been_sent(platform: Platform) -> None:
    (result,) = _send(platform.url, 1, timeout_s=0.5)
    assert result.outcome is SendOutcome.MAYBE_SENT
    assert len(platform.bodies) == 1


def test_a_refused_connection_was_not_sent() -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        url = f"http://127.0.0.1:{taken.getsockname()[1]}"
    (result,) = _send(url, 1)
    assert result.outcome is SendOutcome.RETRY


def test_an_https_platform_is_called_over_tls_and_its_certificate_checked(
    tmp_path: Path,
) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    serving = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    serving.load_cert_chain(cert, key)
    found = Platform(sized)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return  # closed
            try:
                wrapped = serving.wrap_socket(conn, server_side=True)
            except OSError:
                continue  # the caller refused the certificate
            threading.Thread(target=_serve, args=(found, wrapped), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    trusting = ssl.create_default_context(cafile=str(cert))

    async def call(tls: ssl.SSLContext) -> int | str:
        lane = Lane(5.0, tls)
        try:
            answer = await lane.request("POST", f"https://localhost:{port}/api/x", {"n": 1})
            return answer.status_code
        except httpx.HTTPError as exc:
            return type(exc).__name__
        finally:
            lane.close()

    try:
        assert asyncio.run(call(trusting)) == 200
        # A certificate nobody vouches for: no connection, so nothing was sent.
        assert asyncio.run(call(ssl.create_default_context())) == "ConnectError"
    finally:
        listener.close()
    assert found.bodies == [{"n": 1}]
