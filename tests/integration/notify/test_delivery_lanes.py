"""A chat channel's calls in flight each go over a kept-alive connection of their own: many
calls at once all arrive, over no more connections than calls allowed in flight, and a call
that fails gives its connection's place back."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from watchkeeper.config import SlackConfig
from watchkeeper.notify.channels.base import SendOutcome
from watchkeeper.notify.channels.slack import SlackChannel
from watchkeeper.notify.message import Message, Target

CALLS = 40


@dataclass
class Seen:
    url: str = ""
    channels: list[str] = field(default_factory=list)
    ports: set[int] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)


@pytest.fixture
def platform() -> Iterator[Seen]:
    """A Slack-shaped answer to every post, keeping connections alive; notes who called."""
    seen = Seen()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            with seen.lock:
                seen.channels.append(body["channel"])
                seen.ports.add(self.client_address[1])
                number = len(seen.channels)
            answer = json.dumps({"ok": True, "channel": body["channel"], "ts": f"1.{number}"})
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer.encode())

        def log_message(self, *args: object) -> None:
            return

    class Server(ThreadingHTTPServer):
        request_queue_size = 64  # every lane connects at once: more than the default 5

    server = Server(("127.0.0.1", 0), Handler)
    seen.url = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield seen
    finally:
        server.shutdown()
        server.server_close()


def test_calls_at_once_share_no_more_connections_than_allowed(platform: Seen) -> None:
    dead = SlackChannel(SlackConfig(bot_token="xoxb-t", base_url="http://127.0.0.1:9", timeout_s=5))
    channel = SlackChannel(SlackConfig(bot_token="xoxb-t", base_url=platform.url, timeout_s=5))

    async def run() -> list[SendOutcome]:
        # Twice as many as may be in flight: the later ones get a connection only once the
        # earlier refused ones gave theirs back, else they would time out waiting for one.
        refused = await asyncio.gather(
            *(
                dead.send(Target("slack", "C0"), Message("x"), "k")
                for _ in range(2 * dead.max_in_flight)
            )
        )
        assert {r.outcome for r in refused} == {SendOutcome.RETRY}
        assert all("ConnectError" in (r.error or "") for r in refused)
        bound = asyncio.Semaphore(channel.max_in_flight)

        async def one(number: int) -> SendOutcome:
            async with bound:
                target = Target("slack", f"C{number}")
                return (await channel.send(target, Message(f"card {number}"), "k")).outcome

        try:
            return await asyncio.gather(*(one(n) for n in range(CALLS)))
        finally:
            await channel.aclose()
            await dead.aclose()

    outcomes = asyncio.run(run())

    assert outcomes == [SendOutcome.SENT] * CALLS
    assert sorted(platform.channels) == sorted(f"C{n}" for n in range(CALLS))
    assert len(platform.ports) <= channel.max_in_flight
