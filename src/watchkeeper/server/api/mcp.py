"""``/mcp``: watchkeeper's tools over MCP's streamable HTTP, for agents that connect to ``serve``.

The route takes a bearer token as every API route does (any role: each tool's API
call checks the role it needs), then hands the request to the MCP SDK's session
manager, stateless and answering in JSON: each request stands alone, so any
replica answers it. Its tools call this app's own API in process with the
caller's token (:mod:`watchkeeper.mcp.in_process`).

The SDK is loaded, and its server built, on the first request to ``/mcp``, off
the event loop: a server nobody asks over MCP starts as fast as before.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskGroup, TaskStatus
from fastapi import Depends, FastAPI, Request, Response
from starlette.types import Receive, Scope, Send

from watchkeeper.server.http.auth import viewer

if TYPE_CHECKING:
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

PATH = "/mcp"
Handle = Callable[[Scope, Receive, Send], Awaitable[None]]


class McpEndpoint:
    """The MCP server of one app: built on first use, run for as long as the app is served."""

    def __init__(self, app: FastAPI) -> None:
        self._app = app
        self._group: TaskGroup | None = None
        self._handle: Handle | None = None
        self._starting = asyncio.Lock()

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[None]:
        """While the app is served: the task group the session manager runs in."""
        async with anyio.create_task_group() as group:
            self._group = group
            try:
                yield
            finally:
                self._group = None
                group.cancel_scope.cancel()

    async def handle(self) -> Handle:
        """The session manager's request handler, started on the first call."""
        if self._handle is None:
            async with self._starting:
                if self._handle is None:
                    self._handle = await self._start()
        return self._handle

    async def _start(self) -> Handle:
        if self._group is None:
            raise RuntimeError("the app is not being served: /mcp runs within its lifespan")
        manager = await asyncio.to_thread(_manager, self._app)

        async def run(*, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
            async with manager.run():
                task_status.started()
                await anyio.sleep_forever()

        await self._group.start(run)
        return manager.handle_request


def _manager(app: FastAPI) -> StreamableHTTPSessionManager:
    """The MCP server of ``app``, its tools calling the app in process; its session manager."""
    from watchkeeper.mcp.build import build
    from watchkeeper.mcp.in_process import CallerLink
    from watchkeeper.mcp.link import Link

    server = build(Link(open=CallerLink(app).open))
    server.streamable_http_app(stateless_http=True, json_response=True)
    return server.session_manager


class _HandedOn(Response):
    """The answer is the MCP handler's own: it reads the request and sends the response."""

    def __init__(self, handle: Handle) -> None:
        super().__init__()
        self._handle = handle

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._handle(scope, receive, send)


def install(app: FastAPI) -> None:
    """Serve MCP at ``/mcp`` on ``app``, its session manager running within the app's lifespan."""
    endpoint = McpEndpoint(app)

    async def mcp(_request: Request) -> Response:
        return _HandedOn(await endpoint.handle())

    app.add_api_route(
        PATH,
        mcp,
        methods=["GET", "POST", "DELETE"],
        dependencies=[Depends(viewer)],
        include_in_schema=False,
    )
    served = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(served_app: Any) -> AsyncIterator[Any]:
        async with served(served_app) as state, endpoint.serving():
            yield state

    app.router.lifespan_context = lifespan
