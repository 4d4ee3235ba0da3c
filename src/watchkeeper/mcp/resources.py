"""Resources an agent can read or attach: a run's log and a job's timeline."""

from __future__ import annotations

import json
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError

from watchkeeper.client.wire import segment
from watchkeeper.errors import ClientError
from watchkeeper.mcp.link import Link, call_api
from watchkeeper.mcp.tools_procs import LOG_TAIL_BYTES

RUN_LOG = "watchkeeper://procs/{run_id}/log"
JOB_TIMELINE = "watchkeeper://jobs/{job_id}/timeline"


def add(server: MCPServer, link: Link) -> None:
    """Register the resources on ``server``, reading the API through ``link``."""

    @server.resource(RUN_LOG, mime_type="text/plain")
    async def run_log(run_id: str, ctx: Context) -> str:
        """The end of a process run's output, secrets redacted."""
        path = f"/api/v1/procs/{segment(run_id)}/log"
        answer = await _read(link, ctx, path, {"tail_bytes": LOG_TAIL_BYTES})
        return str(answer["text"])

    @server.resource(JOB_TIMELINE, mime_type="application/json")
    async def job_timeline(job_id: str, ctx: Context) -> str:
        """What a job did, oldest first: its tasks' events, as JSON."""
        answer = await _read(link, ctx, f"/api/v1/jobs/{segment(job_id)}", None)
        return json.dumps(answer["timeline"])


async def _read(
    link: Link, ctx: Context, path: str, params: dict[str, int] | None
) -> dict[str, Any]:
    """The API's answer to ``GET path``; a refusal is a resource error (a missing one's, for
    404), with the API's reason."""
    try:
        return await call_api(
            link, ctx, lambda client: client.request_object("GET", path, params=params)
        )
    except ClientError as exc:
        if exc.status == 404:
            raise ResourceNotFoundError(str(exc)) from None
        raise ResourceError(str(exc)) from None
