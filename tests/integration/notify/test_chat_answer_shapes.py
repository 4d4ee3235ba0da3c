"""A chat channel's own HTTP session reads every shape of answer a platform may give: sized,
chunked, closing the connection, cut short, or none at all; a call with no whole answer may
have been sent, a refused connection was not. An ``https`` platform is reached over TLS with
its certificate checked against the trust store ``SSL_CERT_FILE`` names, and a proxy the
environment names is used."""

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

import pytest

from watchkeeper.config import SlackConfig
from watchkeeper.notify.channels.base import SendOutcome, SendResult
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
    targets: list[bytes] = field(default_factory=list)


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
            platform.targets.append(head.split(b" ")[1])
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
            if b"Connection: close" in reply or not reply.startswith(b"HTTP/1.1 "):
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


def hung_up(_: int) -> bytes:
    return b""  # the request was read, then the connection closed without a word


def cut_short(n: int) -> bytes:
    return sized(n)[:-5]  # fewer bytes than its Content-Length says, then the end


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


@pytest.mark.parametrize("platform", [silent, garbled, hung_up, cut_short], indirect=True)
def test_no_answer_or_a_garbled_one_may_have_been_sent(platform: Platform) -> None:
    (result,) = _send(platform.url, 1, timeout_s=0.5)
    assert result.outcome is SendOutcome.MAYBE_SENT
    assert len(platform.bodies) == 1


@pytest.mark.parametrize("platform", [sized], indirect=True)
def test_a_proxy_named_by_the_environment_carries_the_calls(
    platform: Platform, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("no_proxy", "NO_PROXY", "http_proxy", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", platform.url)
    (result,) = _send("http://slack.invalid/api", 1)
    assert (result.outcome, result.message_id) == (SendOutcome.SENT, "1.1")
    # A proxy is asked for the whole address; the platform itself is never looked up.
    assert platform.targets == [b"http://slack.invalid/api/chat.postMessage"]


def test_a_refused_connection_was_not_sent() -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        url = f"http://127.0.0.1:{taken.getsockname()[1]}"
    (result,) = _send(url, 1)
    assert result.outcome is SendOutcome.RETRY


def test_an_https_platform_is_called_over_tls_and_its_certificate_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    serving = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    serving.load_cert_chain(cert, key)
    found = Platform(sized)
    listener = socket.create_server(("127.0.0.1", 0))
    url = f"https://localhost:{listener.getsockname()[1]}/api"

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
    try:
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        (trusted,) = _send(url, 1)
        # A certificate nobody vouches for: no connection, so nothing was sent.
        monkeypatch.delenv("SSL_CERT_FILE")
        (refused,) = _send(url, 1)
    finally:
        listener.close()
    assert (trusted.outcome, trusted.message_id) == (SendOutcome.SENT, "1.1")
    assert refused.outcome is SendOutcome.RETRY
    assert [body["text"] for body in found.bodies] == ["card 0"]
