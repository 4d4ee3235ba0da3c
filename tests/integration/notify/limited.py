"""A platform that enforces rate limits, for pacing tests and the benchmark.

It speaks Telegram's Bot API (``sendMessage``) or, with ``wire="slack"``, Slack's
Web API (``chat.postMessage``: the channel in ``channel``, a 429 with
``Retry-After`` and ``error: ratelimited``), so each platform's real channel
can be paced against it without a slower fake's own speed in the figures.

It answers ``sendMessage`` from raw asyncio streams on a thread of its own
(so it shares nothing with the deliverer's loop) and keeps a bot's limits
the way a platform does: per chat, one message per ``1 / per_chat_rate``
seconds (less ``tolerance_s`` of network jitter); across all chats, a bucket
of ``global_rate`` messages refilled at ``global_rate`` a second; with
``group_per_minute``, each group (a negative chat id) a bucket of that many
messages refilled at that many a minute. A message
over either limit gets a 429 with ``retry_after`` and is not stored.

It also counts the calls it holds at once: with ``pair_wait_s``, each answer
waits (up to that long) for another call to arrive, so calls that a client
makes together are seen together.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

TOKEN = "123:limited"


@dataclass
class Arrival:
    """One message the platform accepted: when (its monotonic seconds), where, what."""

    at: float
    chat: str
    text: str


@dataclass
class LimitedPlatform:
    """The limits it keeps and what it saw."""

    per_chat_rate: float = 1.0
    global_rate: float | None = 30.0
    tolerance_s: float = 0.05
    pair_wait_s: float = 0.0
    group_per_minute: float | None = None
    #: Whose wire format it speaks: "telegram" or "slack".
    wire: str = "telegram"
    #: Chat -> seconds its first message waits at the door before the platform sees it
    #: (as behind a burst queued ahead of it); its answer is that much later too.
    first_seen_late_s: dict[str, float] = field(default_factory=dict)
    url: str = ""
    accepted: list[Arrival] = field(default_factory=list)
    refused: int = 0
    #: Refusals by the limit they broke: "chat", "global", "group".
    refused_by: dict[str, int] = field(default_factory=dict)
    in_flight: int = 0
    max_in_flight: int = 0
    _last: dict[str, float] = field(default_factory=dict)
    _tokens: float = 0.0
    _groups: dict[str, tuple[float, float]] = field(default_factory=dict)
    _refilled: float = 0.0
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    @property
    def base_url(self) -> str:
        """Where a Telegram channel reaches it."""
        return self.url

    def admit(self, chat: str, now: float) -> bool:
        """Whether a message to ``chat`` at ``now`` is within the limits; spends them if so."""
        broken = self._broken(chat, now)
        if broken is not None:
            self.refused_by[broken] = self.refused_by.get(broken, 0) + 1
            return False
        return True

    def _broken(self, chat: str, now: float) -> str | None:
        last = self._last.get(chat)
        if last is not None and now - last < 1.0 / self.per_chat_rate - self.tolerance_s:
            return "chat"
        group = self.group_per_minute
        if group is not None and chat.startswith("-"):
            tokens, refilled = self._groups.get(chat, (group, now))
            tokens = min(group, tokens + (now - refilled) * group / 60.0)
            if tokens < 1.0 - self.tolerance_s * group / 60.0:
                return "group"
            self._groups[chat] = (tokens - 1.0, now)
        if self.global_rate is not None:
            if not self._refilled:
                self._tokens, self._refilled = self.global_rate, now
            refill = (now - self._refilled) * self.global_rate
            self._tokens = min(self.global_rate, self._tokens + refill)
            self._refilled = now
            if self._tokens < 1.0 - self.tolerance_s * self.global_rate:
                return "global"
            self._tokens -= 1.0
        self._last[chat] = now
        return None

    def chat_of(self, body: dict[str, object]) -> str:
        """The chat a message with ``body`` goes to."""
        return str(body.get("channel") if self.wire == "slack" else body.get("chat_id"))

    def answer(self, body: dict[str, object]) -> tuple[int, dict[str, object], dict[str, str]]:
        """The platform's answer to a message with ``body``: status, JSON and headers."""
        slack = self.wire == "slack"
        chat = self.chat_of(body)
        text, now = str(body.get("text")), time.monotonic()
        if not self.admit(chat, now):
            self.refused += 1
            if slack:
                return 429, {"ok": False, "error": "ratelimited"}, {"Retry-After": "1"}
            return (
                429,
                {
                    "ok": False,
                    "error_code": 429,
                    "parameters": {"retry_after": 1},
                    "description": "Too Many Requests: retry after 1",
                },
                {},
            )
        self.accepted.append(Arrival(now, chat, text))
        ordinal = next(self._ids)
        if slack:
            return 200, {"ok": True, "channel": chat, "ts": f"1700000000.{ordinal:06d}"}, {}
        message = {"message_id": ordinal, "chat": {"id": chat}, "text": text}
        return 200, {"ok": True, "result": message}, {}

    def in_chat(self, chat: str) -> list[Arrival]:
        """The accepted messages of one chat, in arrival order."""
        return [a for a in self.accepted if a.chat == chat]


async def _serve(platform: LimitedPlatform, ready: threading.Event, stop: asyncio.Event) -> None:
    arrived = asyncio.Condition()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length:")
                    ),
                    0,
                )
                body = json.loads(await reader.readexactly(length) or b"{}")
                late = platform.first_seen_late_s.pop(platform.chat_of(body), 0.0)
                if late:
                    await asyncio.sleep(late)
                # Judged on arrival, as a platform does; only the answer is held.
                status, answer, headers = platform.answer(body)
                platform.in_flight += 1
                platform.max_in_flight = max(platform.max_in_flight, platform.in_flight)
                async with arrived:
                    arrived.notify_all()
                    # Nobody else coming within pair_wait_s: answer alone.
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(
                            arrived.wait_for(lambda: platform.in_flight > 1),
                            platform.pair_wait_s,
                        )
                raw = json.dumps(answer).encode()
                extra = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
                writer.write(
                    f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n{extra}".encode()
                    + f"Content-Length: {len(raw)}\r\n\r\n".encode()
                    + raw
                )
                await writer.drain()
                platform.in_flight -= 1
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=512)
    platform.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    ready.set()
    await stop.wait()
    server.close()


@contextmanager
def limited_platform(**options: Any) -> Iterator[LimitedPlatform]:
    """A running limited platform (``LimitedPlatform``'s fields), stopped on the way out."""
    platform = LimitedPlatform(**options)
    ready = threading.Event()
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()

    def run() -> None:
        loop.run_until_complete(_serve(platform, ready, stop))

    thread = threading.Thread(target=run, name="limited platform", daemon=True)
    thread.start()
    if not ready.wait(10):
        raise RuntimeError("the limited platform did not start within 10 s")
    try:
        yield platform
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(10)
        loop.close()
