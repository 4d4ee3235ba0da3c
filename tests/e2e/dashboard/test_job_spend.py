"""What a job cost, on the jobs list and the job's page: priced, unpriced, or both."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect

from watchkeeper.records.queue import NewRunner
from watchkeeper.records.timeline import NewEvent, Usage
from watchkeeper.timeline.service import TimelineService

from .conftest import Dashboard
from .test_jobs import _phases, _queue, _submit

PRIVATE = {"model": "private-9", "provider": "nowhere", "usage": Usage(1_000, 500)}


def test_the_jobs_list_and_a_job_page_show_what_the_job_cost(
    dashboard: Dashboard, pages: Any
) -> None:
    runtime = dashboard.runtime
    queue = _queue(dashboard)
    runner = queue.register(NewRunner("gpu", 1, "gpu-host-1", 4242))
    priced = _submit(queue, "priced job", "acme", "gpu")
    lease = queue.lease(runner.id)[0]
    unpriced = _submit(queue, "unpriced job", "acme", "gpu")
    mixed = _submit(queue, "mixed job", "acme", "gpu")
    idle = _submit(queue, "idle job", "acme", "gpu")
    timeline = TimelineService(runtime.store, runtime.settings, clock=runtime.clock)
    # Two calls of 12k in and 3k out at $3 and $15 per million: $0.162 over 30k tokens.
    timeline.ingest(_phases(priced, lease.task.id, runtime.clock()), "runner")
    timeline.ingest([NewEvent("implementer", job_id=unpriced, **PRIVATE)], "runner")
    timeline.ingest(
        [NewEvent("implementer", job_id=mixed, **PRIVATE) for _ in range(2)]
        + _phases(mixed, "t-0", runtime.clock()),
        "runner",
    )

    page = dashboard.login(pages(), "ana")
    page.goto(f"{dashboard.url}/web/jobs")

    def spend_of(title: str) -> Any:
        link = page.get_by_role("link", name=title, exact=True)
        return page.locator("tr.job", has=link).locator("td.spend")

    expect(spend_of("priced job")).to_have_text("$0.1620 · 30k tokens")
    expect(spend_of("unpriced job")).to_have_text("unpriced · 1.5k tokens")
    expect(spend_of("mixed job")).to_have_text("$0.1620 + 2 unpriced · 33k tokens")
    expect(spend_of("idle job")).to_have_text("no calls")

    page.goto(f"{dashboard.url}/web/jobs/{priced}")
    expect(page.locator("dl.facts dd.spend")).to_have_text("$0.1620 · 30k tokens")
    page.goto(f"{dashboard.url}/web/jobs/{unpriced}")
    expect(page.locator("dl.facts dd.spend")).to_have_text("unpriced · 1.5k tokens")
    page.goto(f"{dashboard.url}/web/jobs/{idle}")
    expect(page.locator("dl.facts dd.spend")).to_have_text("no calls")
