"""A tool call the API refuses is a tool error with the API's reason, and nothing is done:
a token without the role, an unknown run, a bad duration, a command the server will not
start, a server that does not answer."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from watchkeeper import Client

from ...support.live_server import LiveServer, free_port
from ...support.mcp_client import over_stdio
from .conftest import agent


def test_a_viewers_decide_is_a_tool_error_naming_the_role_and_changes_nothing(
    served: LiveServer, transport: str
) -> None:
    with Client(served.url, served.tokens["reporter"]) as reporter:
        reporter.start("crawl", "crawl", run_id="c-1")
        reporter.fail("crawl", "c-1", "blocked by robots.txt")
    asyncio.run(served.runtime.sweeper.sweep())
    with Client(served.url, served.tokens["admin"]) as admin:
        (incident,) = admin.incidents.list()
        before = admin.incidents.get(incident["id"])
        action = before["buttons"][0]["action"]
        with agent(served, transport, role="viewer") as session:
            refused = session.error("decide", {"incident_id": incident["id"], "action": action})
        after = admin.incidents.get(incident["id"])
    # The API's own refusal of a press, word for word: only admins act.
    assert "is not an admin" in refused
    assert "(HTTP 403" in refused
    assert after["decision"] is None
    assert after["state_token"] == before["state_token"]
    # Recorded as the API records every refused press, and nothing more.
    assert before["presses"] == []
    assert [(p["actor"], p["outcome"]) for p in after["presses"]] == [("@test viewer", "refused")]
    assert after["journal"] == before["journal"] == []


def test_a_reporters_run_is_refused_naming_the_role_and_starts_nothing(
    served: LiveServer, transport: str, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    with agent(served, transport, role="reporter") as session:
        refused = session.error("run", {"command": ["touch", str(marker)], "cwd": str(tmp_path)})
        # What a reporter may do, it does: report its own run.
        session.answer("report_start", {"kind": "crawl", "title": "mine"})
    assert "this needs the admin role" in refused
    with Client(served.url, served.tokens["admin"]) as admin:
        assert admin.procs.list(all=True) == []
    assert not marker.exists()


def test_a_viewer_may_read_but_not_report(served: LiveServer, transport: str) -> None:
    with agent(served, transport, role="viewer") as session:
        assert session.answer("runs")["attention"] == []
        refused = session.error("report_start", {"kind": "crawl", "title": "t"})
    assert "this needs the reporter role" in refused


@pytest.mark.parametrize(
    ("tool", "arguments", "reason"),
    [
        ("status", {"run_id": "p-000000000000"}, "no process run 'p-000000000000'"),
        ("wait", {"run_id": "p-1", "timeout": "soon"}, "timeout 'soon' is not a duration"),
        ("run", {"command": ["true"], "budget": "-5m"}, "budget '-5m': must be more than zero"),
        ("run", {"command": ["no-such-program-here"]}, "'no-such-program-here' not found on PATH"),
        ("run", {"command": []}, "command"),
        ("run", {"command": ["true"], "cwd": "/no/such/folder"}, "/no/such/folder does not exist"),
        ("abort", {"run_id": "p-000000000000"}, "no process run 'p-000000000000'"),
        ("report_progress", {"kind": "crawl", "run_id": "never-started"}, "never-started"),
        ("show", {"kind": "no_such_kind", "run_id": "r"}, "no_such_kind"),
        ("job", {"job_id": "j-nope"}, "job_id: String should match pattern"),
        ("decide", {"incident_id": 999999, "action": "retry"}, "999999"),
        ("park", {"until": "p-1", "reason": "wait"}, "no session named"),
        ("incidents", {"status": "sleeping"}, "status"),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_bad_input_is_a_tool_error_with_the_reason(
    served: LiveServer, tool: str, arguments: dict[str, object], reason: str
) -> None:
    with agent(served, "http") as session:
        said = session.error(tool, arguments)
    assert reason in said
    assert "Traceback" not in said
    with Client(served.url, served.tokens["admin"]) as admin:
        assert admin.procs.list(all=True) == []


def test_no_server_answering_is_a_tool_error_saying_where_it_looked() -> None:
    nowhere = f"http://127.0.0.1:{free_port()}"
    with over_stdio({"WATCHKEEPER_URL": nowhere, "WATCHKEEPER_TOKEN": "wk_x"}) as session:
        assert "run" in session.tools()  # it starts and lists its tools all the same
        said = session.error("run", {"command": ["true"]})
        again = session.error("parked")
    assert f"cannot reach watchkeeper at {nowhere} (from WATCHKEEPER_URL)" in said
    assert "watchkeeper serve" in said
    assert again == said.replace("tool run", "tool parked")


def test_mcp_over_http_takes_a_bearer_token_as_every_api_route(served: LiveServer) -> None:
    hello = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    accept = {"Accept": "application/json, text/event-stream"}
    with httpx.Client(base_url=served.url, timeout=60) as http:
        missing = http.post("/mcp", json=hello, headers=accept)
        forged = http.post("/mcp", json=hello, headers={**accept, "Authorization": "Bearer wk_no"})
        api = http.get("/api/v1/runs")
    assert missing.status_code == api.status_code == 401
    assert missing.json() == api.json()
    assert forged.status_code == 401
    assert forged.json()["error"]["message"] == "unknown or revoked token"
