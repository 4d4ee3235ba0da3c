"""The tools of ``/mcp`` call the serving app's own API, in process, with the caller's token.

A tool runs on a worker thread; its SDK client sends each request through
:class:`AppTransport`, which hands it to the app on the event loop (as
``httpx.ASGITransport`` does for an async client) and waits for the answer. So a
call over ``/mcp`` passes the same routes, the same token and role checks and the
same validation as the same call over the API, and reaches no service another way.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import anyio.from_thread
import httpx

if TYPE_CHECKING:
    from mcp.server.mcpserver import Context
    from starlette.types import ASGIApp

    from watchkeeper.client import Client

#: Where the in-process client says it sends (never a network address).
IN_PROCESS_URL = "http://in-process"


class AppTransport(httpx.BaseTransport):
    """Sends a thread's requests to an ASGI app served on the event loop that started it."""

    def __init__(self, app: ASGIApp, client: tuple[str, int]) -> None:
        # The app's exceptions become its 500 answers, as they do for a request from outside.
        self._asgi = httpx.ASGITransport(app=app, raise_app_exceptions=False, client=client)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """Answer ``request`` through the app (from a worker thread the event loop started)."""
        content = request.read()
        status, headers, body = anyio.from_thread.run(self._send, request, content)
        return httpx.Response(status, headers=headers, content=body, request=request)

    async def _send(
        self, request: httpx.Request, content: bytes
    ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        sent = httpx.Request(request.method, request.url, headers=request.headers, content=content)
        response = await self._asgi.handle_async_request(sent)
        body = await response.aread()
        return response.status_code, response.headers.raw, body


class CallerLink:
    """Opens, for each tool call, a client of ``app`` that carries that call's bearer token."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    @contextmanager
    def open(self, ctx: Context) -> Iterator[Client]:
        """A client with the token of the MCP request that made this call."""
        from watchkeeper.client import Client

        request: Any = ctx.request_context.request
        headers = getattr(request, "headers", None) or {}
        token = _bearer(headers.get("authorization", ""))
        if not token:  # the route admits none without one; never fall back to another's
            from mcp.server.mcpserver.exceptions import ToolError

            raise ToolError("the MCP request carried no bearer token")
        peer = getattr(request, "client", None)
        transport = AppTransport(self._app, (peer.host, peer.port) if peer else ("127.0.0.1", 0))
        with Client(IN_PROCESS_URL, token, transport=transport) as client:
            yield client


def _bearer(header: str) -> str:
    """The token of an ``Authorization: Bearer`` header (the route admitted it already)."""
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""
