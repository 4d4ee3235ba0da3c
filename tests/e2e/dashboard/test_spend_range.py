"""The spend page over a date range: the range is in the URL, narrows the charts and the
totals, a date it cannot read is said on the page; its times read in the browser's zone,
with UTC on hover."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from playwright.sync_api import expect

from watchkeeper.records.timeline import NewEvent, Usage
from watchkeeper.timeline.service import TimelineService

from .conftest import WAIT_MS, Dashboard

# One call before the range, two inside (either side of a UTC midnight), one after.
CALLS = {
    "2026-01-03T10:00:00+00:00": 1_000,
    "2026-01-05T23:30:00+00:00": 2_000,
    "2026-01-06T00:30:00+00:00": 4_000,
    "2026-01-08T12:00:00+00:00": 8_000,
}


def _seed(dashboard: Dashboard) -> None:
    runtime = dashboard.runtime
    timeline = TimelineService(runtime.store, runtime.settings, clock=runtime.clock)
    timeline.ingest(
        [
            NewEvent(
                phase="implementer",
                at=datetime.fromisoformat(at),
                job_id="j-range",
                task_id="t-range",
                role="implementer",
                model="coder-1",
                provider="acme-ai",
                usage=Usage(tokens, 0),
            )
            for at, tokens in CALLS.items()
        ],
        "runner",
    )


def _page(browser: Any, dashboard: Dashboard, **options: Any) -> Any:
    context = browser.new_context(viewport={"width": 1280, "height": 900}, **options)
    context.set_default_timeout(WAIT_MS)
    return dashboard.login(context.new_page(), "ana")


def test_a_date_range_narrows_the_charts_and_totals_and_lives_in_the_url(
    browser: Any, dashboard: Dashboard
) -> None:
    _seed(dashboard)
    page = _page(browser, dashboard, timezone_id="UTC")
    page.goto(f"{dashboard.url}/web/spend")
    totals = page.locator("#spend-totals")
    expect(totals).to_contain_text("over 4 calls")
    expect(page.locator("svg.bars[data-by=day] rect")).to_have_count(4)

    page.get_by_label("From").fill("2026-01-05")
    page.get_by_label("To").fill("2026-01-06")
    page.get_by_role("button", name="Show").click()
    expect(page).to_have_url(f"{dashboard.url}/web/spend?since=2026-01-05&until=2026-01-06")
    expect(totals).to_contain_text("over 2 calls")
    expect(page.locator("svg.bars[data-by=day] rect")).to_have_count(2)
    expect(page.locator("svg.bars[data-by=day]")).to_contain_text("2026-01-05")
    expect(page.locator("svg.bars[data-by=day]")).not_to_contain_text("2026-01-08")
    # The view is the URL: opened afresh, it shows the same, its form filled in.
    page.reload()
    expect(totals).to_contain_text("over 2 calls")
    expect(page.get_by_label("From")).to_have_value("2026-01-05")
    expect(page.get_by_label("To")).to_have_value("2026-01-06")

    # One day only.
    page.goto(f"{dashboard.url}/web/spend?since=2026-01-08&until=2026-01-08")
    expect(totals).to_contain_text("over 1 call.")

    # A range with nothing in it says so.
    page.goto(f"{dashboard.url}/web/spend?since=2027-01-01")
    expect(page.locator("main")).to_contain_text("No calls in this range")

    # A date it cannot read is said on the page, with the way to write it; nothing is counted.
    answer = page.goto(f"{dashboard.url}/web/spend?since=someday&until=2026-01-06")
    assert answer is not None and answer.status == 400
    problems = page.get_by_role("alert")
    expect(problems).to_contain_text("since 'someday' is not a date or a time")
    expect(problems).to_contain_text("2026-01-05")
    expect(page.get_by_label("From")).to_have_value("")
    expect(page.get_by_label("To")).to_have_value("2026-01-06")
    page.goto(f"{dashboard.url}/web/spend?since=2026-01-06&until=2026-01-05")
    expect(page.get_by_role("alert")).to_contain_text("until must be later than since")
    page.context.close()


def test_times_on_the_spend_page_read_in_the_browsers_zone_with_utc_on_hover(
    browser: Any, dashboard: Dashboard
) -> None:
    _seed(dashboard)
    page = _page(browser, dashboard, timezone_id="Asia/Tokyo")  # UTC+9, no summer time
    page.goto(f"{dashboard.url}/web/spend?since=2026-01-05&until=2026-01-06")
    first = page.locator("#spend-first time")
    expect(first).to_have_text("2026-01-06 08:30:00")
    expect(first).to_have_attribute("title", "2026-01-05 23:30:00 UTC")
    last = page.locator("#spend-last time")
    expect(last).to_have_text("2026-01-06 09:30:00")
    expect(last).to_have_attribute("title", "2026-01-06 00:30:00 UTC")
    start = page.locator("#spend-range time").first
    expect(start).to_have_text("2026-01-05 09:00:00")
    expect(start).to_have_attribute("title", "2026-01-05 00:00:00 UTC")
    page.context.close()
