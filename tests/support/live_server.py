"""A real watchkeeper server on a free loopback port, in a thread."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import httpx
import uvicorn

from watchkeeper.runtime import Runtime
from watchkeeper.server.app import create_app
from watchkeeper.server.http.longpoll import LongWaits
from watchkeeper.server.http.protocol import (
    BODY_TIMEOUT_S,
    HEADER_TIMEOUT_S,
    KEEP_ALIVE_S,
    server_config,
)
from watchkeeper.store.tokens import Role

from .waiting import TIMEOUT_S, wait_for


@dataclass
class LiveServer:
    """A running server, its runtime and a token of each role."""

    url: str
    runtime: Runtime
    tokens: dict[str, str]
    #: The uvicorn server itself (its ``server_state`` tells the requests in flight).
    server: uvicorn.Server | None = None

    def client(self, role: str | None = "admin") -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.tokens[role]}"} if role else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=TIMEOUT_S)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def in_thread(config: uvicorn.Config, what: str, stop_s: float = 20) -> Iterator[uvicorn.Server]:
    """Run a uvicorn server with ``config`` in a thread until the block ends; ``what``
    names it when it does not start, ``stop_s`` bounds the wait for it to stop."""
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_for(lambda: server.started or not thread.is_alive(), what=what, timeout=20)
    if not server.started:
        raise RuntimeError(f"{what} did not start")
    try:
        yield server
    finally:
        server.should_exit = True
        thread.join(timeout=stop_s)


@contextmanager
def live_server(
    runtime: Runtime,
    *,
    run_sweeper: bool = False,
    long_waits: LongWaits | None = None,
    header_timeout_s: float = HEADER_TIMEOUT_S,
    body_timeout_s: float = BODY_TIMEOUT_S,
    keep_alive_s: int = KEEP_ALIVE_S,
    parser: str | None = None,
) -> Iterator[LiveServer]:
    """Serve ``runtime`` over HTTP until the block ends, configured as ``watchkeeper serve`` is.

    ``long_waits`` replaces the caps on held requests; ``header_timeout_s``,
    ``body_timeout_s``, ``keep_alive_s`` and ``parser`` ("httptools" or "h11") set the
    HTTP layer.
    """
    tokens = {
        role.value: runtime.store.tokens.create(role, f"test {role.value}", runtime.clock())[1]
        for role in Role
    }
    port = free_port()
    app = create_app(runtime, run_sweeper=run_sweeper)
    if long_waits is not None:
        app.state.long_waits = long_waits
    config = server_config(
        app,
        "127.0.0.1",
        port,
        header_timeout_s=header_timeout_s,
        body_timeout_s=body_timeout_s,
        keep_alive_s=keep_alive_s,
        parser=parser,
        log_level="warning",
        lifespan="on",
    )
    with in_thread(config, "the test server") as server:
        yield LiveServer(f"http://127.0.0.1:{port}", runtime, tokens, server)
