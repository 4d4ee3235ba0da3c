"""A served watchkeeper and MCP sessions with it over both transports.

The MCP tools reach the store only through the API, whose store tests run on
SQLite and PostgreSQL alike; here one SQLite store serves (the same file the
server's engine and the test read).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from watchkeeper.clock import utcnow
from watchkeeper.notify.ops import OpsNotifier
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store

from ...conftest import make_settings
from ...support.live_server import LiveServer, live_server
from ...support.mcp_client import McpSession, over_http, over_stdio
from ..procs.conftest import kill_leftovers

#: How an agent reaches watchkeeper's tools: `watchkeeper mcp` on stdio, or serve's /mcp.
TRANSPORTS = ("stdio", "http")


@pytest.fixture
def db_url(tmp_path: Path, sqlite_template: Path) -> str:
    """One migrated SQLite file (see the module's docstring)."""
    target = tmp_path / "data" / "watchkeeper.db"
    target.parent.mkdir()
    shutil.copy(sqlite_template, target)
    return f"sqlite:///{target}"


@pytest.fixture
def served(tmp_path: Path, store: Store) -> Iterator[LiveServer]:
    """A real server on loopback, on the wall clock (its processes run for real)."""
    settings = make_settings(tmp_path, store.url)
    runtime = Runtime.open(settings, store=store, clock=utcnow, notifier=OpsNotifier(settings.ops))
    with live_server(runtime) as server:
        yield server
    runtime.sweeper.close()
    kill_leftovers(runtime.procs)


@pytest.fixture(params=TRANSPORTS)
def transport(request: pytest.FixtureRequest) -> str:
    """Each transport in turn."""
    name: str = request.param
    return name


@contextmanager
def agent(server: LiveServer, transport: str, role: str = "admin") -> Iterator[McpSession]:
    """An MCP session with ``server`` over ``transport``, holding a token of ``role``."""
    token = server.tokens[role]
    if transport == "http":
        with over_http(server.url, token) as session:
            yield session
        return
    env = {"WATCHKEEPER_URL": server.url, "WATCHKEEPER_TOKEN": token}
    with over_stdio(env) as session:
        yield session
