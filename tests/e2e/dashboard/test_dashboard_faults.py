"""Small faults of the dashboard's pages, each seen in a real browser."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect

from watchkeeper.records.timeline import NewEvent, Usage
from watchkeeper.timeline.service import TimelineService

from .conftest import Dashboard

DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}

#: Labels of a bar chart whose box leaves the chart's own box or the window (what shows).
CLIPPED_LABELS = """svg => {
  const box = svg.getBoundingClientRect();
  const width = document.documentElement.clientWidth;
  return [...svg.querySelectorAll("text")].filter((text) => {
    const r = text.getBoundingClientRect();
    return r.left < box.left - 0.5 || r.right > box.right + 0.5 || r.left < 0 || r.right > width;
  }).map((text) => text.textContent);
}"""


def _spend(dashboard: Dashboard) -> None:
    runtime = dashboard.runtime
    timeline = TimelineService(runtime.store, runtime.settings, clock=runtime.clock)
    usage = Usage(input_tokens=300_000_000, output_tokens=20_000_000)
    priced = {"model": "coder-1", "provider": "acme-ai", "role": "implementer", "usage": usage}
    unpriced = {"model": "mystery", "provider": "elsewhere", "role": "architect"}
    events = [NewEvent(phase="implementer", **priced)]
    events += [NewEvent(phase="review", usage=Usage(input_tokens=10), **unpriced)] * 12
    timeline.ingest(events, "runner")


def test_the_spend_by_day_chart_shows_its_whole_labels_on_desktop_and_phone(
    dashboard: Dashboard, pages: Any
) -> None:
    _spend(dashboard)
    page = dashboard.login(pages(), "ana")
    for size in (DESKTOP, PHONE):
        page.set_viewport_size(size)
        page.goto(f"{dashboard.url}/web/spend")
        chart = page.locator('svg.bars[data-by="day"]')
        # $900 + $300 for the priced call, twelve calls of a model without a price.
        expect(chart.locator("text.bar-value")).to_have_text("$1,200.0000 + 12 unpriced")
        for by in ("day", "model", "provider", "role"):
            shown = page.locator(f'svg.bars[data-by="{by}"]')
            expect(shown).to_be_visible()
            assert shown.evaluate(CLIPPED_LABELS) == [], (by, size)
