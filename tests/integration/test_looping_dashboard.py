"""The dashboard's running work shows a run's counters as a bar and its step's budget, and a
looping run under Needs attention with what it repeats."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.support.waiting import TIMEOUT_S
from watchkeeper.clock import ManualClock
from watchkeeper.runtime import Runtime

from ..support.live_server import LiveServer, live_server
from ..support.web_login import log_in
from .helpers import start, sweep

KIND = "chat_turn"
pytestmark = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


@pytest.fixture
def server(runtime: Runtime) -> Iterator[LiveServer]:
    with live_server(runtime) as live:
        yield live


def dashboard_work(server: LiveServer) -> str:
    with httpx.Client(base_url=server.url, timeout=TIMEOUT_S) as web:
        log_in(web, server.tokens["viewer"])
        return web.get("/web/fragments/work").text


def test_counters_are_a_bar_and_a_step_budget_is_shown(
    runtime: Runtime, clock: ManualClock, server: LiveServer
) -> None:
    start(runtime, "d-1", KIND, budget_s=600, lease_s=3600)
    with server.client("reporter") as http:
        body = {"step": "running the test suite", "done": 12, "total": 40, "budget_s": 1800}
        assert http.post(f"/api/v1/runs/{KIND}/d-1/progress", json=body).status_code == 200
    page = dashboard_work(server)
    assert '<progress class="counter" value="12" max="40"' in page
    assert "12 of 40" in page
    assert "step budget 1800 s" in page


def test_a_looping_run_needs_attention_saying_what_it_repeats(
    runtime: Runtime, clock: ManualClock, server: LiveServer
) -> None:
    start(runtime, "d-2", KIND, budget_s=600, lease_s=3600)
    with server.client("reporter") as http:
        for _ in range(5):
            clock.advance(2)
            http.post(f"/api/v1/runs/{KIND}/d-2/progress", json={"step": "calling web.search"})
    sweep(runtime)
    page = dashboard_work(server)
    attention = page.split('class="runs attention"')[1].split("</ul>")[0]
    assert "badge-looping" in attention
    assert "repeating &#39;calling web.search&#39; 5 times since 12:00 UTC" in attention
