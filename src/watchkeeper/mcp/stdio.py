"""``watchkeeper mcp``: an MCP server on standard input and output, for the agent that starts it.

Its tools call the configured server's API through the SDK (``WATCHKEEPER_URL``
and ``WATCHKEEPER_TOKEN``, or the configuration's ``[server]`` table, or the
default URL), as the command line does. When no server answers, each call is a
tool error that says where it looked and how to point elsewhere; nothing is
started or recorded anywhere else. The SDK's HTTP client is made on the first
call, so the server answers ``initialize`` without loading it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from watchkeeper.paths import SESSION_ENV

if TYPE_CHECKING:
    from anyio import AsyncFile
    from mcp.server.mcpserver import Context, MCPServer

    from watchkeeper.client import Client


class OneClient:
    """The SDK's client of one server, made on first use and shared by every call."""

    def __init__(self, url: str, source: str, token: str | None) -> None:
        self._where = (url, source, token)
        self._client: Client | None = None
        self._making = threading.Lock()

    @contextmanager
    def open(self, _ctx: Context) -> Iterator[Client]:
        """The client (its calls run on the tools' worker threads: httpx's pool is shared)."""
        with self._making:
            if self._client is None:
                from watchkeeper.client.locate import cli_client

                self._client = cli_client(*self._where)
        yield self._client

    def close(self) -> None:
        """Close the connection pool, if a call opened one."""
        if self._client is not None:
            self._client.close()


def serve(
    url: str,
    source: str,
    token: str | None,
    *,
    replay: Sequence[bytes] = (),
    drop: Sequence[Any] = (),
) -> None:
    """Serve MCP on stdin and stdout until the agent closes them, calling the server at ``url``
    (found from ``source``) with ``token``.

    Taking over a session whose opening was answered without the SDK
    (:mod:`watchkeeper.mcp.opening`), the server reads ``replay`` first and does not write
    its answers to the requests ``drop`` names: the agent has them already.
    """
    import logging

    from watchkeeper import logsafety
    from watchkeeper.mcp.build import build
    from watchkeeper.mcp.link import Link

    # Stderr is the agent client's log of this server: warnings only, nothing secret.
    logsafety.install(logging.WARNING)
    calls = OneClient(url, source, token)
    server = build(Link(open=calls.open, session=os.environ.get(SESSION_ENV) or None))
    try:
        if replay:
            import anyio

            anyio.run(_take_over, server, replay, drop)
        else:
            server.run("stdio")
    finally:
        calls.close()


async def _take_over(server: MCPServer, replay: Sequence[bytes], drop: Sequence[Any]) -> None:
    """:meth:`MCPServer.run_stdio_async`, reading ``replay`` before stdin."""
    import io
    import sys

    import anyio
    from mcp.server.stdio import stdio_server

    # The same buffered stdin the opening read from: what it read ahead is still there.
    stdin = anyio.wrap_file(io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace"))
    stdout = anyio.wrap_file(io.TextIOWrapper(sys.stdout.buffer, encoding="utf-8"))
    lines = _Replayed([line.decode("utf-8", "replace") for line in replay], stdin)
    answers = _Dropping(stdout, list(drop))
    async with stdio_server(lines, answers) as (read_stream, write_stream):  # type: ignore[arg-type]
        # The SDK's own stdio runner does exactly this, with the process's streams.
        lowlevel = server._lowlevel_server
        await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())


class _Replayed:
    """Lines already read by the opening, then the rest of stdin."""

    def __init__(self, first: list[str], rest: AsyncFile[str]) -> None:
        self._first = first
        self._rest = rest

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        for line in self._first:
            yield line
        async for line in self._rest:
            yield line


class _Dropping:
    """Stdout, less the SDK's answers to requests the opening answered already."""

    def __init__(self, stdout: AsyncFile[str], drop: list[Any]) -> None:
        self._stdout = stdout
        self._drop = drop

    async def write(self, text: str) -> None:
        """Write ``text`` (one message and its newline) unless it answers a dropped id."""
        if self._drop:
            import json

            message = json.loads(text)
            if "method" not in message and message.get("id") in self._drop:
                self._drop.remove(message["id"])
                return
        await self._stdout.write(text)

    async def flush(self) -> None:
        """Flush stdout."""
        await self._stdout.flush()
