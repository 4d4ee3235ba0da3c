"""Drive a watchkeeper MCP server with the MCP SDK's own client, from a synchronous test.

:func:`over_stdio` starts the real ``watchkeeper mcp`` command as an agent client
would (``stdio_client``); :func:`over_http` connects to a served ``/mcp``
(``streamable_http_client``) with a bearer token. Either yields an
:class:`McpSession` whose calls block until the server answers.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from typing import Any

import httpx2
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult

from .cli import cli_env

Streams = Callable[[], AbstractAsyncContextManager[Any]]


class McpSession:
    """One initialized MCP client session, called from the test's thread."""

    def __init__(self, portal: BlockingPortal, session: ClientSession) -> None:
        self._portal = portal
        self.session = session

    def tools(self) -> dict[str, Any]:
        """Every tool the server lists, by name."""
        listed = self._portal.call(self.session.list_tools)
        return {tool.name: tool for tool in listed.tools}

    def call(self, name: str, arguments: dict[str, Any] | None = None) -> CallToolResult:
        """Call tool ``name``: its result, an error result included."""
        return self._portal.call(self.session.call_tool, name, arguments or {})

    def answer(self, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        """Call tool ``name`` and return its structured answer; a tool error fails the test."""
        result = self.call(name, arguments)
        assert not result.is_error, f"{name} failed: {text_of(result)}"
        assert isinstance(result.structured_content, dict)
        return result.structured_content

    def error(self, name: str, arguments: dict[str, Any] | None = None) -> str:
        """Call tool ``name``, which must fail; the error's text."""
        result = self.call(name, arguments)
        assert result.is_error, f"{name} did not fail: {result.structured_content}"
        return text_of(result)

    def read(self, uri: str) -> str:
        """The text of resource ``uri``."""
        read = self._portal.call(self.session.read_resource, uri)
        return "".join(getattr(part, "text", "") for part in read.contents)


def text_of(result: CallToolResult) -> str:
    """The text of a tool result."""
    return "".join(getattr(part, "text", "") for part in result.content)


def structured(result: CallToolResult) -> dict[str, Any]:
    """A result's JSON text, read back (what a client without structured output sees)."""
    loaded: dict[str, Any] = json.loads(text_of(result))
    return loaded


@asynccontextmanager
async def _session(streams: Streams) -> AsyncIterator[ClientSession]:
    async with streams() as opened:
        read, write = opened[0], opened[1]
        async with ClientSession(read, write) as session:
            await session.initialize()
            yield session


@contextmanager
def _driven(streams: Streams) -> Iterator[McpSession]:
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(_session(streams)) as session,
    ):
        yield McpSession(portal, session)


def stdio_params(env: dict[str, str], *args: str) -> StdioServerParameters:
    """``watchkeeper mcp`` as an agent client's configuration starts it."""
    return StdioServerParameters(
        command=sys.executable, args=["-m", "watchkeeper", "mcp", *args], env=cli_env(env)
    )


@contextmanager
def over_stdio(env: dict[str, str], *args: str) -> Iterator[McpSession]:
    """A session with a real ``watchkeeper mcp`` subprocess started with ``env`` and ``args``."""
    params = stdio_params(env, *args)
    with _driven(lambda: stdio_client(params)) as session:
        yield session


@contextmanager
def over_http(url: str, token: str | None) -> Iterator[McpSession]:
    """A session with the ``/mcp`` of the server at ``url``, sending ``token``."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}

    @asynccontextmanager
    async def streams() -> AsyncIterator[Any]:
        async with (
            httpx2.AsyncClient(headers=headers, timeout=120) as http,
            streamable_http_client(url + "/mcp", http_client=http) as opened,
        ):
            yield opened

    with _driven(streams) as session:
        yield session
