"""Refuse oversized request bodies before they are read into memory.

A body declared too large (``Content-Length``) is refused before it is read.
A body without a length (chunked) is counted as it arrives; once it passes the
limit, reading stops and the answer is the 413, whatever the app made of the
cut-off body meanwhile (FastAPI turns any failure while reading a body into
its own 400, which is why the app's answer is replaced rather than trusted).
The rest of a refused body is read and dropped before the 413 goes out (up to
:data:`DRAIN_MAX_BYTES`, for at most :data:`DRAIN_S`): bytes a client is still
sending after the answer would be taken for its next request, or make the
socket close with unread data, which a client sees as a reset instead of the
413. A client that asked ``Expect: 100-continue`` has sent no body: nothing
to drain.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import anyio
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from watchkeeper.errors import WatchkeeperError

MAX_BODY_BYTES = 256 * 1024
#: Most of a refused body read and dropped so the client can read the 413.
DRAIN_MAX_BYTES = 32 * 1024 * 1024
#: Longest the server spends dropping a refused body, in seconds.
DRAIN_S = 10.0


@dataclass
class _Body:
    received: int = 0
    exceeded: bool = False
    answered: bool = False


class BodyLimit:
    """ASGI middleware: 413 with a JSON error when a body exceeds ``limit`` bytes."""

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        if self._declared_too_large(headers.get("content-length")):
            if "100-continue" not in headers.get("expect", "").lower():
                await _drain(receive, 0)
            await self._refuse(send)
            return
        body = _Body()

        async def counting_receive() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                body.received += len(message.get("body", b""))
                if body.received > self.limit:
                    body.exceeded = True
                    if message.get("more_body", False):
                        await _drain(receive, body.received)
                    raise _TooLarge
            return message

        async def guarded_send(message: Message) -> None:
            if body.exceeded and not body.answered:
                return  # the app's answer to a body it could not read; the 413 replaces it
            if message["type"] == "http.response.start":
                body.answered = True
            await send(message)

        try:
            await self.app(scope, counting_receive, guarded_send)
        except Exception:
            # Whatever the app raised once the body was cut off follows from the cut.
            if not body.exceeded or body.answered:
                raise
        if body.exceeded and not body.answered:
            await self._refuse(send)

    def _declared_too_large(self, declared: str | None) -> bool:
        if declared is None or not declared.isascii() or not declared.isdecimal():
            return False
        # A length of more digits than the limit has is over it (and int() of thousands of
        # digits is refused by Python itself).
        return len(declared) > len(str(self.limit)) or int(declared) > self.limit

    async def _refuse(self, send: Send) -> None:
        body = json.dumps(
            {
                "error": {
                    "code": "too_large",
                    "message": f"the request body is larger than {self.limit} bytes; send less",
                }
            }
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


async def _drain(receive: Receive, received: int) -> None:
    """Read and drop the rest of a request body, within the drain's bounds."""
    with anyio.move_on_after(DRAIN_S):
        while received <= DRAIN_MAX_BYTES:
            message = await receive()
            if message["type"] != "http.request":
                return
            received += len(message.get("body", b""))
            if not message.get("more_body", False):
                return


class _TooLarge(WatchkeeperError):
    """The body went past the limit while the app read it; the middleware answers 413."""

    http_status = 413
    code = "too_large"
