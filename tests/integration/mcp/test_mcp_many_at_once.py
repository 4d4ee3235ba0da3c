"""Agents' waits over ``/mcp`` never hold the threads the rest of the API answers with.

A tool of ``/mcp`` runs its API call on a thread and waits there for the answer. The
server's own routes answer on threads too; were the tools' threads taken from the
same pool, agents holding ``wait`` calls (each up to 5 minutes, and each pausing
while the server's cap on held requests refuses it) would leave every other request
queued behind them, which the caps on held requests exist to prevent.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx

from watchkeeper import Client
from watchkeeper.server.http.longpoll import PER_TOKEN, long_waits_of

from ...support.live_server import LiveServer
from ...support.waiting import wait_for

#: Waits at once: more than the threads the server's routes share (anyio's default: 40).
AT_ONCE = 48
HELD = "8s"


def mcp_call(number: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """One ``tools/call`` request, standing alone (the endpoint keeps no session)."""
    params = {"name": name, "arguments": arguments}
    return {"jsonrpc": "2.0", "id": number, "method": "tools/call", "params": params}


def test_agents_holding_waits_leave_the_api_answering(served: LiveServer, tmp_path: Path) -> None:
    app = served.server.config.app if served.server else None
    waits = long_waits_of(app)
    with Client(served.url, served.tokens["admin"]) as sdk:
        sleeper = sdk.procs.start(["sleep", "120"], cwd=str(tmp_path))["id"]
    headers = {
        "Authorization": f"Bearer {served.tokens['viewer']}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
    }

    async def scenario() -> tuple[int, int, list[dict[str, Any]]]:
        limits = httpx.Limits(max_connections=AT_ONCE + 1)
        async with httpx.AsyncClient(
            base_url=served.url, headers=headers, limits=limits, timeout=120
        ) as http:
            arguments = {"run_id": sleeper, "timeout": HELD}
            held = [
                asyncio.create_task(http.post("/mcp", json=mcp_call(n, "wait", arguments)))
                for n in range(AT_ONCE)
            ]
            # The token's share of held requests is taken: every other wait is refused and
            # pauses before it asks again, on its tool's thread.
            await asyncio.to_thread(
                wait_for, lambda: waits.in_use >= PER_TOKEN, what="the waits held"
            )
            answered = await http.get(f"/api/v1/procs/{sleeper}")
            still_held = waits.in_use
            done = [(await task).json() for task in held]
        return answered.status_code, still_held, done

    status, still_held, done = asyncio.run(scenario())
    assert status == 200
    # Answered while the agents' waits were still held, not once they had given up.
    assert still_held >= PER_TOKEN
    assert len(done) == AT_ONCE
    # Each wait ends as the API's would: the run as it is after 8 s, or, for a wait the
    # cap kept refusing to the end, the cap's own reason.
    for answer in done:
        result = answer["result"]
        if result.get("isError"):
            assert "the most one token may hold at once" in result["content"][0]["text"]
        else:
            assert result["structuredContent"]["id"] == sleeper
    with Client(served.url, served.tokens["admin"]) as sdk:
        sdk.procs.abort(sleeper, grace_s=1)
