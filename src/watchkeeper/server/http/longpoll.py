"""Caps on requests that hold their connection open: long-polls and event streams.

A held request waits on the event loop, so it costs no worker thread, but it
keeps a socket, a task and some memory for as long as it lasts, and any viewer
could open as many as it likes. Each token may hold :data:`PER_TOKEN` of them
at once and the whole server :data:`TOTAL`; past either cap the request is
answered ``429`` with ``Retry-After`` at once, never queued, so the short
requests of every other client never wait behind held ones.

Every held request takes a :class:`Hold` from the app's :class:`LongWaits`
and gives it back when it ends: ``async with`` for a long-poll,
:func:`held_stream` for a streamed response (the hold ends when the stream
does, however it ends).
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from fastapi import FastAPI, HTTPException
from fastapi.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from watchkeeper.server.deps import Services, made_once

#: Held requests one token may have open at once.
PER_TOKEN = 8
#: Held requests the server keeps open at once, over all tokens.
TOTAL = 64
#: What a refused client is told to wait before asking again, in seconds.
RETRY_AFTER_S = 5

T = TypeVar("T")


async def unless_set(stopping: asyncio.Event, waiting: Awaitable[T]) -> T | None:
    """``waiting``'s result, or ``None`` at once when ``stopping`` is set first (it is cancelled).

    A held request races the server's stop with this, so a stopping server
    answers it now (the client asks again, of another replica) instead of
    holding its exit for the whole wait.
    """
    work = asyncio.ensure_future(waiting)
    stop = asyncio.ensure_future(stopping.wait())
    try:
        done, _ = await asyncio.wait({work, stop}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop.cancel()
    if work in done:
        return work.result()
    work.cancel()
    return None


class Hold:
    """One held request's place; :meth:`release` gives it back (more calls change nothing)."""

    def __init__(self, caps: LongWaits, holder: int) -> None:
        self._caps = caps
        self.holder = holder
        self._released = False

    def release(self) -> None:
        """Give the place back."""
        if not self._released:
            self._released = True
            self._caps._give_back(self.holder)

    async def __aenter__(self) -> Hold:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        self.release()


class LongWaits:
    """Counts held requests per token and in total; refuses past either cap."""

    def __init__(self, per_token: int = PER_TOKEN, total: int = TOTAL) -> None:
        if per_token < 1 or total < 1:
            raise ValueError("the caps on held requests must be at least 1")
        self.per_token = per_token
        self.total = total
        self._lock = threading.Lock()
        self._held: Counter[int] = Counter()
        self._in_use = 0

    @property
    def in_use(self) -> int:
        """Held requests open now."""
        with self._lock:
            return self._in_use

    def held_by(self, holder: int) -> int:
        """Held requests token ``holder`` has open now."""
        with self._lock:
            return self._held[holder]

    def acquire(self, holder: int) -> Hold:
        """A place for token ``holder``, or ``HTTPException`` 429 when a cap is reached."""
        with self._lock:
            if self._held[holder] >= self.per_token:
                raise _refused(
                    f"this token already holds {self.per_token} long-polls or event streams, "
                    f"the most one token may hold at once: close one, or retry in "
                    f"{RETRY_AFTER_S} s"
                )
            if self._in_use >= self.total:
                raise _refused(
                    f"the server already holds {self.total} long-polls or event streams, "
                    f"the most it keeps open at once: retry in {RETRY_AFTER_S} s"
                )
            self._held[holder] += 1
            self._in_use += 1
        return Hold(self, holder)

    @contextmanager
    def holding(self, holder: int) -> Iterator[Hold]:
        """A place for the length of a ``with`` block."""
        hold = self.acquire(holder)
        try:
            yield hold
        finally:
            hold.release()

    def _give_back(self, holder: int) -> None:
        with self._lock:
            self._held[holder] -= 1
            if self._held[holder] <= 0:
                del self._held[holder]
            self._in_use -= 1


def _refused(message: str) -> HTTPException:
    return HTTPException(429, message, headers={"Retry-After": str(RETRY_AFTER_S)})


def long_waits_of(app: FastAPI) -> LongWaits:
    """The app's caps: set on ``app.state.long_waits``, else made from ``[server]`` settings."""

    def make() -> LongWaits:
        served: Services = app.state.services
        server = served.settings.server
        return LongWaits(server.long_waits_per_token, server.long_waits_total)

    return made_once(app, "long_waits", LongWaits, make)


class _HeldStream(StreamingResponse):
    """A streamed response that gives its hold back when sending ends, however it ends."""

    def __init__(self, hold: Hold, content: AsyncIterator[str], **options: Any) -> None:
        super().__init__(content, **options)
        self._hold = hold

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._hold.release()


def held_stream(
    app: FastAPI,
    holder: int,
    content: AsyncIterator[str],
    *,
    media_type: str = "text/event-stream",
    headers: dict[str, str] | None = None,
) -> StreamingResponse:
    """Stream ``content`` under a hold of token ``holder`` (429 at once past a cap)."""
    hold = long_waits_of(app).acquire(holder)
    return _HeldStream(hold, content, media_type=media_type, headers=headers)


def sse_event(event: str, data: str, ident: str | int | None = None) -> str:
    """One server-sent event: every line of ``data`` its own ``data:`` line (a line break
    of any kind ends a line), with its ``id`` when given."""
    text = data.replace("\r\n", "\n").replace("\r", "\n")
    lines = "".join(f"data: {line}\n" for line in text.split("\n"))
    head = "" if ident is None else f"id: {ident}\n"
    return f"{head}event: {event}\n{lines}\n"
