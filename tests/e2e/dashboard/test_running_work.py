"""Parts 1 and 2: running work, presses through the one decision function, and the bell."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.support import patient_http
from watchkeeper.store.tokens import Role

from . import actions
from .conftest import LOOKS, Dashboard


def _report(dashboard: Dashboard, run_id: str, title: str, budget_s: float) -> None:
    headers = {"Authorization": f"Bearer {dashboard.token('reporter', Role.REPORTER)}"}
    answer = patient_http.post(
        f"{dashboard.url}/api/v1/runs",
        json={
            "kind": "crawl",
            "run_id": run_id,
            "title": title,
            "budget_s": budget_s,
            "effects": "none",
        },
        headers=headers,
        timeout=10,
    )
    answer.raise_for_status()


def test_a_stalled_run_appears_live_is_retried_and_a_second_press_is_told_who_won(
    dashboard: Dashboard, pages: Any
) -> None:
    ana = dashboard.login(pages(), "ana")
    expect(ana.locator("#work .attention")).to_contain_text("Nothing needs attention")
    expect(ana.locator(".bell-count")).to_have_text("0")
    expect(ana.locator("body")).to_have_attribute("data-stream", "open")

    _report(dashboard, "crawl-1", "crawl example.org", budget_s=1)

    # Live: no reload. The run shows under Running, then as stalled once its budget runs out.
    stalled = ana.locator("#work .attention li.run", has_text="crawl example.org")
    expect(stalled.locator(".badge-stalled")).to_be_visible()
    expect(stalled.get_by_role("button", name="Retry", exact=True)).to_be_visible()
    expect(ana.locator(".bell-count")).to_have_text("1")
    ana.locator(".bell summary").click()
    bell_link = ana.locator(".bell-list a", has_text="crawl example.org")
    expect(bell_link).to_have_attribute("href", re.compile(r"^/web/incidents/\d+$"))
    incident_path = bell_link.get_attribute("href")

    # A second admin has the incident open before the first presses.
    ben = dashboard.login(pages(), "ben")
    ben.goto(f"{dashboard.url}{incident_path}")
    expect(ben.get_by_role("button", name="Retry", exact=True)).to_be_visible()

    stalled.get_by_role("button", name="Retry", exact=True).click()
    # The presser is told a sentence, never what the kind answered (that goes to the journal).
    expect(ana.locator("#answers")).to_contain_text("Retry done")
    expect(ana.locator("#answers")).not_to_contain_text("the crawler started the run again")
    assert [(c.action.value, c.actor, c.via) for c in actions.CALLS[-1:]] == [
        ("retry", "@ana", "dashboard")
    ]

    ben.get_by_role("button", name="Retry", exact=True).click()
    expect(ben.locator("#answers")).to_contain_text(
        re.compile(r"already decided: Retry by @ana on the dashboard at \d\d:\d\d UTC")
    )

    # Dealt with: gone from what needs attention, labelled behind "all".
    expect(ana.locator("#work .attention")).to_contain_text("Nothing needs attention")
    ana.locator("#show-all").click()
    dealt = ana.locator("#work .dealt li.run", has_text="crawl example.org")
    expect(dealt).to_contain_text("retry by @ana on dashboard")


@pytest.mark.parametrize("look", LOOKS, indirect=True)
def test_viewers_see_everything_but_no_buttons_that_act(dashboard: Dashboard, pages: Any) -> None:
    _report(dashboard, "crawl-2", "crawl docs.example.org", budget_s=1)
    viewer = dashboard.login(pages(), "vic", Role.VIEWER)
    item = viewer.locator("#work .attention li.run", has_text="crawl docs.example.org")
    expect(item.get_by_role("button", name="Ask to diagnose")).to_be_visible()
    expect(item.get_by_role("button", name="Retry", exact=True)).to_have_count(0)
    expect(item.get_by_role("button", name="Dismiss")).to_have_count(0)
    expect(viewer.locator("table.switches")).to_contain_text("Failed work with no effects outside")
    expect(viewer.locator("table.switches button")).to_have_count(0)

    item.get_by_role("button", name="Ask to diagnose").click()
    expect(viewer.locator("#answers p").first).not_to_be_empty()
