"""The topology page under a stock ``watchkeeper serve``: the server's own supervision tree,
its breakers and its health checks, drawn and kept live, on a desktop and on a phone."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from ...support.json_server import answering
from ..test_serve_supervision import LOOPS, BrokenWebhook, Served, Webhook, serve
from .conftest import WAIT_MS
from .world import DESKTOP, PHONE


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    folder = tmp_path
    with answering(Webhook(("127.0.0.1", 0), BrokenWebhook)) as webhook:
        config = folder / "watchkeeper.toml"
        config.write_text(
            'data_dir = "data"\ncheck_interval_s = 1\n'
            f'[ops]\nwebhook_url = "{webhook.url}/hook"\nchannels = ["webhook"]\n'
        )
        with serve(Path(config)) as found:
            yield found


def _page(browser: Any, served: Served, viewport: dict[str, int]) -> Any:
    context = browser.new_context(viewport=viewport, has_touch=viewport is PHONE)
    context.set_default_timeout(WAIT_MS)
    page = context.new_page()
    page.goto(f"{served.url}/web/")
    page.fill("#token", served.token)
    page.click("button[type=submit]")
    expect(page.locator("header .who")).to_be_visible()
    page.goto(f"{served.url}/web/topology")
    return page


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_topology_shows_the_servers_tree_breakers_and_checks_live(
    browser: Any, served: Served, viewport: dict[str, int]
) -> None:
    page = _page(browser, served, viewport)
    try:
        tree = page.locator('svg.suptree g.supnode.suproot[data-node="server"]')
        expect(tree).to_have_attribute("data-state", "running")
        for name in LOOPS:
            node = page.locator(f'svg.suptree g.supnode[data-node="server/{name}"]')
            expect(node).to_have_attribute("data-state", "running")
            expect(page.locator(f'tr[data-child="server/{name}"] .sup-state')).to_have_text(
                "running"
            )
        breaker = page.locator('li.breaker[data-breaker="notify:webhook"]')
        expect(breaker).to_have_class(re.compile(r"breaker-closed"))
        expect(breaker).to_have_attribute("data-node", "server/notifier")
        expect(page.locator('figure.dial[data-check="store"]')).to_have_class(
            re.compile(r"dial-healthy")
        )
        expect(page.locator('figure.dial[data-check="notifier running"]')).to_have_attribute(
            "data-node", "server/notifier"
        )
        width = page.evaluate("() => document.documentElement.scrollWidth")
        assert width <= viewport["width"], f"the page is {width} px wide"

        # Live: what changes on the server shows without a reload.
        assert served.post("/api/v1/supervision/children/server/sweeper/stop").status_code == 200
        sweeper = page.locator('svg.suptree g.supnode[data-node="server/sweeper"]')
        expect(sweeper).to_have_attribute("data-state", "stopped")
        expect(page.locator('figure.dial[data-check="sweeper running"]')).to_have_class(
            re.compile(r"dial-unhealthy"), timeout=30_000
        )
        assert served.post("/api/v1/supervision/breakers/notify:webhook/open").status_code == 200
        expect(breaker).to_have_class(re.compile(r"breaker-open"))

        # The page's own button restarts the child, and the picture follows. The table is
        # swapped in whole on each live update, so the button is found again at the click
        # (click scrolls and retries a replaced element; a separate scroll does not).
        page.get_by_role("button", name="Restart server/sweeper").click()
        expect(sweeper).to_have_attribute("data-state", "running")
        restarts = served.child("sweeper")["restarts"]
        assert restarts >= 1
        expect(sweeper).to_have_attribute("data-restarts", str(restarts))
    finally:
        page.context.close()
