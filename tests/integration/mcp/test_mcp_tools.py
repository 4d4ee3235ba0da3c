"""Every tool, over both transports, against a real server: the answers are the API's own.

Each test calls a tool with the MCP SDK's own client (``watchkeeper mcp`` on stdio,
or ``/mcp`` over streamable HTTP) and reads the same thing back through the
Python SDK over the API: same run ids, same fields.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import Client as McpClient
from mcp.client.streamable_http import streamable_http_client

from watchkeeper import Client

from ...support.live_server import LiveServer
from ...support.mcp_client import stdio_params, structured, text_of
from .conftest import agent

#: Every tool the issue asks for, and no other.
TOOLS = {
    "run",
    "status",
    "logs",
    "wait",
    "abort",
    "park",
    "parked",
    "report_start",
    "report_progress",
    "report_finish",
    "report_fail",
    "runs",
    "show",
    "submit_job",
    "job",
    "incidents",
    "decide",
}


def api(server: LiveServer, role: str = "admin") -> Client:
    """The Python SDK over the API, with a token of ``role``."""
    return Client(server.url, server.tokens[role])


def test_every_tool_is_listed_with_a_schema_and_one_line_to_act_on(
    served: LiveServer, transport: str
) -> None:
    with agent(served, transport) as session:
        tools = session.tools()
    assert set(tools) == TOOLS
    for name, tool in tools.items():
        description = tool.description or ""
        assert description and "\n" not in description.strip(), name
        assert tool.input_schema["type"] == "object", name
    assert tools["run"].input_schema["required"] == ["command"]
    assert set(tools["park"].input_schema["required"]) == {"until", "reason"}


def test_process_tools_answer_as_the_api_does(
    served: LiveServer, transport: str, tmp_path: Path
) -> None:
    with agent(served, transport) as session, api(served) as sdk:
        started = session.answer(
            "run",
            {
                "command": ["sh", "-c", "echo built"],
                "cwd": str(tmp_path),
                "name": "build",
                "budget": "10m",
                "timeout": "1h",
                "session": "s-1",
            },
        )
        run_id = started["id"]
        assert set(started) == set(sdk.procs.get(run_id))
        ended = session.answer("wait", {"run_id": run_id, "timeout": "30s"})
        assert ended["status"] == "succeeded"
        assert ended == sdk.procs.get(run_id)
        assert (ended["budget_s"], ended["timeout_s"], ended["session"]) == (600, 3600, "s-1")
        assert session.answer("status", {"run_id": run_id}) == sdk.procs.get(run_id)

        logs = session.answer("logs", {"run_id": run_id})
        assert logs == sdk.request("GET", f"/api/v1/procs/{run_id}/log?tail_bytes=16384")
        assert logs["text"] == "built\n"
        assert session.read(f"watchkeeper://procs/{run_id}/log") == "built\n"

        parked = session.answer(
            "park", {"until": run_id, "reason": "waiting on the build", "session": "s-1"}
        )
        shown = session.answer("parked")
        assert shown == {"parks": sdk.procs.parked()}
        assert [park["id"] for park in shown["parks"]] == [parked["id"]]

        sleeper = session.answer("run", {"command": ["sleep", "60"], "cwd": str(tmp_path)})
        aborted = session.answer("abort", {"run_id": sleeper["id"], "grace": "2s"})
        assert aborted["outcome"] == "signaled"
        assert aborted["run"]["id"] == sleeper["id"]
        assert sdk.procs.get(sleeper["id"])["status"] == "cancelled"


def test_run_in_the_foreground_answers_with_the_ended_run(
    served: LiveServer, transport: str, tmp_path: Path
) -> None:
    with agent(served, transport) as session, api(served) as sdk:
        done = session.answer(
            "run", {"command": ["sh", "-c", "exit 3"], "cwd": str(tmp_path), "detach": False}
        )
        assert (done["status"], done["exit_code"]) == ("failed", 3)
        assert done == sdk.procs.get(done["id"])


def test_report_tools_and_incidents_answer_as_the_api_does(
    served: LiveServer, transport: str
) -> None:
    with agent(served, transport) as session, api(served) as sdk:
        started = session.answer(
            "report_start", {"kind": "chat_turn", "title": "answer the ticket", "budget": "5m"}
        )
        run_id = started["run_id"]
        assert started["budget_s"] == 300
        moved = session.answer(
            "report_progress", {"kind": "chat_turn", "run_id": run_id, "step": "read it"}
        )
        assert moved["step"] == "read it"
        failed = session.answer(
            "report_fail", {"kind": "chat_turn", "run_id": run_id, "reason": "model refused"}
        )
        assert failed["failure"]["reason"] == "model refused"
        shown = session.answer("show", {"kind": "chat_turn", "run_id": run_id})
        assert shown == sdk.get_run("chat_turn", run_id)

        other = session.answer("report_start", {"kind": "crawl", "title": "crawl"})["run_id"]
        finished = session.answer("report_finish", {"kind": "crawl", "run_id": other})
        assert finished["status"] == "succeeded"

        asyncio.run(served.runtime.sweeper.sweep())
        listed = session.answer("runs")
        assert without_time(listed) == without_time(sdk.runs())
        assert [item["run_id"] for item in listed["attention"]] == [run_id]
        incidents = session.answer("incidents", {"status": "open"})
        assert incidents == sdk.incidents.search(limit=50, status="open")
        incident_id = listed["attention"][0]["incident_id"]
        assert [i["id"] for i in incidents["incidents"]] == [incident_id]

        buttons = [b["action"] for b in sdk.incidents.get(incident_id)["buttons"]]
        action = "dismiss" if "dismiss" in buttons else buttons[0]
        decided = session.answer("decide", {"incident_id": incident_id, "action": action})
        assert sdk.incidents.get(incident_id)["decision"]["action"] == action
        assert decided["decision"]["action"] == action


def test_job_tools_answer_as_the_api_does(served: LiveServer, transport: str) -> None:
    with agent(served, transport) as session, api(served) as sdk:
        submitted = session.answer(
            "submit_job",
            {"title": "nightly", "org": "acme", "fleet": "cpu", "command": ["make", "all"]},
        )
        job = session.answer("job", {"job_id": submitted["id"]})
        assert job == sdk.jobs.get(submitted["id"])
        assert job["tasks"][0]["blocked"], "no runner of the fleet: it says why it waits"
        assert "spend" in job and "timeline" in job
        timeline = json.loads(session.read(f"watchkeeper://jobs/{submitted['id']}/timeline"))
        assert timeline == job["timeline"]


def test_a_client_without_structured_output_reads_the_same_answer_as_json(
    served: LiveServer, transport: str
) -> None:
    with agent(served, transport) as session:
        result = session.call("parked")
    assert structured(result) == result.structured_content


def without_time(answer: dict[str, Any]) -> dict[str, Any]:
    """An answer without the moment it was made (two calls are two moments)."""
    return {name: value for name, value in answer.items() if name != "generated_at"}


def test_a_client_of_the_newest_protocol_revision_gets_the_same_answers(
    served: LiveServer, transport: str, tmp_path: Path
) -> None:
    # mcp.Client negotiates the newest revision (2026-07-28, one request per exchange);
    # the tests above speak the initialize handshake of the earlier ones.
    with api(served) as sdk:
        run_id = sdk.procs.start(["true"], cwd=str(tmp_path))["id"]
        sdk.procs.wait(run_id, timeout_s=30)
        expected = sdk.procs.get(run_id)
    token = served.tokens["admin"]

    async def ask() -> tuple[str, dict[str, Any] | None, str]:
        if transport == "http":
            headers = {"Authorization": f"Bearer {token}"}
            async with httpx2.AsyncClient(headers=headers, timeout=120) as http:
                target = streamable_http_client(served.url + "/mcp", http_client=http)
                return await _status_and_refusal(McpClient(target), run_id)
        env = {"WATCHKEEPER_URL": served.url, "WATCHKEEPER_TOKEN": token}
        return await _status_and_refusal(McpClient(stdio_params(env)), run_id)

    version, answer, refusal = anyio.run(ask)
    assert version == "2026-07-28"
    assert answer == expected
    assert "no process run 'p-000000000000'" in refusal


async def _status_and_refusal(
    client: McpClient, run_id: str
) -> tuple[str, dict[str, Any] | None, str]:
    async with client:
        version = str(client.session.protocol_version)
        found = await client.call_tool("status", {"run_id": run_id})
        missing = await client.call_tool("status", {"run_id": "p-000000000000"})
    assert missing.is_error
    return version, found.structured_content, text_of(missing)
