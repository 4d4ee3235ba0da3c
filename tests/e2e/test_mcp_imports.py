"""`watchkeeper mcp` answers an agent's first requests loading nothing of the server side,
nor the MCP SDK.

Agents start the stdio server once per session, so its start-up is paid again and
again (bench/mcp_startup.py times it). This test checks what it loads, which does not
depend on the machine: the command is run as installed, ``initialize`` and
``tools/list`` are answered, and the modules it had loaded are listed as it exits.
The MCP SDK brings Starlette and Uvicorn of its own; watchkeeper's web framework,
database layer, store and HTTP client must not come with it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from ..support.cli import cli_env
from ..support.live_server import free_port

#: The installed entry point as `watchkeeper mcp`; every module loaded, written as it exits.
PROBE = textwrap.dedent(
    """
    import atexit, json, sys

    target = sys.argv[1]

    def written():
        with open(target, "w") as out:
            json.dump(sorted(n for n, m in sys.modules.items() if m is not None), out)

    atexit.register(written)
    sys.argv = ["watchkeeper", "mcp"]
    from watchkeeper.cli import main

    sys.exit(main())
    """
)

#: What the agent client sends first: the handshake, then the tools' list.
OPENING: list[dict[str, Any]] = [
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "probe", "version": "0"},
        },
    },
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
]

#: What only `serve`, `db` or a local store need, the SDK's HTTP client (made on the first
#: tool call, never to answer the opening), and the MCP SDK itself with its models and
#: transports: the opening is answered as the SDK answered it, recorded (see
#: `watchkeeper.mcp.opening`), and the SDK loads at the first tool call.
NOT_LOADED = {
    "fastapi",
    "sqlalchemy",
    "alembic",
    "psycopg",
    "httpx",
    "mcp",
    "mcp_types",
    "pydantic",
    "anyio",
    "starlette",
    "uvicorn",
    "typer",
}
NOT_OURS_TO_LOAD = (
    "watchkeeper.server",
    "watchkeeper.store",
    "watchkeeper.runtime",
    # The SDK's client (httpx); the package's light parts (where the server is, the
    # standard-library wire) are the opening's to use.
    "watchkeeper.client.core",
    "watchkeeper.cli.app",
)
INSIDE = tuple(f"{package}." for package in NOT_OURS_TO_LOAD)


def exchange(server: subprocess.Popen[str], message: dict[str, Any]) -> dict[str, Any] | None:
    """Send ``message``; the answer to it, or ``None`` for a notification (none comes)."""
    assert server.stdin is not None
    assert server.stdout is not None
    server.stdin.write(json.dumps(message) + "\n")
    server.stdin.flush()
    if "id" not in message:
        return None
    answer: dict[str, Any] = json.loads(server.stdout.readline())
    return answer


def test_the_stdio_server_answers_the_opening_loading_nothing_of_the_server_side(
    tmp_path: Path,
) -> None:
    listed = tmp_path / "modules.json"
    # No server answers there: the opening needs none.
    env = cli_env({"WATCHKEEPER_URL": f"http://127.0.0.1:{free_port()}"})
    with subprocess.Popen(
        [sys.executable, "-c", PROBE, str(listed)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
    ) as server:
        answers = [exchange(server, message) for message in OPENING]
        # Its input closed, as an agent client leaves: the server ends, writing its list.
        _, stderr = server.communicate(timeout=60)
    answers = [answer for answer in answers if answer is not None]
    assert [answer["id"] for answer in answers] == [1, 2], stderr
    assert answers[0]["result"]["serverInfo"]["name"] == "watchkeeper"
    assert len(answers[1]["result"]["tools"]) == 17
    modules = set(json.loads(listed.read_text()))
    packages = {name.split(".")[0] for name in modules}
    assert NOT_LOADED.isdisjoint(packages), sorted(NOT_LOADED & packages)
    ours = sorted(m for m in modules if m in NOT_OURS_TO_LOAD or m.startswith(INSIDE))
    assert ours == [], ours
    assert "watchkeeper" in packages
