"""Tools that read what needs attention and act on it: runs, one run, jobs, incidents.

``submit_job`` and ``decide`` need an admin token, the readings a viewer's; the API
says so, and refuses before anything is done.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations
from pydantic import Field

from watchkeeper.mcp.durations import DURATION_HELP, seconds
from watchkeeper.mcp.link import Link, ask, present

READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)
ACT = ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=True)


def add(server: MCPServer, link: Link) -> None:
    """Register the reading and deciding tools on ``server``, calling the API through ``link``."""

    @server.tool(annotations=READ)
    async def runs(
        ctx: Context,
        all: Annotated[bool, Field(description="also what finished lately")] = False,
    ) -> dict[str, Any]:
        """What needs attention (stalled, stuck, failed) and what runs, of every kind."""
        return await ask(link, ctx, lambda client: client.runs(all=all))

    @server.tool(annotations=READ)
    async def show(
        ctx: Context,
        kind: Annotated[str, Field(description="the run's kind, as runs lists it")],
        run_id: Annotated[str, Field(description="the run's id, as runs lists it")],
    ) -> dict[str, Any]:
        """Is this run OK? Its status, verdict, incident, decision and card."""
        return await ask(link, ctx, lambda client: client.get_run(kind, run_id))

    @server.tool(annotations=ACT)
    async def submit_job(
        ctx: Context,
        title: Annotated[str, Field(min_length=1, description="what the job does")],
        org: Annotated[str, Field(description="the organisation it is queued for")],
        fleet: Annotated[str, Field(description="the fleet of runners that may run it")],
        command: Annotated[
            list[str], Field(min_length=1, description="the command and its arguments, one each")
        ],
        rerunnable: Annotated[
            bool, Field(description="false: never run it twice (it has outside effects)")
        ] = True,
        max_attempts: Annotated[int | None, Field(description="tries before it fails")] = None,
        lease: Annotated[
            str | float | None, Field(description=f"a runner's lease on it: {DURATION_HELP}")
        ] = None,
        origin: Annotated[
            str | None,
            Field(description="the pull request or issue it came from: github:OWNER/REPO#N"),
        ] = None,
    ) -> dict[str, Any]:
        """Queue a job for a fleet's runners; returns it with its id, and why it waits if so."""
        options = present(max_attempts=max_attempts, lease_s=seconds(lease, "lease"), origin=origin)
        return await ask(
            link,
            ctx,
            lambda client: client.jobs.submit(
                title, org=org, fleet=fleet, argv=command, rerunnable=rerunnable, **options
            ),
        )

    @server.tool(annotations=READ)
    async def job(
        ctx: Context,
        job_id: Annotated[str, Field(description="the job's id, as submit_job returned it")],
    ) -> dict[str, Any]:
        """One job: its status, each task's blocked reason, its timeline and what it cost."""
        return await ask(link, ctx, lambda client: client.jobs.get(job_id))

    @server.tool(annotations=READ)
    async def incidents(
        ctx: Context,
        status: Annotated[
            Literal["live", "open", "recovered", "resolved"] | None,
            Field(description="only incidents in this state (live: open or recovered)"),
        ] = None,
        limit: Annotated[int, Field(ge=1, le=1000, description="how many, newest first")] = 50,
    ) -> dict[str, Any]:
        """Incidents newest first, each with its run, condition and the buttons it offers."""
        filters = present(status=status)
        return await ask(link, ctx, lambda client: client.incidents.search(limit=limit, **filters))

    @server.tool(annotations=ACT)
    async def decide(
        ctx: Context,
        incident_id: Annotated[int, Field(description="the incident, as incidents lists it")],
        action: Annotated[str, Field(description="one of the incident's buttons, e.g. retry")],
        state_token: Annotated[
            str | None,
            Field(description="the state you decided on (default: the incident's current one)"),
        ] = None,
    ) -> dict[str, Any]:
        """Press one of an incident's buttons (admin token); the first press wins."""
        return await ask(
            link,
            ctx,
            lambda client: client.incidents.decide(incident_id, action, state_token=state_token),
        )
