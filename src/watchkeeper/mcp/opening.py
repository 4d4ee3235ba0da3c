"""``watchkeeper mcp``'s opening without the MCP SDK: ``initialize`` and ``tools/list``.

Agents start the stdio server once per session and send the same two requests first;
importing the SDK (pydantic models of every protocol revision, its transports) takes most
of a second, far more than the rest of the command. This module answers those two from
:data:`RECORDED`, the SDK server's own answers recorded for each protocol revision that
opens with the handshake (:mod:`watchkeeper.mcp.opening_record` writes them; a test fails
when they no longer match what the SDK answers). At the first message it does not answer
exactly so (a tool call, a resource, a revision or a form not recorded) it hands the
session to the SDK server, replaying the handshake to it and dropping the SDK's second
answer to ``initialize``: from there on the SDK answers everything, as it did alone.

Standard library only: nothing here may load the SDK, pydantic or an HTTP client.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO

RECORDED = Path(__file__).with_name("opening.json")


class Opening:
    """The session so far: what was answered here, and what the SDK must be told again."""

    def __init__(self, recorded: Mapping[str, Any]) -> None:
        self.recorded: Mapping[str, Any] = recorded["versions"]
        self.version: str | None = None
        #: Lines the SDK server reads first once it takes over (the handshake).
        self.replay: list[bytes] = []
        #: Ids of requests answered here that are replayed: the SDK's answers are dropped.
        self.answered: list[Any] = []

    def answer(self, line: bytes) -> bytes | None:
        """The answer to ``line`` written here, ``b""`` for a notification kept for the
        replay, or ``None``: the SDK must answer it (and everything after)."""
        try:
            message = json.loads(line)
        except ValueError:
            return None
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return None
        method = message.get("method")
        params = message.get("params")
        if method == "initialize" and self.version is None:
            version = _handshake_version(params)
            if version is None or version not in self.recorded or "id" not in message:
                return None
            self.version = version
            self.replay.append(line)
            self.answered.append(message["id"])
            return _result(message["id"], self.recorded[version]["initialize"])
        if self.version is None:
            return None
        if method == "notifications/initialized" and "id" not in message:
            self.replay.append(line)
            return b""
        if method == "tools/list" and "id" in message and _first_page(params):
            return _result(message["id"], self.recorded[self.version]["tools/list"])
        return None


def _handshake_version(params: object) -> str | None:
    """The revision an ``initialize`` asks for, when its parameters are well formed."""
    if not isinstance(params, dict):
        return None
    client = params.get("clientInfo")
    well_formed = (
        isinstance(params.get("capabilities"), dict)
        and isinstance(client, dict)
        and isinstance(client.get("name"), str)
        and isinstance(client.get("version"), str)
    )
    version = params.get("protocolVersion")
    return version if well_formed and isinstance(version, str) else None


def _first_page(params: object) -> bool:
    return params is None or (isinstance(params, dict) and params.get("cursor") is None)


def _result(request_id: Any, result: Any) -> bytes:
    answer = {"jsonrpc": "2.0", "id": request_id, "result": result}
    return json.dumps(answer, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def serve(url: str, source: str, token: str | None) -> None:
    """Answer the opening here, then hand the session to the SDK server (see the module)."""
    stdin: BinaryIO = sys.stdin.buffer
    stdout: BinaryIO = sys.stdout.buffer
    opening = Opening(json.loads(RECORDED.read_text(encoding="utf-8")))
    while True:
        line = stdin.readline()
        if not line:
            return  # the agent closed the session before anything needed the SDK
        if not line.strip():
            continue
        answer = opening.answer(line)
        if answer is None:
            break
        if answer:
            stdout.write(answer)
            stdout.flush()
    from watchkeeper.mcp.stdio import serve as serve_with_sdk

    serve_with_sdk(url, source, token, replay=[*opening.replay, line], drop=opening.answered)
