"""Tools for process runs: start one, watch it, wait on it, abort it; park until one ends.

Each is one call of the process API (``/api/v1/procs``) through the SDK, so a
run's id and fields are the API's own. Starting a command and a wake command need
an admin token, parking a reporter's, reading a viewer's: the API says so.
"""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations
from pydantic import Field

from watchkeeper.client.procs import MAX_ASK_S
from watchkeeper.client.wire import segment
from watchkeeper.mcp.durations import DURATION_HELP, bounded, seconds
from watchkeeper.mcp.link import Link, ask, need_session, present, session_of

#: Longest one ``wait`` (or ``run`` with ``detach=false``) holds the call: MCP clients
#: give up on a call that says nothing for long; the agent calls again.
MOST_WAIT_S = 300.0
#: Output ``logs`` answers when the call names no size.
LOG_TAIL_BYTES = 16384

READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)
ACT = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=True)

RunId = Annotated[str, Field(description="the run's id, as run returned it (p-...)")]
Duration = Annotated[str | float | None, Field(description=DURATION_HELP)]


def add(server: MCPServer, link: Link) -> None:
    """Register the process tools on ``server``, calling the API through ``link``."""

    @server.tool(annotations=ACT)
    async def run(
        ctx: Context,
        command: Annotated[
            list[str], Field(min_length=1, description="the command and its arguments, one each")
        ],
        cwd: Annotated[
            str | None,
            Field(description="the folder to run in, on the server's host (default: its own)"),
        ] = None,
        name: Annotated[str | None, Field(description="a name to show for the run")] = None,
        budget: Annotated[
            str | float | None, Field(description=f"stalled when silent this long: {DURATION_HELP}")
        ] = None,
        timeout: Annotated[
            str | float | None, Field(description=f"aborted after this long: {DURATION_HELP}")
        ] = None,
        session: Annotated[str | None, Field(description="the agent session it belongs to")] = None,
        origin: Annotated[
            dict[str, str] | None,
            Field(description="where it started, for its card: platform, chat_id, thread_id"),
        ] = None,
        detach: Annotated[
            bool, Field(description="true: answer at once; false: wait for the end (5 min at most)")
        ] = True,
    ) -> dict[str, Any]:
        """Start a command on the server's host under watchkeeper; returns the run with its id."""
        body = present(
            cwd=cwd,
            name=name,
            budget_s=seconds(budget, "budget"),
            timeout_s=seconds(timeout, "timeout"),
            origin=origin,
            session=session_of(link, session),
        )
        started = await ask(link, ctx, lambda client: client.procs.start(command, **body))
        if detach:
            return started
        return await ask(
            link, ctx, lambda client: client.procs.wait(started["id"], timeout_s=MOST_WAIT_S)
        )

    @server.tool(annotations=READ)
    async def status(ctx: Context, run_id: RunId) -> dict[str, Any]:
        """One run as it is now: status, exit code, pid, when it last moved."""
        return await ask(link, ctx, lambda client: client.procs.get(run_id))

    @server.tool(annotations=READ)
    async def logs(
        ctx: Context,
        run_id: RunId,
        tail_bytes: Annotated[
            int, Field(ge=1, le=4 * 1024 * 1024, description="how much of the end to read")
        ] = LOG_TAIL_BYTES,
    ) -> dict[str, Any]:
        """The end of a run's output, secrets redacted; ended says whether more may come."""
        path = f"/api/v1/procs/{segment(run_id)}/log"
        params = {"tail_bytes": tail_bytes}
        return await ask(
            link, ctx, lambda client: client.request_object("GET", path, params=params)
        )

    @server.tool(annotations=READ)
    async def wait(ctx: Context, run_id: RunId, timeout: Duration = None) -> dict[str, Any]:
        """Wait until a run ends, 30 s by default and 5 min at most; returns the run either way."""
        left = bounded(timeout, "timeout", MAX_ASK_S, MOST_WAIT_S)
        return await ask(link, ctx, lambda client: client.procs.wait(run_id, timeout_s=left))

    @server.tool(annotations=ToolAnnotations(destructive_hint=True, open_world_hint=True))
    async def abort(
        ctx: Context,
        run_id: RunId,
        grace: Annotated[
            str | float | None,
            Field(description=f"time between SIGTERM and SIGKILL (default 5s): {DURATION_HELP}"),
        ] = None,
    ) -> dict[str, Any]:
        """End a run: SIGTERM its process group, SIGKILL after the grace; never what is not ours."""
        grace_s = seconds(grace, "grace")
        return await ask(link, ctx, lambda client: client.procs.abort(run_id, grace_s=grace_s))

    @server.tool(annotations=ACT)
    async def park(
        ctx: Context,
        until: Annotated[str, Field(description="the run whose end wakes the session (p-...)")],
        reason: Annotated[str, Field(min_length=1, description="what the session waits for")],
        session: Annotated[str | None, Field(description="the session that parks")] = None,
        wake: Annotated[
            str | None,
            Field(description="a shell command the server runs when the run ends (admin)"),
        ] = None,
        progress: Annotated[
            str | None,
            Field(description="what the session did since it was last woken (shown only)"),
        ] = None,
    ) -> dict[str, Any]:
        """Hand back until a run ends: the server wakes the session once, with the run's result."""
        body = {"session": need_session(link, session), "until": until, "reason": reason}
        return await ask(
            link, ctx, lambda client: client.procs.park(**body, wake_cmd=wake, progress=progress)
        )

    @server.tool(annotations=READ)
    async def parked(ctx: Context) -> dict[str, Any]:
        """Parked sessions: what each waits on, whether it woke, and its wake breaker."""
        return await ask(link, ctx, lambda client: {"parks": client.procs.parked()})
