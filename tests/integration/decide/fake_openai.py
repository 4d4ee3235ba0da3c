"""A local server of ours speaking the OpenAI chat-completions wire format, with tool calls."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class FakeModel:
    """What the fake received; ``fail`` makes it answer 500."""

    url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    fail: bool = False


def _completion(message: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "local-diagnoser",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
    }


def _answer(body: dict[str, Any]) -> dict[str, Any]:
    tool_results = [m for m in body["messages"] if m.get("role") == "tool"]
    if not tool_results:
        calls = [
            {
                "id": f"call_{name}",
                "type": "function",
                "function": {"name": name, "arguments": "{}"},
            }
            for name in ("get_run", "get_evidence")
        ]
        return _completion({"role": "assistant", "content": None, "tool_calls": calls})
    run = json.loads(tool_results[0]["content"])
    text = (
        f"The run is {run.get('status')} with owner alive={run.get('owner', {}).get('alive')}. "
        "It most likely hangs on a tool call. Look at its log, then cancel it."
    )
    return _completion({"role": "assistant", "content": text})


@contextmanager
def fake_model() -> Iterator[FakeModel]:
    """Serve ``/v1/chat/completions`` on a free loopback port."""
    state = FakeModel()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            state.requests.append(body)
            state.headers.append(dict(self.headers.items()))
            if state.fail or self.path != "/v1/chat/completions":
                self.send_response(500)
                self.end_headers()
                return
            payload = json.dumps(_answer(body)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    # The loop looks for a stop every 50 ms: its default half second is paid at every exit.
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
