"""An agent's loop against a real ``watchkeeper serve``, through the MCP SDK's own clients:
start long work, park until it ends, be woken by the server, read what it printed.

The agent speaks to ``watchkeeper mcp`` (a real subprocess, as an agent client starts
it); a second agent speaks to the server's ``/mcp`` over streamable HTTP and sees
the same runs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..support.mcp_client import over_http, over_stdio
from ..support.serving import serving
from ..support.waiting import wait_for

#: Looks like a GitHub token: the log the agent reads has it redacted.
SECRET = "ghp_" + "A1b2C3d4E5" * 4


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """``serve`` on a fresh data folder, sweeping every second: its URL and admin token."""
    config = tmp_path / "server.toml"
    config.write_text(f'data_dir = "{tmp_path / "server-data"}"\ncheck_interval_s = 1\n')
    with serving(config) as (_process, url, token):
        yield url, token


def test_run_park_be_woken_read_the_log(server: tuple[str, str], tmp_path: Path) -> None:
    url, token = server
    gate, woken = tmp_path / "go", tmp_path / "woken.json"
    env = {
        "WATCHKEEPER_URL": url,
        "WATCHKEEPER_TOKEN": token,
        "WATCHKEEPER_SESSION_ID": "builder-7",
    }
    script = (
        f"echo compiling; while [ ! -e {gate} ]; do sleep 0.05; done; "
        f"echo 'pushed with {SECRET}'; echo tests passed"
    )
    with over_stdio(env) as agent:
        run = agent.answer(
            "run", {"command": ["sh", "-c", script], "cwd": str(tmp_path), "name": "suite"}
        )
        assert run["session"] == "builder-7"
        parked = agent.answer(
            "park",
            {
                "until": run["id"],
                "reason": "waiting for the suite",
                "wake": f"printf '%s' \"$WATCHKEEPER_RESULT\" > {woken}",
            },
        )
        assert parked["session"] == "builder-7"
        assert parked["state"] == "waiting"

        # Another agent, over HTTP, sees the same run and the same park.
        with over_http(url, token) as other:
            assert other.tools().keys() == agent.tools().keys()
            assert other.answer("status", {"run_id": run["id"]})["id"] == run["id"]
            assert [p["id"] for p in other.answer("parked")["parks"]] == [parked["id"]]

        gate.touch()  # the work ends; the agent is not polling: the server wakes it
        wait_for(woken.exists, what="the server's wake command", timeout=60)
        result = json.loads(wait_for(lambda: woken.read_text() or None, what="the result"))
        assert result["status"] == "succeeded"
        shown = agent.answer("parked")["parks"]
        assert [(p["id"], p["state"]) for p in shown] == [(parked["id"], "woken")]

        log = agent.answer("logs", {"run_id": run["id"]})
        assert log["ended"] is True
        assert "tests passed" in log["text"]
        assert SECRET not in log["text"]
        assert agent.read(f"watchkeeper://procs/{run['id']}/log") == log["text"]
