"""Record what the SDK's stdio server answers to an agent's opening, for
:mod:`watchkeeper.mcp.opening`.

For each protocol revision that opens with the handshake, the SDK server alone (started
as ``watchkeeper mcp`` ran before the opening was answered without it) is sent
``initialize``, ``notifications/initialized`` and ``tools/list``, and its two answers are
kept. Run it after changing a tool, its description or the SDK's version::

    .venv/bin/python -m watchkeeper.mcp.opening_record --write

``tests/integration/mcp/test_mcp_opening.py`` fails while the recorded answers differ
from what the SDK answers now.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from importlib.metadata import version as installed
from typing import Any

from watchkeeper.mcp.opening import RECORDED

#: The SDK server alone, as ``watchkeeper mcp`` served before: no tool is called, so the
#: server it would call is never reached.
_SDK_ALONE = (
    "from watchkeeper.mcp.stdio import serve; serve('http://127.0.0.1:9', 'the recorder', None)"
)
CLIENT = {"name": "watchkeeper-opening-record", "version": "1"}


def record() -> dict[str, Any]:
    """The SDK server's answers to the opening, by protocol revision."""
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

    versions = {version: _opening(version) for version in HANDSHAKE_PROTOCOL_VERSIONS}
    return {"mcp": installed("mcp"), "versions": versions}


def _opening(version: str) -> dict[str, Any]:
    with subprocess.Popen(
        [sys.executable, "-c", _SDK_ALONE],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as server:
        initialize = {"protocolVersion": version, "capabilities": {}, "clientInfo": CLIENT}
        opened = _ask(
            server, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": initialize}
        )
        _send(server, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        listed = _ask(server, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        server.communicate(timeout=60)
    return {"initialize": opened, "tools/list": listed}


def _send(server: subprocess.Popen[str], message: dict[str, Any]) -> None:
    assert server.stdin is not None
    server.stdin.write(json.dumps(message) + "\n")
    server.stdin.flush()


def _ask(server: subprocess.Popen[str], message: dict[str, Any]) -> Any:
    assert server.stdout is not None
    _send(server, message)
    line = server.stdout.readline()
    if not line:
        raise RuntimeError(f"the SDK server ended without answering {message['method']}")
    answer = json.loads(line)
    if "result" not in answer or answer.get("id") != message["id"]:
        raise RuntimeError(f"the SDK server answered {message['method']} with {answer}")
    return answer["result"]


def main() -> None:
    """Print the recorded answers, or write them where the opening reads them."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"write {RECORDED.name}")
    args = parser.parse_args()
    text = json.dumps(record(), indent=1, ensure_ascii=False, sort_keys=True) + "\n"
    if args.write:
        RECORDED.write_text(text, encoding="utf-8")
        print(f"wrote {RECORDED}")
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
