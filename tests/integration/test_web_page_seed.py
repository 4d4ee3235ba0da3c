"""A page is never drawn with signatures newer than its data.

A page tells its live stream where it stands: the lists' signatures and the latest event
id as it was drawn. When those were read after the page's own data, a change landing in
between was in the signatures but not on the page: the stream's hello matched, no event
followed, and the page showed the old list until something else moved (a stalled run
seen without its incident's buttons). Real server on loopback, both stores.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from watchkeeper.runtime import Runtime
from watchkeeper.server.app import reports_for
from watchkeeper.server.web import routes_home
from watchkeeper.server.web.stream import Watcher
from watchkeeper.store.runs import NewRun

from ..support.live_server import LiveServer, live_server
from ..support.waiting import TIMEOUT_S
from ..support.web_login import log_in


@pytest.fixture
def server(runtime: Runtime) -> Iterator[LiveServer]:
    with live_server(runtime) as live:
        yield live


def _logged_in(server: LiveServer) -> httpx.Client:
    web = httpx.Client(base_url=server.url, timeout=TIMEOUT_S)
    log_in(web, server.tokens["admin"])
    return web


def test_a_run_started_while_the_page_is_drawn_is_fetched_once_the_page_listens(
    server: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    read_work = routes_home.work_context

    async def work_then_a_new_run(request: Any, show_all: bool) -> dict[str, Any]:
        drawn = await read_work(request, show_all)
        # The race, made certain: a run starts just after the page read its work.
        new = NewRun("crawl", "late-1", "crawl late.example.org", None, "none", 3600.0, None, 60)
        reports_for(server.runtime).start(new)
        return drawn

    monkeypatch.setattr(routes_home, "work_context", work_then_a_new_run)
    web = _logged_in(server)
    try:
        page = web.get("/web/")
    finally:
        web.close()
    assert page.status_code == 200, page.text
    assert "crawl late.example.org" not in page.text

    drawn_sigs = re.search(r'data-sigs="([^"]*)"', page.text)
    assert drawn_sigs is not None
    drawn_with = json.loads(drawn_sigs[1].replace("&#34;", '"').replace("&quot;", '"'))
    assert server.server is not None
    watcher: Watcher = server.server.config.app.state.web_watcher
    now = watcher._look()  # what the stream tells the page once it listens
    assert drawn_with.get("runs") != now.sig("runs"), (
        "the page was drawn with the runs' signature that already counts the new run, so "
        "its stream will never fetch the list again"
    )
