"""Incidents as a list: search and filters in a GET form (the view is in the URL), pages
with a total, times in the browser's zone, and exports with the same filters."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from watchkeeper.server.app import create_app
from watchkeeper.store import Store

from ...support.incidents import decide, open_incidents
from .conftest import Dashboard, open_runtime, serve

T0 = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
#: (kind, run id, condition, title, hours after T0 it opened)
MADE = [
    ("nightly", "r-1", "stalled", "crawl of example.org", 0),
    ("nightly", "r-2", "failed", "crawl of docs.example.org", 1),
    ("chat_turn", "t-1", "stuck", "turn in #support", 2),
    ("chat_turn", "t-2", "stalled", "turn in #billing", 3),
    ("backup", "b-1", "failed", "backup of the ledger", 4),
]


@pytest.fixture
def seeded(tmp_path: Path, sqlite_template: Path) -> Iterator[Dashboard]:
    """The dashboard over five incidents, without the sweep: it would resolve work no kind
    reports, and this list is about what the store holds."""
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(sqlite_template, data / "watchkeeper.db")
    runtime = open_runtime(data)
    try:
        _seed(runtime.store)
        app = create_app(runtime, run_sweeper=False)
        with serve(app) as url:
            yield Dashboard(url, runtime, app)
    finally:
        runtime.close()


def _seed(store: Store) -> None:
    by_run = open_incidents(store, MADE, T0)
    decide(store, by_run["r-2"], "nightly", "r-2", T0 + timedelta(hours=5))


def _rows(page: Any) -> list[str]:
    """The run ids in the table, top to bottom."""
    runs: list[str] = page.locator("#incidents-table tbody td.run").all_inner_texts()
    return [r.strip() for r in runs]


def test_filters_are_a_get_form_so_the_view_survives_a_reload_and_a_shared_link(
    seeded: Dashboard, pages: Any
) -> None:
    page = seeded.login(pages(), "ana")
    page.goto(f"{seeded.url}/web/incidents")
    expect(page.locator("main h1")).to_have_text("Incidents")
    expect(page.locator(".count")).to_have_text("5 of 5")
    assert _rows(page) == ["b-1", "t-2", "t-1", "r-2", "r-1"]
    first = page.locator("#incidents-table tbody tr").first
    expect(first.get_by_role("link").first).to_have_attribute(
        "href", re.compile(r"^/web/incidents/\d+$")
    )

    page.get_by_label("Kind").fill("nightly")
    page.get_by_label("Decided by").fill("@ana")
    page.get_by_role("button", name="Show").click()
    expect(page).to_have_url(re.compile(r"kind=nightly.*decided_by=%40ana"))
    expect(page.locator(".count")).to_have_text("1 of 1")
    assert _rows(page) == ["r-2"]
    expect(page.locator("#incidents-table tbody tr").first).to_contain_text("@ana")

    shared = page.url
    other = seeded.login(pages(), "ben")
    other.goto(shared)
    expect(other.locator(".count")).to_have_text("1 of 1")
    expect(other.get_by_label("Kind")).to_have_value("nightly")
    assert _rows(other) == ["r-2"]

    page.goto(f"{seeded.url}/web/incidents?condition=stalled&q=TURN")
    expect(page.get_by_label("Condition")).to_have_value("stalled")
    assert _rows(page) == ["t-2"]
    page.goto(
        f"{seeded.url}/web/incidents?status=live&since=2026-01-05T13:00:00Z"
        "&until=2026-01-05T16:00:00Z"
    )
    expect(page.locator(".count")).to_have_text("3 of 3")
    assert _rows(page) == ["t-2", "t-1", "r-2"]


def test_pages_keep_the_filters_and_say_how_many_of_the_total(
    seeded: Dashboard, pages: Any
) -> None:
    page = seeded.login(pages(), "ana")
    page.goto(f"{seeded.url}/web/incidents?status=live&limit=2")
    expect(page.locator(".count")).to_have_text("1 to 2 of 5")
    expect(page.get_by_role("link", name="Previous")).to_have_count(0)
    page.get_by_role("link", name="Next").click()
    expect(page).to_have_url(re.compile(r"status=live.*limit=2.*offset=2"))
    expect(page.locator(".count")).to_have_text("3 to 4 of 5")
    assert _rows(page) == ["t-1", "r-2"]
    page.get_by_role("link", name="Next").click()
    expect(page.locator(".count")).to_have_text("5 to 5 of 5")
    expect(page.get_by_role("link", name="Next")).to_have_count(0)
    page.get_by_role("link", name="Previous").click()
    expect(page.locator(".count")).to_have_text("3 to 4 of 5")


def test_exports_hold_what_the_filters_find_and_the_session_may_fetch_them(
    seeded: Dashboard, pages: Any
) -> None:
    page = seeded.login(pages(), "ana")
    page.goto(f"{seeded.url}/web/incidents?kind=chat_turn&limit=1")
    as_csv = page.get_by_role("link", name="Export CSV").get_attribute("href")
    as_json = page.get_by_role("link", name="Export JSON").get_attribute("href")
    assert as_csv is not None and as_json is not None
    assert "kind=chat_turn" in as_csv and "limit" not in as_csv
    answer = page.request.get(seeded.url + as_csv)
    assert answer.status == 200, answer.text()
    assert "attachment" in answer.headers["content-disposition"]
    rows = list(csv.DictReader(io.StringIO(answer.text())))
    assert [r["run_id"] for r in rows] == ["t-2", "t-1"]
    answer = page.request.get(seeded.url + as_json)
    assert answer.status == 200, answer.text()
    body = json.loads(answer.text())
    assert [i["run_id"] for i in body["incidents"]] == ["t-2", "t-1"] and body["total"] == 2


def test_times_show_in_the_browsers_zone_with_utc_on_hover(browser: Any, seeded: Dashboard) -> None:
    context = browser.new_context(timezone_id="Asia/Tokyo")
    page = seeded.login(context.new_page(), "ana")
    page.goto(f"{seeded.url}/web/incidents?q=r-1")
    opened = page.locator("#incidents-table tbody time").first
    expect(opened).to_have_attribute("datetime", "2026-01-05T12:00:00Z")
    expect(opened).to_have_attribute("title", "2026-01-05 12:00:00 UTC")
    expect(opened).to_have_text(re.compile(r"2026-01-05 21:00"))
    context.close()


def test_a_bad_filter_is_a_clear_message_on_the_page(seeded: Dashboard, pages: Any) -> None:
    page = seeded.login(pages(), "ana")
    answer = page.goto(f"{seeded.url}/web/incidents?since=yesterday&condition=melted")
    assert answer is not None and answer.status == 400
    expect(page.locator("main h1")).to_have_text("Incidents")
    expect(page.get_by_role("alert")).to_contain_text("since 'yesterday' is not a time")
    expect(page.get_by_role("alert")).to_contain_text("condition")
    expect(page.get_by_label("Since")).to_have_value("yesterday")
    answer = page.goto(f"{seeded.url}/web/incidents/export?format=csv&until=soon")
    assert answer is None or answer.status == 400
