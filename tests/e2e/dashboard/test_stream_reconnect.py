"""Live updates that cannot connect say so, and come back on their own.

The server's cap on held requests is 1 for the token: a second page of the
same token is refused its event stream (``429``). It shows a notice and keeps
trying, with backoff and the server's ``Retry-After``; once the first page is
closed, it connects and the notice goes.
"""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect

from watchkeeper.server.http.longpoll import LongWaits

from .conftest import Dashboard

#: The refused page asks again after Retry-After (5 s) plus backoff: room for a few tries.
RECONNECT_MS = 45_000


def test_a_refused_stream_shows_a_notice_and_reconnects(dashboard: Dashboard, pages: Any) -> None:
    dashboard.app.state.long_waits = LongWaits(per_token=1, total=64)
    first = dashboard.login(pages(), "ana")
    expect(first.locator("body")).to_have_attribute("data-stream", "open")
    expect(first.locator("#live-notice")).to_be_hidden()

    second = dashboard.login(pages(), "ana")
    notice = second.get_by_role("status").filter(has_text="Live updates paused")
    expect(notice).to_be_visible()
    expect(notice).to_contain_text("reconnecting")
    expect(second.locator("body")).not_to_have_attribute("data-stream", "open")

    first.context.close()
    expect(second.locator("body")).to_have_attribute("data-stream", "open", timeout=RECONNECT_MS)
    expect(second.locator("#live-notice")).to_be_hidden()
    expect(second.get_by_text("Live updates paused")).to_have_count(0)
