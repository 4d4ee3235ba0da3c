"""`watchkeeper mcp` answers the opening as the SDK server would, then hands over to it.

The answers to ``initialize`` and ``tools/list`` are the SDK server's own, recorded per
protocol revision; the first message the opening does not answer exactly so goes to the
SDK server, which is told the handshake again and whose second answer to ``initialize``
never reaches the agent. Every tool test over stdio (``test_mcp_tools.py``) runs through
this hand-over with the SDK's own client.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION

from watchkeeper.mcp.opening import RECORDED, Opening
from watchkeeper.mcp.opening_record import record

from ...support.cli import WK, cli_env
from ...support.live_server import free_port

RECORDED_ANSWERS = json.loads(RECORDED.read_text(encoding="utf-8"))


def test_the_recorded_opening_is_what_the_sdk_server_answers_now() -> None:
    assert record() == RECORDED_ANSWERS, (
        "the SDK server answers the opening otherwise now: run "
        "`.venv/bin/python -m watchkeeper.mcp.opening_record --write`"
    )


@contextmanager
def mcp_command() -> Iterator[subprocess.Popen[str]]:
    # No server answers there: the opening needs none, and a tool call says so.
    env = cli_env({"WATCHKEEPER_URL": f"http://127.0.0.1:{free_port()}"})
    with subprocess.Popen(
        [*WK, "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    ) as server:
        try:
            yield server
        finally:
            if server.stdin is not None and not server.stdin.closed:
                server.stdin.close()
            server.wait(timeout=60)


def send(server: subprocess.Popen[str], message: dict[str, Any]) -> None:
    assert server.stdin is not None
    server.stdin.write(json.dumps(message) + "\n")
    server.stdin.flush()


def answer(server: subprocess.Popen[str]) -> dict[str, Any]:
    assert server.stdout is not None
    line = server.stdout.readline()
    assert line, "the server ended without answering"
    read: dict[str, Any] = json.loads(line)
    return read


def initialize(version: str, request_id: int = 1) -> dict[str, Any]:
    params = {
        "protocolVersion": version,
        "capabilities": {},
        "clientInfo": {"name": "agent", "version": "1"},
    }
    return {"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": params}


INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


@pytest.mark.parametrize("version", HANDSHAKE_PROTOCOL_VERSIONS)
def test_each_revision_is_opened_as_recorded_and_a_tool_call_goes_to_the_sdk_server(
    version: str,
) -> None:
    recorded = RECORDED_ANSWERS["versions"][version]
    with mcp_command() as server:
        send(server, initialize(version))
        assert answer(server) == {"jsonrpc": "2.0", "id": 1, "result": recorded["initialize"]}
        send(server, INITIALIZED)
        send(server, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        assert answer(server) == {"jsonrpc": "2.0", "id": 2, "result": recorded["tools/list"]}
        send(
            server,
            {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "tools/call",
                "params": {"name": "runs", "arguments": {}},
            },
        )
        called = answer(server)
        # The SDK server's answer, and the next line after it: its second answer to
        # initialize (id 1) was dropped.
        assert called["id"] == 3 and called["result"]["isError"] is True, called
        assert "cannot reach watchkeeper" in called["result"]["content"][0]["text"]
        send(server, {"jsonrpc": "2.0", "id": 4, "method": "tools/list"})
        listed = answer(server)
        assert listed["id"] == 4
        assert listed["result"]["tools"] == recorded["tools/list"]["tools"]


def test_a_revision_not_recorded_is_answered_by_the_sdk_server_from_the_first_message() -> None:
    with mcp_command() as server:
        send(server, initialize("2030-01-01"))
        opened = answer(server)
        assert opened["id"] == 1
        assert opened["result"]["protocolVersion"] == LATEST_HANDSHAKE_VERSION
        send(server, INITIALIZED)
        send(server, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        assert len(answer(server)["result"]["tools"]) == 17


@pytest.mark.parametrize(
    "line",
    [
        b"not json\n",
        b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}\n',  # before initialize
        b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}\n',
        b'{"jsonrpc": "2.0", "method": "initialize", "params": {"protocolVersion": "2025-11-25",'
        b' "capabilities": {}, "clientInfo": {"name": "a", "version": "1"}}}\n',  # no id
        b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion":'
        b' "2025-11-25", "capabilities": {}, "clientInfo": {"name": "a"}}}\n',
        b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}\n',
    ],
)
def test_what_the_opening_does_not_answer_exactly_goes_to_the_sdk_server(line: bytes) -> None:
    assert Opening(RECORDED_ANSWERS).answer(line) is None


def test_a_later_page_of_tools_goes_to_the_sdk_server() -> None:
    opening = Opening(RECORDED_ANSWERS)
    assert opening.answer(json.dumps(initialize(LATEST_HANDSHAKE_VERSION)).encode())
    assert opening.answer(json.dumps(INITIALIZED).encode()) == b""
    page = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"cursor": "x"}}
    assert opening.answer(json.dumps(page).encode()) is None
    assert len(opening.replay) == 2 and opening.answered == [1]
