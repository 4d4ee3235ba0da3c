"""How a tool reaches the API, and how an API refusal becomes a tool error.

A tool asks its :class:`Link` for the SDK's client of this call
(:meth:`Link.open`): over stdio the one client of the configured server, over
HTTP a client of the serving app that carries the caller's own token. A
:class:`~watchkeeper.errors.ClientError` (the API refused, or no server answers)
becomes a :class:`~mcp.server.mcpserver.exceptions.ToolError`: the model reads
the API's own reason, and nothing was done.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import anyio.to_thread
from anyio import CapacityLimiter
from anyio.lowlevel import RunVar
from mcp.server.mcpserver.exceptions import ToolError

from watchkeeper.errors import ClientError

if TYPE_CHECKING:
    from mcp.server.mcpserver import Context

    from watchkeeper.client import Client

T = TypeVar("T")
#: API calls the tools may have under way at once (more wait for a place, in the MCP layer).
CALLS_AT_ONCE = 64
#: The threads of the tools' API calls, one pool per event loop: never the pool the app's own
#: routes answer on. Over ``/mcp`` a call waits on its thread for a route of the same app;
#: were that thread the routes', agents holding long waits would leave every route (theirs
#: included) waiting for a thread, for good.
_CALLS: RunVar[CapacityLimiter] = RunVar("watchkeeper_mcp_calls")


@dataclass(frozen=True)
class Link:
    """What the tools of one MCP server call the API through."""

    #: The SDK's client for one call, made from that call's context (its headers over HTTP).
    open: Callable[[Context], AbstractContextManager[Client]]
    #: The agent session a run or a park belongs to when a call names none
    #: (``WATCHKEEPER_SESSION_ID`` of the stdio server's environment).
    session: str | None = None


async def ask(link: Link, ctx: Context, call: Callable[[Client], T]) -> T:
    """``call`` with this tool call's client (see :func:`call_api`); an API refusal is a tool
    error with its reason."""
    try:
        return await call_api(link, ctx, call)
    except ClientError as exc:
        raise ToolError(str(exc)) from None


async def call_api(link: Link, ctx: Context, call: Callable[[Client], T]) -> T:
    """``call`` with this tool call's client, on a thread of the tools' own pool; a refusal
    raises the SDK's :class:`~watchkeeper.errors.ClientError`."""
    return await anyio.to_thread.run_sync(partial(_call, link, ctx, call), limiter=_calls())


def _calls() -> CapacityLimiter:
    """The tools' pool of threads on the running event loop, made on its first call."""
    try:
        return _CALLS.get()
    except LookupError:
        made = CapacityLimiter(CALLS_AT_ONCE)
        _CALLS.set(made)
        return made


def _call(link: Link, ctx: Context, call: Callable[[Client], T]) -> T:
    with link.open(ctx) as client:
        return call(client)


def session_of(link: Link, session: str | None) -> str | None:
    """The session a call names, else the link's own."""
    return session or link.session


def need_session(link: Link, session: str | None) -> str:
    """The session a park belongs to: the call's, else the link's, else a tool error."""
    found = session_of(link, session)
    if not found:
        raise ToolError(
            "no session named: pass session (the agent session that parks), or start "
            "`watchkeeper mcp` with WATCHKEEPER_SESSION_ID in its environment"
        )
    return found


def present(**fields: Any) -> dict[str, Any]:
    """The fields that were given: an argument left out is not sent."""
    return {name: value for name, value in fields.items() if value is not None}
