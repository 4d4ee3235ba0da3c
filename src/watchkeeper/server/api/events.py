"""``GET /api/v1/events``: server-sent events of the queue, from an in-process broadcaster.

Each event is ``event: <type>`` with ``data:`` one JSON object. ``task.updated``
carries the task's API form under ``task``. A client merges an event into the
task it holds: keys the event carries replace the old ones, keys it leaves out
keep their old values. In particular an event without ``interrupted`` keeps the
task's interrupted marker; only ``interrupted: false`` clears it.

``incidents.changed`` (data ``{"type": "incidents.changed"}``) says an
incident or its history changed, on this replica or another (PostgreSQL's
notifications reach every replica: :func:`wake_streams`); a client reads the
incidents again. Clients that know only ``task.updated`` ignore it.

The broadcaster lives in this process: a second server process has its own.
Publishing never blocks; a subscriber whose inbox is full loses the event.

A stopping server ends every stream at once (:func:`stop_streams`): the
server waits for open responses before it exits, and a client reconnects
(to another replica, or to this one once it is back).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, TypeVar

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import StreamingResponse

from watchkeeper.access.tokens import TokenInfo
from watchkeeper.server.api.runs import ERRORS
from watchkeeper.server.deps import made_once
from watchkeeper.server.http.auth import viewer
from watchkeeper.server.http.longpoll import held_stream

router = APIRouter(tags=["events"], responses=ERRORS)
#: How often an idle stream sends a keep-alive comment, in seconds.
KEEP_ALIVE_S = 15.0
#: How long one stream lasts before the client reconnects.
STREAM_S = 300.0
INBOX_SIZE = 1000
#: How a stream of server-sent events is answered: never cached, never buffered by a proxy.
SSE_HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
KEEP_ALIVE = ": keep-alive\n\n"
T = TypeVar("T")


@dataclass(frozen=True, eq=False)
class _Subscriber:
    loop: asyncio.AbstractEventLoop
    inbox: asyncio.Queue[tuple[str, str]]


class Broadcaster:
    """Fans events out to every open stream; safe to publish from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._subscribers: set[_Subscriber] = set()

    def subscribe(self) -> _Subscriber:
        """A new inbox on the running event loop."""
        subscriber = _Subscriber(asyncio.get_running_loop(), asyncio.Queue(INBOX_SIZE))
        with self._lock:
            self._subscribers.add(subscriber)
        return subscriber

    def leave(self, subscriber: _Subscriber) -> None:
        with self._lock:
            self._subscribers.discard(subscriber)

    @property
    def listeners(self) -> int:
        with self._lock:
            return len(self._subscribers)

    def publish(self, event: str, data: dict[str, Any]) -> None:
        """Send ``event`` to every subscriber (from a worker thread or the loop)."""
        item = (event, json.dumps(data, separators=(",", ":")))
        with self._lock:
            subscribers = list(self._subscribers)
        for subscriber in subscribers:
            try:
                subscriber.loop.call_soon_threadsafe(_offer, subscriber.inbox, item)
            except RuntimeError:  # its loop closed: the stream is gone
                self.leave(subscriber)


def _offer(inbox: asyncio.Queue[tuple[str, str]], item: tuple[str, str]) -> None:
    if not inbox.full():
        inbox.put_nowait(item)


def broadcaster_of(app: FastAPI) -> Broadcaster:
    """The app's broadcaster, made on first use."""
    return made_once(app, "events", Broadcaster, Broadcaster)


def stopping_of(app: FastAPI) -> asyncio.Event:
    """Set once the server serving ``app`` stops: every stream of the app ends then."""
    return made_once(app, "stopping", asyncio.Event, asyncio.Event)


def stop_streams(app: FastAPI) -> None:
    """End every open stream of ``app`` (call it on the event loop, as the server stops)."""
    stopping_of(app).set()


async def relay(
    request: Request, inbox: asyncio.Queue[T], lasts_s: float, quiet_s: float
) -> AsyncIterator[T | None]:
    """What arrives in ``inbox`` until the client leaves, the server stops
    (:func:`stop_streams`) or ``lasts_s`` has passed.

    ``None`` after every ``quiet_s`` without an arrival: the stream's cue for a keep-alive.
    """
    loop = asyncio.get_running_loop()
    ends_at = loop.time() + lasts_s
    stopping = asyncio.ensure_future(stopping_of(request.app).wait())
    # One pending get at a time, kept across keep-alives, so an arrival is never dropped.
    arrival: asyncio.Future[T] | None = None
    try:
        while not stopping.done() and loop.time() < ends_at:
            if await request.is_disconnected():
                return
            if arrival is None:
                arrival = asyncio.ensure_future(inbox.get())
            racing: set[asyncio.Future[Any]] = {arrival, stopping}
            done, _ = await asyncio.wait(
                racing, timeout=quiet_s, return_when=asyncio.FIRST_COMPLETED
            )
            if arrival in done:
                item, arrival = arrival.result(), None
                yield item
            elif not done:
                yield None
    finally:
        stopping.cancel()
        if arrival is not None:
            arrival.cancel()


def publish_task_updated(app: FastAPI, task: dict[str, Any]) -> None:
    """Publish ``task.updated`` with the task's API form."""
    broadcaster_of(app).publish("task.updated", {"type": "task.updated", "task": task})


@router.get("/api/v1/events")
async def events(request: Request, token: TokenInfo = Depends(viewer)) -> StreamingResponse:
    """Server-sent events: ``task.updated`` (a task's API form; merge by key) and
    ``incidents.changed`` (read the incidents again).

    A stream counts against the token's and the server's caps on held requests.
    """
    broadcaster = broadcaster_of(request.app)

    async def stream() -> AsyncIterator[str]:
        # Subscribed before the first line: a client that read it misses nothing after.
        subscriber = broadcaster.subscribe()
        try:
            yield "retry: 1000\n\n: subscribed\n\n"
            async for item in relay(request, subscriber.inbox, STREAM_S, KEEP_ALIVE_S):
                yield KEEP_ALIVE if item is None else f"event: {item[0]}\ndata: {item[1]}\n\n"
        finally:
            broadcaster.leave(subscriber)

    return held_stream(request.app, token.id, stream(), headers=SSE_HEADERS)


def wake_streams(app: FastAPI) -> None:
    """Tell every open stream of ``app`` that incidents changed, here or on another replica.

    Safe from any thread: the database's notification listener calls it.
    """
    broadcaster_of(app).publish("incidents.changed", {"type": "incidents.changed"})
