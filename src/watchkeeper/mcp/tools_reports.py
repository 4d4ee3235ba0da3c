"""Tools an agent reports its own run with: start, progress, finish, fail.

The run is a push run of a kind that takes reports (``chat_turn``, ``swarm_task``,
``research_session`` ... or one of the configuration's ``push`` kinds), judged
stalled when its progress stops for the kind's budget. Progress reported here is
the agent's own word: it keeps its run from looking stalled, and never resets a
parked session's wake breaker (only what the engine sees the watched run do does).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations
from pydantic import Field

from watchkeeper.mcp.durations import DURATION_HELP, seconds
from watchkeeper.mcp.link import Link, ask

REPORT = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)

Kind = Annotated[
    str, Field(description="the kind of work, e.g. chat_turn, swarm_task, research_session")
]
RunId = Annotated[str, Field(description="the run's id, as report_start returned it")]
Step = Annotated[str | None, Field(description="what was just done, in a few words")]


def add(server: MCPServer, link: Link) -> None:
    """Register the report tools on ``server``, calling the API through ``link``."""

    @server.tool(annotations=REPORT)
    async def report_start(
        ctx: Context,
        kind: Kind,
        title: Annotated[str, Field(min_length=1, description="what the run does")],
        run_id: Annotated[
            str | None, Field(description="your own id for the run (default: one is made)")
        ] = None,
        budget: Annotated[
            str | float | None,
            Field(description=f"stalled when no progress for this long: {DURATION_HELP}"),
        ] = None,
        expected: Annotated[
            str | float | None, Field(description=f"slow past this long: {DURATION_HELP}")
        ] = None,
        origin: Annotated[
            dict[str, str] | None,
            Field(description="where it started, for its card: platform, chat_id, thread_id"),
        ] = None,
        effects: Annotated[
            Literal["none", "unknown"],
            Field(description="none: changes nothing outside watchkeeper's reach"),
        ] = "unknown",
    ) -> dict[str, Any]:
        """Say your own run started; returns it with its run_id for the other reports."""
        options: dict[str, Any] = {
            "run_id": run_id,
            "origin": origin,
            "effects": effects,
            "budget_s": seconds(budget, "budget"),
            "expected_s": seconds(expected, "expected"),
        }
        return await ask(link, ctx, lambda client: client.start(kind, title, **options))

    @server.tool(annotations=REPORT)
    async def report_progress(
        ctx: Context, kind: Kind, run_id: RunId, step: Step = None
    ) -> dict[str, Any]:
        """Say your run moved (a step done); it resets no wake breaker of a parked session."""
        return await ask(link, ctx, lambda client: client.progress(kind, run_id, step))

    @server.tool(annotations=REPORT)
    async def report_finish(
        ctx: Context, kind: Kind, run_id: RunId, step: Step = None
    ) -> dict[str, Any]:
        """Say your run succeeded."""
        return await ask(link, ctx, lambda client: client.finish(kind, run_id, step))

    @server.tool(annotations=REPORT)
    async def report_fail(
        ctx: Context,
        kind: Kind,
        run_id: RunId,
        reason: Annotated[str, Field(min_length=1, description="why it failed, in one line")],
        detail: Annotated[str | None, Field(description="more about the failure")] = None,
        fingerprint: Annotated[
            str | None, Field(description="what makes two failures the same one")
        ] = None,
    ) -> dict[str, Any]:
        """Say your run failed, and why."""
        return await ask(
            link,
            ctx,
            lambda client: client.fail(
                kind, run_id, reason, fingerprint=fingerprint, detail=detail
            ),
        )
