"""A card's HTTP request does not search for a module on every call.

httpcore asks for ``sniffio`` on each async request; when it is not installed the
failed import walks ``sys.path`` every time, a sixth of a card's CPU. Checked on a
real loopback server through the async client the senders use.
"""

from __future__ import annotations

import asyncio
import importlib.abc
import sys
import threading
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import ModuleType

import httpx
import pytest


class _Ok(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *_: object) -> None:
        return


class _Searches(importlib.abc.MetaPathFinder):
    """Records every module name Python had to look for (it was not imported yet)."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> None:
        self.names.append(fullname)


@pytest.fixture
def platform_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/send"
    finally:
        server.shutdown()
        server.server_close()


async def _post(url: str, times: int, searches: _Searches | None) -> None:
    async with httpx.AsyncClient() as client:
        await client.post(url, json={"text": "warm-up"})
        if searches is not None:
            sys.meta_path.insert(0, searches)
        try:
            for number in range(times):
                (await client.post(url, json={"text": f"card {number}"})).raise_for_status()
        finally:
            if searches is not None:
                sys.meta_path.remove(searches)


def test_requests_after_the_first_look_for_no_module(platform_url: str) -> None:
    searches = _Searches()
    asyncio.run(_post(platform_url, 20, searches))
    assert searches.names == [], f"modules searched on every request: {set(searches.names)}"
